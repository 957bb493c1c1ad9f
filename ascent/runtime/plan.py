"""`ascent plan`: how many rollout workers keep the learner busy (ECHO-2's overlap-based capacity model,
Xiao et al., 2026, arXiv:2602.02192).

The model is the schedule `AsyncTrainer` runs. Per step the learner takes T_learn seconds; one worker takes
C = T_sync + T_worker seconds to load a new version's weights, then sample and score one step's batch.
Batch s is requested when the learner finishes step s - K - 1 (staleness bound K), waits for one of the N
workers, and must be ready when step s starts. In steady state one step takes

    P(N, K) = max(T_learn, C / N, (C + T_learn) / (K + 1))

the learner, the workers' total rate, or the staleness window, whichever binds (N = 1, K = 0 is the
synchronous loop: P = C + T_learn). The learner is busy a fraction T_learn / P of the time; it never waits
once N >= C / T_learn and K + 1 >= (C + T_learn) / T_learn, i.e. with

    N* = ceil(C / T_learn) workers  at  K* = ceil(C / T_learn).

`tests/runtime/test_plan.py` checks the formula against an event simulation of the schedule.

Measurements come from a run's metrics.jsonl (medians over its RL steps, the first left out) or the flags.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

ASSUMPTIONS = [
    "every worker has its own compute: a worker's batch time does not grow with the number of workers",
    "the learner's step time does not depend on how stale its batch is, and it takes one batch per step",
    "weight sync is on each worker's path once per version (load before sampling); "
    "publishing costs the learner nothing",
    "reward latency is part of the worker's batch time (workers score their own batches); no worker failures",
    "a local (runtime=local) run's rollout + reward time stands for one worker's batch time",
    "T_learn is the update time with the run's learner ranks (learner.world_size); other rank counts change it "
    "(not modelled); each learner rank and each worker is one process with its own compute",
]


@dataclass(frozen=True)
class Measurements:
    """What the model needs, in seconds per step."""

    samples_per_step: int
    """Samples the learner consumes per step (prompts_per_step x samples_per_prompt)."""
    worker_batch_s: float
    """T_worker: one worker's seconds to sample and score one step's batch."""
    learner_step_s: float
    """T_learn: the learner's seconds per step (the update)."""
    sync_s: float
    """T_sync: seconds to get a new version's weights into a worker."""
    learner_ranks: int = 1
    """Learner processes (learner.world_size) that T_learn was measured with."""
    learner_params: int = 0
    """Trainable parameters of the learner's model (0: unknown, no memory line)."""
    learner_shard: str = "none"
    """learner.shard: "none" (every rank holds everything) or "fsdp2" (weights, gradients, moments / ranks)."""


@dataclass(frozen=True)
class Row:
    workers: int
    max_staleness: int
    step_s: float
    samples_per_s: float
    learner_busy: float
    processes: int = 0
    """Processes the layout runs: the learner ranks (rank 0 is the driver) plus the rollout workers."""


def learner_memory(params: int, ranks: int, shard: str, bytes_per_value: int = 4) -> dict[str, int]:
    """Bytes per learner rank of fp32 weights, gradients and AdamW's two moments for `params` trainable parameters:
    all of them on every rank with learner.shard=none (data parallelism replicates), 1/ranks of each with fsdp2
    (dim-0 shards, `ascent.trainer.fsdp`; measured exactly half of the AdamW state on 2 ranks). With fsdp2 rank 0
    (the driver) also keeps the whole weights for the rollout, KL monitor and evaluation (`rank0_whole_weights`,
    refreshed from the shards after each update), so `rank0_total` is its sum; with none it is `total`.
    Activations and FSDP2's transiently gathered layer (and, on rank 0, one gathered parameter while it refreshes)
    are not counted; neither is a frozen reference model (whole on every rank either way, when the loss uses one)."""
    share = ranks if shard == "fsdp2" else 1
    per = math.ceil(params / share) * bytes_per_value
    out = {"weights": per, "gradients": per, "optimizer": 2 * per}
    out["total"] = sum(out.values())
    out["rank0_whole_weights"] = params * bytes_per_value if shard == "fsdp2" and ranks > 1 else 0
    out["rank0_total"] = out["total"] + out["rank0_whole_weights"]
    return out


