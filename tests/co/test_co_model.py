"""The attention model and its decoding: feasibility, log-likelihoods against a slow replay, equivariance, modes."""

from __future__ import annotations

import pytest
import torch

from ascent.co.decoding import evaluate, rollout
from ascent.co.envs import check_solutions, make_env, solution_lengths
from ascent.co.model import CO_POLICIES, AttentionModelParams
from ascent.co.problems import generate

TINY = "attention_model(embed_dim=32, layers=2, heads=4, ff_hidden=64)"


def policy(problem: str, spec: str = TINY, seed: int = 0):
    torch.manual_seed(seed)
    return CO_POLICIES.resolve(spec)(problem)


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
@pytest.mark.parametrize("starts", [True, False])
def test_sampled_solutions_are_feasible_and_rewards_are_their_lengths(problem, starts):
    inst = generate(problem, 9, 6, seed=0)
    pol = policy(problem)
    S = 9 if starts else 4
    sol = rollout(pol, inst, S, starts=starts, greedy=False, generator=torch.Generator().manual_seed(1))
    check_solutions(inst, sol.actions)  # never a node twice; CVRP: every route within capacity
    assert torch.allclose(-sol.reward, solution_lengths(inst, sol.actions), atol=1e-5)
    if starts:
        first = sol.actions[:, :, 0]
        assert (first == make_env(inst).start_nodes().expand(6, S)).all()


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_log_likelihood_matches_a_step_by_step_replay(problem):
    inst = generate(problem, 6, 3, seed=2)
    pol = policy(problem, seed=3)
    sol = rollout(pol, inst, 6, starts=True, greedy=False, generator=torch.Generator().manual_seed(0))
    env = make_env(inst)
    enc = pol.encode(inst.locs, getattr(env, "demand", None))
    state, ll = env.reset(6), torch.zeros(3, 6)
    for t in range(sol.actions.shape[2]):
        a = sol.actions[:, :, t]
        if t > 0:  # the first action is forced (POMO): not part of the likelihood
            lp = pol.log_probs(enc, state)
            assert torch.allclose(lp.exp().sum(-1), torch.ones(3, 6), atol=1e-5)
            assert torch.isinf(lp[~state.mask]).all()
            ll = ll + lp.gather(2, a.unsqueeze(-1)).squeeze(-1)
        state = env.step(state, a).state
    assert torch.allclose(sol.log_likelihood, ll, atol=1e-4)
    assert sol.log_likelihood.requires_grad


def test_the_policy_is_permutation_equivariant():
    """No positional encoding: permuting the nodes permutes the first-step probabilities the same way."""
    inst = generate("tsp", 8, 2, seed=0)
    pol = policy("tsp").eval()
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    env, env_p = make_env(inst), make_env(inst.with_locs(inst.locs[:, perm]))
    start = torch.zeros(2, 1, dtype=torch.long)
    s = env.step(env.reset(1), start + perm[0]).state
    s_p = env_p.step(env_p.reset(1), start).state
    lp = pol.log_probs(pol.encode(inst.locs), s)
    lp_p = pol.log_probs(pol.encode(inst.locs[:, perm]), s_p)
    assert torch.allclose(lp[..., perm], lp_p, atol=1e-5)


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_multistart_and_augmentation_never_do_worse_than_greedy(problem):
    inst = generate(problem, 10, 16, seed=5)
    pol = policy(problem, seed=1)
    greedy = evaluate(pol, inst, "greedy")
    multi = evaluate(pol, inst, "multistart")
    aug = evaluate(pol, inst, "multistart_aug8")
    assert (multi <= greedy + 1e-5).all() and (aug <= multi + 1e-5).all()
    assert float(aug.mean()) < float(greedy.mean())


def test_params_are_checked():
    with pytest.raises(ValueError, match="multiple of heads"):
        AttentionModelParams(embed_dim=30, heads=4)
    with pytest.raises(Exception, match="valid names: attention_model"):
        CO_POLICIES.resolve("transformer")
