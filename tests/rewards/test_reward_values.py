"""A reward function cannot crash a run or reach into the trainer: values that are not finite real numbers
(10**400, "1.0", True, NaN, inf) are recorded failures, rewards get copies of the data, and a reward that
times out leaves no thread spinning and no process behind (the security probe's findings 5 and 8)."""

from __future__ import annotations

import math
import multiprocessing
import threading
import time

import numpy as np
import pytest

from ascent.rewards import RewardRunner

REWARDS = """
import time
import numpy as np

def mixed(prompts, completions, **kw):
    return [10**400, "1.0", True, float("nan"), float("inf"), 0.5, np.float32(0.25), None, np.bool_(True), [1.0]]

def mutate(prompts, completions, meta, **kw):
    completions[0] = "MUTATED"
    prompts.append("extra")
    meta[0]["injected"] = True
    meta[1]["tags"].append("x")
    return [1.0] * len(completions)

SEEN = []

def look(prompts, completions, meta, **kw):
    SEEN.append((list(completions), [dict(m) for m in meta]))
    return [1.0] * len(completions)

def spin(prompts, completions, **kw):
    while True:
        pass

def sleep(prompts, completions, **kw):
    time.sleep(60)
    return [1.0] * len(completions)
"""


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "rewards.py"
    path.write_text(REWARDS)
    return path


def test_values_that_are_not_finite_numbers_are_recorded_failures(reward_file):
    runner = RewardRunner([f"{reward_file}:mixed"])
    res = runner.score(["p"] * 10, ["c"] * 10, [{}] * 10)  # before: OverflowError out of score()
    assert res.valid.tolist() == [False] * 5 + [True, True, False, False, False]
    assert res.rewards[5:7].tolist() == [0.5, 0.25]
    assert all(math.isnan(x) for x in res.components[:5, 0].tolist())
    assert res.stats["reward/failed_frac"] == pytest.approx(0.7, abs=1e-6)
    assert res.stats["reward/no_opinion_frac"] == pytest.approx(0.1, abs=1e-6)
    assert "returned 7 non-finite or non-numeric values" in runner.failure_log[0]


def test_rewards_get_copies_of_the_data(reward_file):
    runner = RewardRunner([f"{reward_file}:mutate", f"{reward_file}:look"])
    prompts, completions = ["p1", "p2"], ["a", "b"]
    fields = [{"meta": {"id": 1}}, {"meta": {"id": 2, "tags": []}}]
    res = runner.score(prompts, completions, fields)
    assert res.valid.tolist() == [True, True]
    assert prompts == ["p1", "p2"] and completions == ["a", "b"]  # the trainer's batch
    assert fields == [{"meta": {"id": 1}}, {"meta": {"id": 2, "tags": []}}]  # the dataset's rows
    seen = runner.fns[1].__globals__["SEEN"][-1]
    assert seen == (["a", "b"], [{"id": 1}, {"id": 2, "tags": []}])  # the next reward saw the originals


def reward_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("reward-") and t.is_alive()]


def settle(condition, seconds: float = 5.0) -> bool:
    """Wait (up to `seconds`) for a condition that the runner brings about asynchronously."""
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)
    return condition()


def test_a_spinning_reward_leaves_no_thread_running(reward_file):
    before = len(reward_threads())
    runner = RewardRunner([f"{reward_file}:spin"], timeout_s=0.3)
    for _ in range(3):
        res = runner.score(["p"], ["c"], [{}])
        assert res.valid.tolist() == [False] and "timed out after 0.3s" in runner.failure_log[-1]
    assert settle(lambda: len(reward_threads()) <= before), reward_threads()
    assert multiprocessing.active_children() == []


def test_a_reward_blocked_in_c_code_runs_in_a_killable_process_after_its_first_timeout(reward_file):
    before = len(reward_threads())
    runner = RewardRunner([f"{reward_file}:sleep"], timeout_s=0.3)
    for _ in range(3):
        assert runner.score(["p"], ["c"], [{}]).valid.tolist() == [False]
    # the first call's thread sleeps on in C (it cannot be stopped there); the two after it ran in processes
    assert len(reward_threads()) <= before + 1 and multiprocessing.active_children() == []
    assert runner.failure_log[-1].endswith("the call is abandoned")


def test_numpy_and_tensor_scalars_are_numbers():
    import torch

    from ascent.rewards.runner import _as_value

    assert _as_value(np.float64(0.5)) == (0.5, False) and _as_value(np.int64(2)) == (2.0, False)
    assert _as_value(torch.tensor(0.75)) == (0.75, False) and _as_value(torch.tensor([1.0, 2.0]))[1]
