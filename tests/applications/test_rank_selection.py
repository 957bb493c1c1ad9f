"""DR-RL (Erden 2025, arXiv:2512.15973): the tail-energy bound and the truncation (Eckart-Young), the reward's
terms by hand, the Gymnasium MDP against the batched rollout, the guardrail, and learning: the trained rank policy
earns more reward than the best uniform rank on a small network."""

from __future__ import annotations

import pytest
import torch
from gymnasium.utils.env_checker import check_env

from ascent.applications.rank_selection import (
    RANK_METHODS,
    RANKS,
    RankProblem,
    RankSelectionEnv,
    RankTrainParams,
    RewardWeights,
    act,
    fixed_rank,
    make_problem,
    observe,
    rollout,
    score,
    tail_fractions,
    truncate,
)
from ascent.typed import ConfigError


def test_tail_fractions_by_hand():
    s = torch.zeros(1, 32)
    s[0, :2] = torch.tensor([4.0, 3.0])  # energy 16 + 9 = 25; rank 1 leaves 9: sqrt(9 / 25) = 0.6
    assert tail_fractions(s)[0].tolist() == pytest.approx([0.6] + [0.0] * (len(RANKS) - 1))


def test_truncation_error_is_the_tail_energy():
    m = torch.randn(3, 20, 32, generator=torch.Generator().manual_seed(0))
    svd = torch.linalg.svd(m, full_matrices=False)
    for r in (1, 4, 16, 32):
        err = (m - truncate(svd, torch.full((3,), r))).flatten(1).norm(dim=1)
        assert torch.allclose(err, svd[1][:, r:].pow(2).sum(-1).sqrt(), atol=1e-4)
        assert torch.linalg.matrix_rank(truncate(svd, torch.full((3,), r))).tolist() == [min(r, 20)] * 3


def test_full_rank_reward_and_the_perturbation_of_a_rank_change():
    p = make_problem(0, weights=RewardWeights(alpha=1.0, beta=0.2, gamma=0.05, safety=1.0))
    x = p.sample(4, torch.Generator().manual_seed(1))
    full = torch.full((4,), len(RANKS) - 1)
    state, mask, qkv = observe(p, 0, x, full)
    assert mask.all() and state.shape == (4, p.state_dim)
    nxt, fid, cost, pert = act(p, x, qkv, full, full)
    assert torch.allclose(fid, torch.ones(4), atol=1e-5) and cost.tolist() == [1.0] * 4 and pert.tolist() == [0.0] * 4
    # full -> rank 1: the perturbation is Q's energy beyond the first singular value, i.e. the rank-1 tail fraction
    _, _, cost1, pert1 = act(p, x, qkv, full, torch.zeros(4, dtype=torch.long))
    assert torch.allclose(pert1, tail_fractions(qkv[3][1])[:, 0]) and cost1.tolist() == [1 / 32] * 4
    steps, e2e = rollout(p, x, lambda s, m: full)
    assert torch.allclose(steps[0].reward, torch.full((4,), 1.0 - 0.2)) and torch.allclose(e2e, torch.ones(4))


def test_the_gymnasium_mdp_matches_the_batched_rollout():
    p = make_problem(2, weights=RewardWeights(safety=1.0))
    x = p.sample(1, torch.Generator().manual_seed(3))
    actions = [3, 5, 1, 7]
    env = RankSelectionEnv(p)
    check_env(env, skip_render_check=True)
    env.reset(seed=0, options={"x": x[0]})
    rewards = [env.step(a)[1] for a in actions]
    it = iter(actions)
    steps, _ = rollout(p, x, lambda s, m: torch.tensor([next(it)]))
    assert rewards == pytest.approx([float(s.reward) for s in steps], abs=1e-5)
    with pytest.raises(ValueError, match="rank index"):
        env.step(99)


def test_the_guardrail_masks_ranks_with_too_much_tail_energy():
    p = make_problem(0, weights=RewardWeights(safety=0.3))
    p = RankProblem(p.wq, p.wk, p.wv, dims=(32,), weights=p.weights)
    env = RankSelectionEnv(p)
    _, info = env.reset(seed=0)
    assert not info["mask"][0] and info["mask"][-1]
    assert env.step(0)[4]["rank"] == 32  # a masked rank falls back to full rank


def test_dr_rl_earns_more_reward_than_the_best_uniform_rank():
    torch.set_num_threads(1)
    p = make_problem(0)
    test = p.sample(128, torch.Generator().manual_seed(7))
    learned = score(p, RANK_METHODS.resolve("dr_rl(iterations=40, batch=32)")(p, 0), test)
    best_uniform = score(p, RANK_METHODS.resolve("uniform")(p, 0), test)
    every_uniform = [score(p, fixed_rank(i), test)["reward"] for i in range(len(RANKS))]
    assert best_uniform["reward"] == pytest.approx(max(every_uniform), abs=0.05)
    assert learned["reward"] > best_uniform["reward"]
    assert len(set(learned["ranks"])) > 1  # different ranks for different layers


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RewardWeights(beta=-1.0), "reward weights"),
        (lambda: RewardWeights(safety=0.0), "safety"),
        (lambda: RankTrainParams(batch=1), "batch >= 2"),
        (lambda: make_problem(0, d=16), "d = 32"),
    ],
)
def test_bad_settings_fail_with_one_clear_line(make, message):
    with pytest.raises(ConfigError, match=message):
        make()
