"""Reward workers (ray.reward_workers): they score exactly as the in-process RewardRunner (failures,
NaN and timeouts included), a run with them trains the very parameters of a run whose rollout workers
score, a killed reward worker is replaced and its batches scored again with nothing lost or counted twice,
and rewards with state stay in the learner's process.

Ray is started here (2 CPUs, no dashboard) once for the module and stopped after it."""

from __future__ import annotations

import math
import time

import pytest
import ray
import torch

from ascent.rewards.runner import RewardRunner
from ascent.runtime.worker import RewardSpec, RewardWorker, RolloutRequest, RolloutResult, RolloutWorker
from tests.runtime.test_async_runtime import ASYNC, N, P, expected_counts, flat, trainer_for

FLAKY = '''
import time

def flaky(prompts, completions, **fields):
    """NaN on completions that start with a digit below 5; hangs on batches that hold prompt 9+9=."""
    if "9+9=" in prompts:
        time.sleep(30)
    return [float("nan") if c[:1] in "01234" and c[:1] else 0.5 for c in completions]


def broken(prompts, completions, **fields):
    raise ValueError("broken reward")
'''


@pytest.fixture(scope="module")
def flaky(seven, tmp_path_factory):
    path = tmp_path_factory.mktemp("flaky") / "flaky.py"
    path.write_text(FLAKY)
    return str(path)


def scores_equal(a, b) -> bool:
    def same(x, y):
        return torch.equal(torch.isnan(x), torch.isnan(y)) and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))

    return (
        same(a.rewards, b.rewards)
        and torch.equal(a.valid, b.valid)
        and same(a.components, b.components)
        and a.stats == b.stats
    )


def test_reward_worker_scores_like_the_runner_failures_included(seven, flaky):
    trainer, _ = trainer_for(seven, [])
    reward = seven[2].split("=", 1)[1]
    sampler = RolloutWorker(trainer.collector, None)
    torch.set_num_threads(1)
    cases = {
        "nan": [reward, f"{flaky}:flaky"],
        "raise": [reward, f"{flaky}:broken"],
        "hang": [reward, f"{flaky}:flaky"],
    }
    for case, specs in cases.items():
        rows = [98, 99, 3, 4] if case == "hang" else [3, 4, 5, 6]  # row 99 is 9+9=
        result = sampler.run(RolloutRequest(0, rows, -1, None, seed=1))  # version -1: the weights it holds
        assert result.scores is None and result.complete  # this rollout worker only samples
        runner, worker = (
            RewardRunner(specs, [1.0, 2.0], timeout_s=0.5),
            RewardWorker(RewardSpec(specs, [1.0, 2.0], 0.5)),
        )
        t0 = time.perf_counter()
        out = worker.score(result)
        assert time.perf_counter() - t0 < 5  # a hanging reward is abandoned after its timeout
        ref = runner.score(result.batch.prompts, result.batch.completions, result.batch.reward_fields())
        assert scores_equal(out.scores, ref) and out.reward_errors == runner.failure_log
        if case == "nan":
            assert 0 < int(out.scores.valid.sum()) < len(result.batch) and math.isnan(
                float(out.scores.rewards[~out.scores.valid][0])
            )
        else:
            assert (
                not out.scores.valid.any()
                and len(out.reward_errors) == 1
                and ("timed out" in out.reward_errors[0]) == (case == "hang")
            )
    assert (
        worker.score(RolloutResult(0, None, None, [], None)) is None
    )  # an unfinished partial rollout: nothing to score


def run(seven, flaky, reward_workers, steps=5, kill_after=None):
    """K=2 with 1 rollout worker (and `reward_workers` reward workers), rewards seven + flaky (NaN on some
    samples); optionally kill reward worker 0 after step `kill_after`. Returns (state, policy, metrics)."""
    reward = seven[2].split("=", 1)[1]
    extra = [
        f"reward=[{reward},{flaky}:flaky]",
        "ray.max_staleness=2",
        "ray.rollout_workers=1",
        f"ray.reward_workers={reward_workers}",
        f"train.steps={steps}",
    ]
    trainer, policy = trainer_for(seven, ASYNC + extra)
    metrics = []
    try:
        while trainer.step_count < steps:
            metrics.append(trainer.step())
            if trainer.step_count == kill_after:
                ray.kill(trainer.pool.scorers[0])
        state = trainer.state_dict()
    finally:
        trainer.close()
    return state, policy, metrics


def test_reward_workers_train_what_rollout_workers_train_and_survive_a_kill(seven, flaky, ray_cluster):
    steps = 5
    ref_state, ref_policy, ref = run(seven, flaky, 0, steps)
    state, policy, m = run(seven, flaky, 2, steps, kill_after=2)
    assert any(0 < x["reward/failed_frac"] < 1 for x in ref)  # the flaky reward failed on some samples
    for key in ("reward/mean", "reward/failed_frac", "reward/errors", "async/staleness_mean", "async/request"):
        assert [x[key] for x in m] == [x[key] for x in ref], key
    assert torch.equal(flat(policy), flat(ref_policy))  # same scores, same updates
    totals = state["async"]["totals"]
    assert (
        totals["reward_workers_replaced"] == 1 and totals["rewards_rescored"] >= 1 and totals["workers_replaced"] == 0
    )
    assert m[-1]["async/reward_workers_replaced"] == 1 and ref[-1]["async/reward_workers_replaced"] == 0
    for s in (state, ref_state):
        assert s["async"]["totals"]["samples"] == steps * P * N and torch.equal(
            s["async"]["row_counts"], expected_counts(100, 0, steps)
        )


def test_rewards_with_state_score_in_the_learner(seven, ray_cluster):
    trainer, _ = trainer_for(
        seven,
        ASYNC
        + [
            "reward=[answer_em,trace]",
            "ray.reward_workers=2",
            "ray.max_staleness=1",
            "ray.rollout_workers=1",
            "train.steps=1",
        ],
    )
    try:
        trainer.start()  # actors are created asynchronously: no need to wait for them here
        assert trainer.score_here and trainer.pool.scorers == []  # one ordered state, checkpointed with the trainer
    finally:
        trainer.close()
    fresh = trainer.state_dict()["rewards"]
    result = RolloutWorker(trainer.collector, None).run(RolloutRequest(0, [3, 4], -1, None, seed=1))
    result.batch.completions = ["<answer>7</answer>"] * len(result.batch)  # correct answers: trace sets its reference
    batch, scores = trainer.accept(
        RolloutRequest(0, [3, 4], 0, None, seed=1), result
    )  # scored here, in consumption order
    assert fresh == {"1:trace": {"ref": None, "batches": 0}} and trainer.state_dict()["rewards"] == {
        "1:trace": {"ref": 1.0, "batches": 1}
    }
    assert bool(scores.valid.all()) and trainer.totals["samples"] == len(batch)
