"""ray.handoff=sample vs batch, and ray.broadcast=chain vs driver, on the variable-latency reward benchmark.

Part 1, hand-off: `benchmarks/async_speedup.py`'s workload (prompts "i+j=", the reward sleeps U(0, --max-sleep) s
per sample, one after another, as a code-execution verifier would; completions end at EOS) trained with
runtime=ray, the same K, workers, seed and steps, once with today's whole-batch hand-off and once with the
streaming store. Per run: steady-state seconds per step (steps 2..N), the learner's idle fraction (its wait
for data, `time/rollout`, over the step time) and the mean weight-sync time. Arms alternate within a repeat.

Part 2, broadcast: bare receivers (`ascent.runtime.broadcast.ChunkReceiver`, what rollout workers inherit) get
a version of --broadcast-mb MiB from the driver: `driver` (one ray.put, every receiver fetches it) or `chain`
(chunks to the first receiver, forwarded peer to peer); the time until the last receiver holds it, per worker
count. Everything runs on one machine here: Ray's object store hands a `ray.put` to local workers through
shared memory, so the driver path pays no network copy per worker, which is the cost the chain removes
on a real cluster. The point measured is the pattern (and its overhead), not a cluster's bandwidth.

    python benchmarks/stream_broadcast.py --repeats 3 --workers 4          # prints one JSON object
    python benchmarks/stream_broadcast.py --skip-handoff --broadcast-workers 1,2,4,6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent))

from benchmarks.async_speedup import write_task  # noqa: E402
from benchmarks.common import ci95  # noqa: E402

MODEL = [
    "model.hidden_size=64",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=128",
]


def timed_run(args, task: list[str], arm: list[str]) -> dict:
    """Train with runtime=ray and `arm`'s overrides; step time, learner idle fraction, sync time."""
    from ascent.app.pipeline import prepare
    from ascent.config import load_config
    from ascent.rollout import make_engine
    from ascent.runtime import make_trainer
    from ascent.trainer.rl import RLParts

    common = [
        "warmstart.steps=0",
        "control.enabled=false",
        "logging.progress=false",
        "train.eval_every=0",
        "threads=1",
        f"seed={args.seed}",
        f"train.steps={args.steps}",
        f"train.prompts_per_step={args.prompts}",
        f"rollout.samples_per_prompt={args.samples}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        "train.optim.lr=3e-2",
        "algorithm.tis_cap=2.0",
        f"reward={HERE.parent / 'async_speedup.py'}:sleepy_seven",
        "runtime=ray",
        f"ray.max_staleness={args.k}",
        f"ray.rollout_workers={args.workers}",
        f"ray.num_cpus_per_worker={min(0.5, (os.cpu_count() or 1) / args.workers)}",
    ]
    cfg = load_config("default", MODEL + common + task + arm)
    run, policy = prepare(cfg, Path(cfg.output_dir) / "bench", {})
    parts = RLParts(policy, run.task.train, run.encoder, make_engine(cfg.rollout.backend), run.rewards, run.settings)
    trainer = make_trainer(cfg, parts)
    ends, metrics = [], []
    t0 = time.perf_counter()
    trainer.fit(lambda step, m: (ends.append(time.perf_counter()), metrics.append(m)))
    steady = metrics[1:]
    step_s = (ends[-1] - ends[0]) / (len(ends) - 1)
    wait = sum(m["time/rollout"] for m in steady) / len(steady)
    return {
        "arm": " ".join(arm),
        "step_s": round(step_s, 3),
        "learner_idle_frac": round(wait / step_s, 3),
        "learner_wait_s": round(wait, 3),
        "update_s": round(sum(m["time/update"] for m in steady) / len(steady), 3),
        "weight_sync_s": round(sum(m.get("async/weight_sync_s", 0.0) for m in steady) / len(steady), 4),
        "staleness_mean": round(sum(m["async/staleness_mean"] for m in steady) / len(steady), 3),
        "workers_per_batch": round(sum(m.get("async/workers_per_batch", 1.0) for m in steady) / len(steady), 2),
        "startup_s": round(ends[0] - t0, 2),
        "reward_last5": round(sum(m["reward/mean"] for m in metrics[-5:]) / min(5, len(metrics)), 3),
    }


def summary(xs: list[float]) -> dict:
    return {"mean": round(statistics.mean(xs), 4), "ci95": ci95(xs), "values": [round(x, 4) for x in xs]}


