"""GAIL: the rollout's rewards are the discriminator's, the discriminator separates expert from policy pairs, and
the policy moves toward the expert's actions from a handful of demonstrations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
pytest.importorskip("minari")

from ascent.classic import CLASSIC  # noqa: E402
from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv  # noqa: E402
from ascent.offline.dataset import DatasetError, Episode, write_dataset  # noqa: E402
from ascent.offline.gail import gail_reward  # noqa: E402

PPO = "n_steps=32, batch_size=256, n_epochs=10, gamma=0.98, gae_lambda=0.8, lr=0.001, hidden=[32, 32]"


def expert_action(obs: np.ndarray) -> int:
    return int(obs[2] + 0.5 * obs[3] > 0)  # balances CartPole-v1 to the 500-step limit


def demos(folder, episodes: int = 3, policy=expert_action) -> str:
    env = gym.make("CartPole-v1")
    eps = []
    for i in range(episodes):
        obs, _ = env.reset(seed=100 + i)
        o, a, r, te, tr = [obs], [], [], [], []
        done = False
        while not done:
            action = policy(obs)
            obs, reward, term, trunc, _ = env.step(action)
            o.append(obs), a.append(action), r.append(reward), te.append(term), tr.append(trunc)
            done = term or trunc
        eps.append(Episode(np.array(o, np.float32), np.array(a), np.array(r, np.float32), np.array(te), np.array(tr)))
    return str(write_dataset(folder, "cartpole-expert-v0", eps, "CartPole-v1", "linear controller"))


def build(spec: str, dataset: str, seed: int = 0):
    torch.manual_seed(seed)
    envs = VecEnv(lambda: gym.make("CartPole-v1"), 8, seed)
    return CLASSIC.resolve(spec)(ClassicContext(envs, 100_000, seed, torch.device("cpu"), dataset))


def test_the_rollout_rewards_are_the_discriminators(tmp_path):
    algo = build(f"gail({PPO})", demos(tmp_path, 1))
    algo.collect()
    ro = algo.rollout
    with torch.no_grad():
        logits = algo.disc(algo.features(ro.obs.flatten(0, 1), ro.actions.flatten(0, 1))).reshape(ro.rewards.shape)
    not_cut = ro.dones == 0  # a time-limit cut adds gamma V(final obs) to the reward; CartPole's random falls end
    assert torch.allclose(ro.rewards[not_cut], gail_reward(logits)[not_cut], atol=1e-6)
    assert not torch.allclose(ro.rewards, torch.ones_like(ro.rewards))  # not the environment's reward of 1


def test_the_discriminator_learns_to_tell_expert_from_policy(tmp_path):
    algo = build(f"gail({PPO}, disc_epochs=200, disc_lr=0.003)", demos(tmp_path))
    algo.collect()
    m = algo.update_discriminator()
    with torch.no_grad():
        expert = algo.disc(algo.features(algo.expert_obs, algo.expert_actions)).squeeze(-1)
        ro = algo.rollout
        policy = algo.disc(algo.features(ro.obs.flatten(0, 1), ro.actions.flatten(0, 1))).squeeze(-1)
    accuracy = 0.5 * float((expert > 0).float().mean() + (policy < 0).float().mean())
    assert accuracy > 0.75 and float(expert.mean()) > float(policy.mean()) + 0.5, (accuracy, m)


def test_gail_imitates_a_demonstrator_the_environment_reward_would_not_favour(tmp_path):
    # Pendulum's episodes all last 200 steps (no survival bias in -log(1 - D)); the demonstrator always applies the
    # full torque +2, which spins the pendulum and earns a poor environment return, so only the discriminator's
    # reward can drive the policy's mean action up from ~0 toward +2
    env = gym.make("Pendulum-v1")
    eps = []
    for i in range(3):
        obs, _ = env.reset(seed=i)
        o, r = [obs], []
        for _ in range(200):
            obs, reward, *_ = env.step(np.array([2.0], np.float32))
            o.append(obs), r.append(reward)
        T = len(r)
        eps.append(Episode(np.array(o, np.float32), np.full((T, 1), 2.0, np.float32), np.array(r, np.float32),
                           np.zeros(T, bool), np.arange(T) == T - 1))  # fmt: skip
    data = str(write_dataset(tmp_path, "pendulum-spin-v0", eps, "Pendulum-v1", "constant torque"))
    torch.manual_seed(0)
    envs = VecEnv(lambda: gym.make("Pendulum-v1"), 8, 0)
    spec = f"gail({PPO}, demo_episodes=2, disc_epochs=4)"
    algo = CLASSIC.resolve(spec)(ClassicContext(envs, 100_000, 0, torch.device("cpu"), data))
    assert len(algo.expert_obs) == 400  # the first two demonstrations

    def mean_action() -> float:
        return float(np.mean(algo.act(algo.rollout.obs.flatten(0, 1).numpy(), True)))

    algo.collect()
    before = mean_action()
    for _ in range(30):
        algo.iteration(False)
    assert mean_action() > before + 0.5, (before, mean_action())


def test_gail_without_demonstrations_says_what_to_set():
    with pytest.raises(DatasetError, match=r"classic.dataset: gail imitates expert demonstrations; set"):
        build(f"gail({PPO})", "")
