"""check_env: accepts a good environment, lists every problem of a broken one."""

from __future__ import annotations

import asyncio
import math
import warnings

import pytest

from ascent.envs import Env, EnvCheckError, Observation, StepResult, check_env
from ascent.envs.base import PROBE_ACTIONS


class Good(Env):
    def reset(self, task):
        return Observation(text=f"Say {task}.")

    def step(self, action):
        return StepResult(observation="again", reward=float(action == "hi"), done=action == "hi", info={})


class AsyncGood(Env):
    """Natively async: only areset/astep."""

    async def areset(self, task):
        await asyncio.sleep(0)
        return Observation(text="go")

    async def astep(self, action):
        return StepResult("ok", 0.0, False)


class Broken(Env):
    def reset(self, task):
        return "a plain string"  # not an Observation

    def step(self, action):
        return StepResult(observation="x", reward=0.0, done=False)


class Crashy(Good):
    def step(self, action):
        if "<tool_call>" in action:
            raise ValueError("cannot parse")
        return StepResult(observation=None, reward=math.nan, done=1, info=[])


def test_good_envs_pass():
    """No error and no warning, after a fresh episode for each probe action (two resets first, to compare)."""

    class Recording(Good):
        def __init__(self):
            self.tasks, self.actions = [], []

        def reset(self, task):
            self.tasks.append(task)
            return super().reset(task)

        def step(self, action):
            self.actions.append(action)
            return super().step(action)

    env = Recording()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        check_env(env, "hi")
        check_env(AsyncGood(), "hi")
    assert env.actions == list(PROBE_ACTIONS) and env.tasks == ["hi"] * (2 + len(PROBE_ACTIONS))


def test_reset_of_wrong_type():
    with pytest.raises(EnvCheckError, match=r"reset must return ascent.envs.Observation, got str"):
        check_env(Broken(), "t")


def test_every_step_problem_is_listed():
    with pytest.raises(EnvCheckError) as err:
        check_env(Crashy(), "t")
    msg = str(err.value)
    assert "raised ValueError: cannot parse" in msg and "not an exception" in msg
    assert "observation must be a str, got NoneType" in msg
    assert "reward must be a finite float, got nan" in msg
    assert "done must be a bool, got int" in msg
    assert "info must be a dict, got list" in msg


def test_missing_methods_and_non_env():
    with pytest.raises(EnvCheckError, match=r"must implement reset"):
        check_env(Env(), "t")
    with pytest.raises(EnvCheckError, match=r"has no areset\(\)"):
        check_env(object(), "t")


def test_nondeterministic_reset_warns():
    class Random(Good):
        n = 0

        def reset(self, task):
            self.n += 1
            return Observation(text=f"episode {self.n}")

    with pytest.warns(UserWarning, match="different text"):
        check_env(Random(), "t")
