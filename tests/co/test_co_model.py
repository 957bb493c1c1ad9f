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


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_the_folded_decoder_equals_kool_et_als_formulas(problem):
    """The decoder projects the query parts per node and folds W_o into the logit keys; recompute one step the
    paper's way: q = W_c [context] + graph, an H-head masked glimpse, W_o, then C tanh(q_g . k / sqrt(d))."""
    spec = "attention_model(embed_dim=32, layers=1, heads=4, ff_hidden=64, graph_context=true)"
    pol = policy(problem, spec, seed=4)
    inst = generate(problem, 6, 2, seed=1)
    env = make_env(inst)
    enc = pol.encode(inst.locs, getattr(env, "demand", None))
    state = env.reset(3)
    if problem == "tsp":
        fast0 = pol.log_probs(enc, state)  # the placeholder context
    state = env.step(state, env.start_nodes()[:3].expand(2, 3)).state
    dec, h = pol.decoder, enc.nodes
    d, H = 32, 4

    def slow(state, placeholder=False):
        gather = lambda idx: h.gather(1, idx.unsqueeze(-1).expand(2, 3, d))  # noqa: E731
        if problem == "cvrp":
            ctx = torch.cat([gather(state.current), state.load.unsqueeze(-1)], -1)
        elif placeholder:
            ctx = dec.placeholder.expand(2, 3, 2 * d)
        else:
            ctx = torch.cat([gather(state.first), gather(state.current)], -1)
        q = dec.project_context(ctx) + dec.project_graph(h.mean(1)).unsqueeze(1)  # (B, S, d)
        k, v, lk = dec.project_nodes(h).chunk(3, -1)
        heads = []
        for j in range(H):
            sl = slice(j * d // H, (j + 1) * d // H)
            u = torch.einsum("bsd,bnd->bsn", q[..., sl], k[..., sl]) / (d // H) ** 0.5
            a = u.masked_fill(~state.mask, float("-inf")).softmax(-1)
            heads.append(torch.einsum("bsn,bnd->bsd", a, v[..., sl]))
        g = dec.project_glimpse(torch.cat(heads, -1))
        logits = 10.0 * torch.tanh(torch.einsum("bsd,bnd->bsn", g, lk) / d**0.5)
        return logits.masked_fill(~state.mask, float("-inf")).log_softmax(-1)

    fast = pol.log_probs(enc, state)
    assert torch.allclose(fast[state.mask], slow(state)[state.mask], atol=1e-5)
    if problem == "tsp":
        mask0 = env.reset(3).mask
        assert torch.allclose(fast0[mask0], slow(env.reset(3), placeholder=True)[mask0], atol=1e-5)


def test_evaluating_modes_together_gives_what_each_gives_alone():
    from ascent.co.decoding import evaluate_modes

    inst = generate("cvrp", 8, 10, seed=3)
    pol = policy("cvrp", seed=2)
    together = evaluate_modes(pol, inst, ["greedy", "multistart", "multistart_aug8"], batch_size=4)
    for mode, costs in together.items():
        assert torch.allclose(costs, evaluate(pol, inst, mode, batch_size=7), atol=1e-5), mode