def step_seconds(m: Measurements, workers: int, max_staleness: int) -> float:
    """P(N, K) = max(T_learn, C / N, (C + T_learn) / (K + 1)), C = T_sync + T_worker.

    >>> m = Measurements(24, 2.0, 0.5, 0.0)
    >>> step_seconds(m, 1, 0), step_seconds(m, 4, 1), step_seconds(m, 2, 4), step_seconds(m, 4, 4)
    (2.5, 1.25, 1.0, 0.5)
    """
    cycle = m.sync_s + m.worker_batch_s
    return max(m.learner_step_s, cycle / workers, (cycle + m.learner_step_s) / (max_staleness + 1))


def workers_needed(m: Measurements) -> int:
    """N* = K* = ceil(C / T_learn): the fewest workers, and the staleness, with which the learner never waits.

    >>> workers_needed(Measurements(24, 2.0, 0.5, 0.1))
    5
    """
    return max(1, math.ceil((m.sync_s + m.worker_batch_s) / m.learner_step_s - 1e-9))


def row(m: Measurements, workers: int, max_staleness: int) -> Row:
    p = step_seconds(m, workers, max_staleness)
    return Row(workers, max_staleness, p, m.samples_per_step / p, m.learner_step_s / p, m.learner_ranks + workers)


def table(m: Measurements, max_staleness: Optional[int] = None) -> list[Row]:
    """The synchronous loop (1 worker, K = 0), then N = 1, 2, 4, ... up to N* (and N* itself), each at the
    smallest K at which the staleness window does not bind, or at the given K."""
    need = workers_needed(m)
    counts = sorted({min(2**i, need) for i in range(need.bit_length() + 1)} | {need})
    return [row(m, 1, 0)] + [
        row(m, n, staleness_needed(m, n) if max_staleness is None else max_staleness) for n in counts
    ]


def staleness_needed(m: Measurements, workers: int) -> int:
    """The smallest K with (C + T_learn) / (K + 1) <= max(T_learn, C / N): more staleness buys nothing.

    >>> [staleness_needed(Measurements(24, 2.0, 0.5, 0.0), n) for n in (1, 2, 4)]
    [1, 2, 4]
    """
    cycle = m.sync_s + m.worker_batch_s
    return max(0, math.ceil((cycle + m.learner_step_s) / max(m.learner_step_s, cycle / workers) - 1e-9) - 1)


def measure(run_dir: Path) -> dict[str, float]:
    """Medians over a run's RL steps (the first, which holds start-up, left out when there are more)."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"phase": "rl"' in x]
    if not lines:
        raise FileNotFoundError(f"{run_dir / 'metrics.jsonl'} has no RL steps to measure")
    lines = lines[1:] if len(lines) > 1 else lines
    med = lambda f: statistics.median(f(x) for x in lines)  # noqa: E731
    out = {"learner_step_s": med(lambda x: x["time/update"])}
    if "async/worker_rollout_s" in lines[0]:  # runtime=ray: the workers' own timings
        out["worker_batch_s"] = med(lambda x: x["async/worker_rollout_s"] + x["async/worker_reward_s"])
        out["sync_s"] = med(lambda x: x.get("async/weight_sync_s", 0.0))
    else:
        out["worker_batch_s"] = med(lambda x: x["time/rollout"] + x["time/reward"])
    return out


def plan_command(
    run_dir: Optional[str], overrides: dict[str, Optional[float]], max_staleness: Optional[int], as_json: bool
) -> int:
    """`ascent plan`: measurements from RUN_DIR and/or flags -> the model's answer, printed with its assumptions."""
    from ascent.config.loader import ConfigError, config_from_dict

    found: dict[str, float] = {}
    if run_dir:
        import yaml

        found = measure(Path(run_dir))
        cfg = config_from_dict(yaml.safe_load((Path(run_dir) / "config.yaml").read_text()))
        found["samples_per_step"] = cfg.train.prompts_per_step * cfg.rollout.samples_per_prompt
        found["learner_ranks"] = cfg.learner.world_size
        found["learner_shard"] = cfg.learner.shard
    found.update({k: v for k, v in overrides.items() if v is not None})
    found.setdefault("sync_s", 0.0)
    missing = [k for k in ("samples_per_step", "worker_batch_s", "learner_step_s") if k not in found]
    if missing:
        raise ConfigError(
            f"ascent plan needs {', '.join(missing)}: "
            f"give a run directory (its metrics.jsonl) or --{missing[0].replace('_', '-')}"
        )
    if found["learner_step_s"] <= 0:
        raise ConfigError("the learner step time must be > 0")
    m = Measurements(
        int(found["samples_per_step"]),
        float(found["worker_batch_s"]),
        float(found["learner_step_s"]),
        float(found["sync_s"]),
        int(found.get("learner_ranks") or 1),
        int(found.get("learner_params") or 0),
        str(found.get("learner_shard") or "none"),
    )
    rows = table(m, max_staleness)
    if as_json:
        print(
            json.dumps(
                {
                    "measurements": asdict(m),
                    "workers_needed": workers_needed(m),
                    "learner_memory_bytes": (
                        learner_memory(m.learner_params, m.learner_ranks, m.learner_shard)
                        if m.learner_params > 0
                        else None
                    ),
                    "rows": [asdict(r) for r in rows],
                    "assumptions": ASSUMPTIONS,
                },
                indent=1,
            )
        )
        return 0
    print(report(m, rows, max_staleness))
    return 0


