"""Classic runs end to end: environments and their snapshots, config errors, learning, exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

from ascent.app.classic import evaluate_checkpoint  # noqa: E402
from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.envs import VecEnv, env_state, make_env, set_env_state  # noqa: E402
from ascent.classic.loop import ClassicTrainer  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402


def test_vec_env_resets_in_the_step_an_episode_ends_and_records_it():
    import gymnasium

    envs = VecEnv(lambda: gymnasium.make("CartPole-v1", max_episode_steps=5), 2, seed=0)
    for t in range(5):
        step = envs.step(np.array([t % 2, 1]))
    assert step.truncated.all() and not step.terminated.any()
    assert not np.allclose(step.final_obs, step.obs)  # the last observation of the episode vs the next first one
    assert envs.drain_episodes() == [(5.0, 5), (5.0, 5)] and envs.drain_episodes() == []


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Hopper-v5"])
def test_env_snapshot_continues_bit_for_bit(env_id):
    if env_id == "Hopper-v5":
        pytest.importorskip("mujoco")
    env = make_env(env_id)
    env.reset(seed=3)
    env.action_space.seed(0)
    actions = [i % 2 for i in range(20)] if env_id == "CartPole-v1" else [env.action_space.sample() for _ in range(20)]
    for a in actions[:10]:
        env.step(a)
    snap = env_state(env)
    first = [env.step(a)[:3] for a in actions[10:]]
    other = make_env(env_id)
    other.reset(seed=99)
    other = set_env_state(other, snap)
    second = [other.step(a)[:3] for a in actions[10:]]
    for (o1, r1, d1), (o2, r2, d2) in zip(first, second):
        assert np.array_equal(o1, o2) and r1 == r2 and d1 == d2


def test_bad_configs_say_what_to_change():
    with pytest.raises(ConfigError, match=r"no environment 'CartPol-v1'.*did you mean CartPole-v1.*pprint_registry"):
        load_config("cartpole-ppo", ["classic.env=CartPol-v1"])
    with pytest.raises(ConfigError, match=r"dqn needs a discrete action space.*Pendulum-v1.*use one of: ") as err:
        load_config("acrobot-dqn", ["classic.env=Pendulum-v1"])
    fits = str(err.value).split("use one of: ")[1].split(", ")
    assert {"ppo", "sac"} <= set(fits) and "dqn" not in fits  # the continuous-action algorithms only
    with pytest.raises(ConfigError, match=r"unknown classic algorithm 'ppo2'; valid names: .*dqn.*ppo.*sac"):
        load_config("cartpole-ppo", ["classic.algorithm=ppo2"])
    with pytest.raises(ConfigError, match=r"gae_lambda"):
        load_config("cartpole-ppo", ["classic.algorithm.ppo.gae_lambda=1.5"])
    with pytest.raises(ConfigError, match=r"batch_size 256 exceeds a rollout of 32 x 4 = 128 transitions"):
        load_config("cartpole-ppo", ["classic.num_envs=4"])
    with pytest.raises(ConfigError, match=r"classic.num_envs must be > 0"):
        load_config("cartpole-ppo", ["classic.num_envs=0"])
    from ascent.app.compare import compare

    with pytest.raises(ConfigError, match=r"is a classic Gymnasium run"):
        compare("cartpole-ppo", [], ["seed=1,2"], None, 1, None, 1, "unused", False)


def test_ppo_learns_cartpole(tmp_path):
    """The cartpole-ppo recipe on a third of its budget: well above a random policy's ~22."""
    cfg = load_config("cartpole-ppo", [f"output_dir={tmp_path}", "classic.total_steps=30000", "logging.progress=false"])
    summary = train(cfg)
    assert summary["final_return"] > 150 and summary["env_steps"] == 30208
    run = tmp_path / "cartpole-ppo"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"episode/return", "loss/policy", "loss/value", "time/fps"} <= set(rows[0])
    assert (run / "curves.png").exists() and Checkpointer(run / "checkpoints").latest() is not None
    assert set(json.loads((run / "summary.json").read_text())) >= {"final_return", "final_return_std", "wall_seconds"}
    again = evaluate_checkpoint(run, Checkpointer(run / "checkpoints").latest())  # `ascent eval RUN_DIR`
    assert again["returns"] == summary["final_returns"]


def _weights(run_dir) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


@pytest.mark.parametrize(
    "recipe, overrides, half",
    [
        (
            "cartpole-ppo",
            ["classic.total_steps=1024", "classic.num_envs=4", "classic.algorithm.ppo.batch_size=64"]
            + ["classic.algorithm.ppo.n_epochs=4"],
            512,
        ),
        ("acrobot-dqn", ["classic.total_steps=400", "classic.algorithm.dqn.hidden=[32,32]"], 200),
        (
            "hopper-ppo",
            ["classic.total_steps=512", "classic.algorithm.ppo.n_steps=128", "classic.algorithm.ppo.hidden=[16,16]"],
            256,
        ),
        (
            "halfcheetah-sac",
            ["classic.env=Pendulum-v1", "classic.total_steps=300", "classic.algorithm.sac.learning_starts=100"]
            + ["classic.algorithm.sac.hidden=[32,32]", "classic.algorithm.sac.batch_size=32"],
            150,
        ),
    ],
)
def test_resume_is_exact(tmp_path, recipe, overrides, half):
    """N steps in one go == N/2 steps, stop, resume for the rest: same weights, same evaluation returns."""
    if recipe == "hopper-ppo":
        pytest.importorskip("mujoco")
    common = [*overrides, "logging.progress=false", "classic.eval_episodes=2", f"output_dir={tmp_path}"]
    whole = train(load_config(recipe, [*common, "name=whole"]))
    assert train(load_config(recipe, [*common, "name=split"]), stop_at=half) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"] and split["env_steps"] == whole["env_steps"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_trainer_state_round_trips_the_normalisers():
    pytest.importorskip("mujoco")
    cfg = load_config("hopper-ppo", ["classic.algorithm.ppo.n_steps=64", "classic.total_steps=64"]).classic
    trainer = ClassicTrainer(cfg, seed=0)
    trainer.fit(lambda s, m: None, lambda s: None)
    state = trainer.state_dict()
    fresh = ClassicTrainer(cfg, seed=1)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.envs.obs_norm.rms.mean, trainer.envs.obs_norm.rms.mean)
    np.testing.assert_array_equal(fresh.envs.reward_norm.returns, trainer.envs.reward_norm.returns)
    np.testing.assert_array_equal(fresh.envs.obs, trainer.envs.obs)


def test_cli_trains_resumes_and_evaluates_a_classic_run(tmp_path, capsys):
    from ascent.cli import main

    args = ["cartpole-ppo", f"output_dir={tmp_path}", "classic.total_steps=512", "logging.progress=false"]
    assert main(["train", *args, "classic.eval_episodes=2"]) == 0
    run = tmp_path / "cartpole-ppo"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 512 and len(summary["final_returns"]) == 2
    assert main(["train", "--resume", str(run)]) == 0  # finished: evaluates again, same returns
    assert json.loads((run / "summary.json").read_text())["final_returns"] == summary["final_returns"]
    capsys.readouterr()
    assert main(["eval", str(run), "classic.eval_episodes=2"]) == 0
    assert json.loads(capsys.readouterr().out)["returns"] == summary["final_returns"]
    assert main(["train", *args]) == 2  # the run directory is taken: a clear error, not a traceback
    assert "already holds a run" in capsys.readouterr().err
    assert main(["export", str(run), str(tmp_path / "out")]) == 2
    assert "already plain safetensors" in capsys.readouterr().err
