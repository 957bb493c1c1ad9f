"""ONI (Zheng et al. 2024, arXiv:2410.23022): the scripted annotator, the hashed message features, the intrinsic
reward with its episodic count normalisation by hand, the KeyDoor world's messages and dynamics, the asynchronous
annotation lag, a reward model that generalises to a wording it was never labelled on, and exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ascent.classic.oni import ONIParams, annotate, intrinsic_rewards, message_features

gym = pytest.importorskip("gymnasium")


def test_annotator_and_features():
    assert [annotate(m) for m in ("You unlock the blue door.", "You bump into the wall.", "")] == [1, 0, 0]
    a, b = message_features("You pick up the red key.", 128), message_features("You pick up the red key.", 128)
    assert np.array_equal(a, b) and a.sum() == 6 + 5  # six words, five adjacent pairs
    assert not np.array_equal(a, message_features("You pick up the blue key.", 128))


def test_intrinsic_reward_by_hand():
    """coef 0.5, exponent 1: a positive message shown for the 2nd time this episode gets 0.25; a negative one 0; no
    message 0 even where the classifier would say positive."""
    r = intrinsic_rewards(np.array([1.0, 0.0, 1.0]), np.array([2, 1, 0]), 0.5, 1.0, np.array([True, True, False]))
    assert np.allclose(r, [0.25, 0.0, 0.0])


def test_keydoor_messages_and_dynamics():
    from ascent.classic.keydoor import make

    env = make(size=5, flavour=0.0)
    env.reset(seed=0)
    env.door, env.key, env.goal, env.pos, env.colour = (2, 1), (0, 0), (4, 4), (1, 0), "red"
    env.has_key, env.open = False, False
    _, r, term, _, info = env.step(0)  # east into the wall column (not the door)
    assert info["message"] == "You bump into the wall." and env.pos == (1, 0) and r == 0.0
    env.step(1)  # south to (1, 1)
    _, _, _, _, info = env.step(0)  # east into the locked door without the key
    assert info["message"] == "The red door is locked." and env.pos == (1, 1)
    env.step(3), env.step(2)  # north to (1, 0), west onto the key at (0, 0)
    assert env.has_key and env.obs()[-1] == 1.0
    env.step(0), env.step(1)
    _, _, _, _, info = env.step(0)
    assert info["message"] == "You unlock the red door." and env.pos == (2, 1) and env.open
    env.pos = (4, 3)
    _, r, term, _, _ = env.step(1)
    assert (r, term) == (1.0, True)


def _algo(**kw):
    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv
    from ascent.classic.keydoor import make
    from ascent.classic.oni import ONI

    torch.manual_seed(0)
    envs = VecEnv(lambda: make(size=7), 2, seed=0)
    params = ONIParams(n_steps=64, batch_size=64, n_epochs=1, **kw)
    return ONI(ClassicContext(envs, 10_000, 0, torch.device("cpu")), params)


def test_labels_arrive_after_the_lag_and_generalise():
    """With annotation_delay 2 the messages first seen in iteration 1 are labelled at the end of iteration 2, those of
    iteration 2 are still pending then; once trained, the reward model calls a wording never annotated ("You pick up
    the purple key.") progress and a new bump message not."""
    algo = _algo(annotation_delay=2, reward_epochs=50)
    algo.iteration(False)
    assert algo.labels == {} and len(algo.pending) == 1
    first = list(algo.pending[0][1])
    algo.iteration(False)
    assert sorted(algo.labels) == sorted(first) and algo.pending and algo.pending[0][0] == 1
    while not any(annotate(m) for m in algo.labels):
        algo.iteration(False)
    for _ in range(5):
        algo.iteration(False)
    assert algo.labels["You bump into the wall."] == 0
    assert algo.positive(["You pick up the purple key.", "You bump into the purple wall."]).tolist() == [1.0, 0.0]


def test_extrinsic_only_when_coefficient_is_zero():
    from ascent.classic.envs import Step

    algo = _algo(intrinsic_coef=0.0)
    step = Step(
        np.zeros((2, 1)),
        np.array([0.0, 1.0], np.float32),
        np.array([False, True]),
        np.array([False, False]),
        np.zeros((2, 1)),
        None,
        ["You pick up the red key.", ""],
    )
    assert algo.reward(torch.zeros(2, 1), torch.zeros(2), step).tolist() == [0.0, 1.0]


def test_bad_params_say_what_to_change():
    with pytest.raises(ValueError, match="threshold must be in"):
        ONIParams(threshold=1.0)
    with pytest.raises(ValueError, match="intrinsic_coef"):
        ONIParams(intrinsic_coef=-1.0)


def test_resume_is_exact(tmp_path):
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import Checkpointer

    common = ["classic.env=ascent/KeyDoor-v0", "classic.total_steps=1024", "logging.progress=false"]
    common += ["classic.algorithm=oni(n_steps=64,batch_size=64,n_epochs=2,annotation_delay=1)", "classic.num_envs=2"]
    common += ["classic.eval_episodes=2", f"output_dir={tmp_path}"]
    whole = train(load_config("cartpole-ppo", [*common, "name=whole"]))
    assert train(load_config("cartpole-ppo", [*common, "name=split"]), stop_at=512) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