def handoff(args) -> dict:
    import ray

    known = {
        "batch": ["ray.handoff=batch"],
        "sample": ["ray.handoff=sample"],
        "batch_k3": ["ray.handoff=batch", "ray.max_staleness=3"],  # today's path with every worker busy (K + 1 = 4)
    }
    arms = {a: known[a] for a in args.arms.split(",")}
    os.environ["ASYNC_BENCH_MAX_SLEEP"] = str(args.max_sleep)
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    load = [os.getloadavg()[0]]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            task = write_task(Path(tmp))
            for r in range(args.repeats):
                order = list(arms) if r % 2 == 0 else list(arms)[::-1]
                for a in order:
                    runs[a].append(timed_run(args, task, arms[a]))
                    load.append(os.getloadavg()[0])
                    print(json.dumps({"repeat": r, **runs[a][-1]}), file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
    out = {
        a: {k: summary([x[k] for x in rs]) for k in ("step_s", "learner_idle_frac", "weight_sync_s")}
        for a, rs in runs.items()
    }
    for a in arms:
        if a != "sample" and "sample" in runs:
            ratio = [b["step_s"] / s["step_s"] for b, s in zip(runs[a], runs["sample"])]
            out[f"step_time_ratio_{a}_over_sample"] = summary(ratio)
    out["runs"] = runs
    out["load_1min"] = [round(x, 2) for x in load]
    return out


def broadcast(args) -> dict:
    import ray
    import torch

    from ascent.runtime.broadcast import ChainBroadcast, ChunkReceiver

    counts = [int(w) for w in args.broadcast_workers.split(",")]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False)
    load = [os.getloadavg()[0]]
    try:
        remote = ray.remote(num_cpus=0.01, max_concurrency=4)(ChunkReceiver)
        peers = [remote.remote() for _ in range(max(counts))]
        ray.get([p.__ray_ready__.remote() for p in peers])
        n = int(args.broadcast_mb * 2**20 / 4)
        state = {"w": torch.randn(n // 2), "v": torch.randn(n - n // 2)}
        version, times = 0, {}
        for w in counts:
            for mode in ("driver", "chain"):
                times[f"{mode}_w{w}"] = []
            for r in range(args.broadcast_repeats):
                for mode in ("driver", "chain") if r % 2 == 0 else ("chain", "driver"):
                    version += 1
                    t0 = time.time()
                    if mode == "driver":
                        ref = ray.put(state)
                        last = max(ray.get([p.fetch.remote(version, [ref]) for p in peers[:w]]))
                        elapsed = last - t0
                    else:
                        chain = ChainBroadcast(peers[:w], args.chunk_mb)
                        chain.send(version, state)
                        elapsed = max(chain.check(version, block=True)) + (chain.sent_at[version] - t0)
                    times[f"{mode}_w{w}"].append(elapsed)
            load.append(os.getloadavg()[0])
    finally:
        ray.shutdown()
    return {
        "payload_mb": args.broadcast_mb,
        "chunk_mb": args.chunk_mb,
        "seconds_until_every_worker_holds_the_version": {k: summary(v) for k, v in times.items()},
        "load_1min": [round(x, 2) for x in load],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--samples", type=int, default=4, help="samples per prompt")
    p.add_argument("--max-new-tokens", type=int, default=12)
    p.add_argument("--max-sleep", type=float, default=0.2, help="the reward sleeps U(0, this) s per sample")
    p.add_argument("--k", type=int, default=1, help="ray.max_staleness of both arms")
    p.add_argument("--workers", type=int, default=4, help="rollout workers of both arms")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--arms", default="batch,sample", help="of batch, sample, batch_k3 (batch path at K = 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--broadcast-mb", type=float, default=16.0)
    p.add_argument("--chunk-mb", type=float, default=1.0)
    p.add_argument("--broadcast-workers", default="1,2,4,6")
    p.add_argument("--broadcast-repeats", type=int, default=5)
    p.add_argument("--skip-handoff", action="store_true")
    p.add_argument("--skip-broadcast", action="store_true")
    args = p.parse_args()
    import torch

    from ascent.kernels.machine import describe

    torch.set_num_threads(1)
    out = {"machine": describe(), "settings": vars(args)}
    if not args.skip_handoff:
        out["handoff"] = handoff(args)
    if not args.skip_broadcast:
        out["broadcast"] = broadcast(args)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