def report(m: Measurements, rows: list[Row], max_staleness: Optional[int]) -> str:
    need = workers_needed(m)
    lines = [
        f"measured: {m.samples_per_step} samples per step; one worker: {m.worker_batch_s:.3f} s per batch "
        f"({m.samples_per_step / m.worker_batch_s:.1f} samples/s) "
        f"+ {m.sync_s:.3f} s weight sync; learner: {m.learner_step_s:.3f} s per step "
        f"on {m.learner_ranks} rank{'s' if m.learner_ranks > 1 else ''} (learner.world_size)",
        "model (ECHO-2, Xiao et al. 2026): "
        "step = max(T_learn, (T_sync + T_worker) / workers, (T_sync + T_worker + T_learn) / (K + 1))",
        f"-> {need} rollout workers at ray.max_staleness={staleness_needed(m, need)} keep the learner busy "
        f"({m.samples_per_step / m.learner_step_s:.1f} samples/s, "
        f"{(m.sync_s + m.worker_batch_s + m.learner_step_s) / m.learner_step_s:.2f}x the synchronous loop)",
        "",
        f"{'workers':>8} {'K':>4} {'step s':>9} {'samples/s':>10} {'learner busy':>13} {'processes':>10}",
    ]
    lines += [
        f"{r.workers:>8} {r.max_staleness:>4} {r.step_s:>9.3f} {r.samples_per_s:>10.1f} {r.learner_busy:>12.0%} "
        f"{r.processes:>10}"
        for r in rows
    ]
    if max_staleness is not None and need > max_staleness:
        lines.append(
            f"with ray.max_staleness={max_staleness} the staleness window binds: "
            f"step >= {step_seconds(m, need, max_staleness):.3f} s whatever the workers"
        )
    if m.learner_params > 0:
        mem = learner_memory(m.learner_params, m.learner_ranks, m.learner_shard)
        gib = {k: v / 2**30 for k, v in mem.items()}
        lines.append(
            f"learner memory per rank (fp32, AdamW, learner.shard={m.learner_shard}, {m.learner_ranks} "
            f"rank{'s' if m.learner_ranks > 1 else ''}): weights {gib['weights']:.2f} + gradients "
            f"{gib['gradients']:.2f} + optimizer state {gib['optimizer']:.2f} = {gib['total']:.2f} GiB"
            + (
                f"; rank 0 also keeps the whole weights for the rollout ({gib['rank0_whole_weights']:.2f}): "
                f"{gib['rank0_total']:.2f} GiB"
                if mem["rank0_whole_weights"]
                else ""
            )
            + ", activations not counted"
        )
    lines += ["", "assumptions:"] + [f"  - {a}" for a in ASSUMPTIONS]
    return "\n".join(lines)
