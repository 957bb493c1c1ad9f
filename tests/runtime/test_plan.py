"""`ascent plan`: the capacity model against an event simulation of AsyncTrainer's schedule, and the command."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from ascent.cli import main
from ascent.config import load_config
from ascent.config.loader import to_dict
from ascent.runtime.plan import Measurements, staleness_needed, step_seconds, workers_needed


def simulate(cycle: float, learn: float, workers: int, k: int, steps: int = 2000) -> float:
    """Seconds per step in steady state, step by step: batch s is requested when the learner ends step
    s - k - 1, goes to the first free worker (FIFO), takes `cycle` there; step s starts when batch s is in
    and step s - 1 is over, and takes `learn`."""
    end, free = [], [0.0] * workers
    for s in range(steps):
        issued = end[s - k - 1] if s > k else 0.0
        w = min(range(workers), key=free.__getitem__)
        free[w] = max(issued, free[w]) + cycle
        end.append(max(end[-1] if end else 0.0, free[w]) + learn)
    return (end[-1] - end[steps // 2 - 1]) / (steps - steps // 2)


@pytest.mark.parametrize("cycle,learn", [(0.3, 0.2), (1.0, 0.5), (2.5, 0.5), (2.5, 1.0), (0.1, 1.0)])
def test_step_time_matches_the_simulated_schedule(cycle, learn):
    m = Measurements(24, cycle, learn, 0.0)
    for workers, k in itertools.product([1, 2, 3, 5], [0, 1, 2, 4]):
        assert step_seconds(m, workers, k) == pytest.approx(simulate(cycle, learn, workers, k), rel=2e-3), (workers, k)


def test_workers_and_staleness_needed_keep_the_learner_busy():
    m = Measurements(24, worker_batch_s=2.3, learner_step_s=0.5, sync_s=0.2)  # C = 2.5
    n = workers_needed(m)
    assert n == 5 and staleness_needed(m, n) == 5
    assert step_seconds(m, n, n) == 0.5 and simulate(2.5, 0.5, n, n) == pytest.approx(0.5, rel=1e-3)
    assert step_seconds(m, n - 1, n) > 0.5 and step_seconds(m, n, n - 1) > 0.5  # one fewer of either: the learner waits
    assert step_seconds(m, 1, 0) == pytest.approx(3.0)  # the synchronous loop: C + T_learn


def test_plan_command_reads_a_run_directory(tmp_path, capsys):
    cfg = load_config("default", ["train.prompts_per_step=6", "rollout.samples_per_prompt=4", "learner.world_size=2"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    steps = [
        {
            "phase": "rl",
            "step": i,
            "time/update": 0.5,
            "async/worker_rollout_s": 0.4,
            "async/worker_reward_s": 1.6,
            "async/weight_sync_s": 0.1 if i > 1 else 9.0,
        }
        for i in range(1, 6)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    assert main(["plan", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measurements"] == {
        "samples_per_step": 24,
        "worker_batch_s": 2.0,
        "learner_step_s": 0.5,
        "sync_s": 0.1,
        "learner_ranks": 2,
        "learner_params": 0,
        "learner_shard": "none",
    }  # step 1 (start-up) left out
    assert out["workers_needed"] == 5 and out["rows"][0] == {
        "workers": 1,
        "max_staleness": 0,
        "step_s": 2.6,
        "samples_per_s": 24 / 2.6,
        "learner_busy": 0.5 / 2.6,
        "processes": 3,  # two learner ranks (the driver is rank 0) and one rollout worker
    }
    assert [r["processes"] - r["workers"] for r in out["rows"]] == [2] * len(out["rows"])
    assert main(["plan", str(tmp_path), "--learner-step-s", "2.1"]) == 0
    text = capsys.readouterr().out
    assert "-> 1 rollout workers at ray.max_staleness=1" in text and "assumptions:" in text
    assert "0.500 s per step on 2 ranks" not in text and "2.100 s per step on 2 ranks (learner.world_size)" in text
    assert main(["plan", str(tmp_path), "--learner-ranks", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["processes"] == 2
    assert main(["plan", "--worker-batch-s", "1"]) == 2
    assert "needs samples_per_step, learner_step_s" in capsys.readouterr().err


def test_learner_memory_per_rank_counts_fsdp2_shards(capsys):
    from ascent.runtime.plan import learner_memory

    whole = learner_memory(1000, 2, "none")
    assert whole == {
        "weights": 4000, "gradients": 4000, "optimizer": 8000, "total": 16000,
        "rank0_whole_weights": 0, "rank0_total": 16000,
    }  # fmt: skip
    sharded = learner_memory(1000, 2, "fsdp2")
    assert sharded["total"] == 8000  # the 2-rank test measured exactly half the moments
    assert (sharded["rank0_whole_weights"], sharded["rank0_total"]) == (4000, 12000)  # + rank 0's whole weights
    assert learner_memory(1001, 4, "fsdp2")["optimizer"] == 2 * 251 * 4
    argv = ["--samples-per-step", "8", "--worker-batch-s", "2", "--learner-step-s", "1", "--learner-ranks", "2"]
    assert main(["plan", *argv, "--learner-params", str(2**28), "--learner-shard", "fsdp2"]) == 0
    out = capsys.readouterr().out
    assert "learner.shard=fsdp2, 2 ranks): weights 0.50 + gradients 0.50 + optimizer state 1.00 = 2.00 GiB" in out
    assert "; rank 0 also keeps the whole weights for the rollout (1.00): 3.00 GiB, activations not counted" in out
