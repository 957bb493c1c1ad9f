"""COMPASS (Chalumeau et al. 2023, arXiv:2311.13569): the latent-conditioned decoder against the authors'
concatenation form, the warm start, the objective against hand-computed values, learning, and the test-time search's
bookkeeping."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.co.compass import (
    CompassTrainer,
    LatentParams,
    cvt_centroids,
    from_checkpoint,
    latent_search,
    sample_search,
)
from ascent.co.decoding import Solutions, evaluate, rollout
from ascent.co.envs import check_solutions, make_env
from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES
from ascent.co.problems import generate
from ascent.co.solvers import EvalSet, reference
from ascent.config.schema import CoConfig

TINY = "embed_dim=32, layers=2, heads=4, ff_hidden=64"


def sols(reward: list, ll: torch.Tensor, agents: int) -> Solutions:
    r = torch.tensor(reward)
    return Solutions(torch.zeros(*r.shape, 1, dtype=torch.long), ll, r, torch.zeros_like(r), agents)


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_the_latent_terms_equal_concatenating_the_latent_to_query_keys_and_values(problem):
    torch.manual_seed(0)
    model = CO_POLICIES.resolve(f"compass({TINY}, latent_dim=3, latents=2, amplification=2.0)")(problem)
    for lin in (model.latent_query, model.latent_value):
        torch.nn.init.normal_(lin.weight)
    inst = generate(problem, 6, 3, seed=1)
    env = make_env(inst)
    enc = model.encode(inst.locs, getattr(env, "demand", None))
    state = env.reset(4)
    state = env.step(state, env.start_nodes()[torch.arange(4) % 2].expand(3, 4)).state  # one step in
    z = torch.rand(3, 2, 3) * 2 - 1
    model.set_latents(z)
    got = model.log_probs(enc, state)
    # the authors' form: [context; a z] -> query, [h; a z] -> keys and values, with an arbitrary key map W_k
    dec, d, H = model.decoder, 32, 4
    az = (2.0 * z).repeat_interleave(2, dim=1)  # (B, S, L): latent-major
    q = dec.query(enc, state) + az @ model.latent_query.weight.T
    w_key = torch.randn(d, 3)
    heads = lambda t: t.view(3, 4, H, d // H).transpose(1, 2)  # noqa: E731  (B, H, S, dk)
    keys = enc.keys.unsqueeze(2) + heads(az @ w_key.T).unsqueeze(3)  # (B, H, S, N, dk), per solution
    values = enc.values.unsqueeze(2) + heads(az @ model.latent_value.weight.T).unsqueeze(3)
    compat = (heads(q).unsqueeze(3) @ keys.transpose(-1, -2)).squeeze(3) / math.sqrt(d // H)  # (B, H, S, N)
    attn = compat.masked_fill(~state.mask.unsqueeze(1), float("-inf")).softmax(-1)
    g = (attn.unsqueeze(3) @ values).squeeze(3).transpose(1, 2).reshape(3, 4, d)
    logits = 10.0 * torch.tanh(torch.einsum("bsd,bnd->bsn", g, enc.logit_keys) / math.sqrt(d))
    want = logits.masked_fill(~state.mask, float("-inf")).log_softmax(-1)
    finite = state.mask
    assert torch.allclose(got[finite], want[finite], atol=1e-5)
    assert torch.isinf(got[~finite]).all()


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_a_warm_start_decodes_like_its_checkpoint_for_every_latent(problem):
    torch.manual_seed(0)
    pomo = CO_POLICIES.resolve(f"attention_model({TINY})")(problem).eval()
    model = from_checkpoint(pomo, LatentParams(latent_dim=4, latents=3)).eval()
    inst = generate(problem, 7, 4, seed=2)
    n = len(make_env(inst).start_nodes())
    model.set_latents(torch.rand(4, 3, 4) * 2 - 1)  # per instance
    sol = rollout(model, inst, 3 * n, starts=True, greedy=True)
    check_solutions(inst, sol.actions)
    one = rollout(pomo, inst, n, starts=True, greedy=True)
    assert torch.equal(sol.reward.view(4, 3, n), one.reward.unsqueeze(1).expand(4, 3, n))


def test_compass_objective_trains_only_the_strictly_best_latent_with_its_own_starts_as_baseline():
    # one instance, K=2 latents x M=2 starts, latent-major: latent 0 (-1, -5), latent 1 (-2, -3)
    ll = torch.tensor([[-0.1, -0.2, -0.3, -0.4]], requires_grad=True)
    loss, m = CO_LOSSES.resolve("compass")(sols([[-1.0, -5.0, -2.0, -3.0]], ll, 2))
    # latent 0's mean -3: start 0 wins with advantage +2; latent 1's mean -2.5: start 1 wins with advantage -0.5
    assert float(loss.detach()) == pytest.approx(-(2.0 * -0.1 + -0.5 * -0.4) / 2)
    loss.backward()
    assert torch.allclose(ll.grad, torch.tensor([[-1.0, 0.0, 0.0, 0.25]]))
    assert m["train/tie_share"] == 0.0
    # a tie at start 0 (-1 and -1): that start trains nobody; start 1 alone: latent 1 (mean -2), advantage -1
    ll = torch.tensor([[-0.1, -0.2, -0.3, -0.4]], requires_grad=True)
    loss, m = CO_LOSSES.resolve("compass")(sols([[-1.0, -5.0, -1.0, -3.0]], ll, 2))
    assert float(loss.detach()) == pytest.approx(-(-1.0 * -0.4))
    assert m["train/tie_share"] == 0.5
    loss, _ = CO_LOSSES.resolve("compass(skip_ties=false)")(sols([[-1.0, -5.0, -1.0, -3.0]], ll, 2))
    assert float(loss.detach()) == pytest.approx(-(2.0 * -0.1 + -1.0 * -0.4) / 2)  # first latent takes the tie


def test_bad_latent_inputs_get_a_one_line_error():
    with pytest.raises(ValueError, match="latent_dim must be >= 1"):
        LatentParams(latent_dim=0)
    with pytest.raises(ValueError, match="latents must be >= 2"):
        LatentParams(latents=1)
    with pytest.raises(ValueError, match="amplification must be > 0"):
        LatentParams(amplification=0.0)
    model = CO_POLICIES.resolve(f"compass({TINY}, latent_dim=4)")("tsp")
    with pytest.raises(ValueError, match=r"latents must have shape \(K, 4\)"):
        model.set_latents(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="no latents set"):
        rollout(model, generate("tsp", 5, 2, seed=0), 5, starts=True, greedy=True)
    with pytest.raises(ValueError, match="at least 2 latents"):
        CO_LOSSES.resolve("compass")(sols([[-1.0, -2.0]], torch.zeros(1, 2), 1))
    inst = generate("tsp", 5, 2, seed=0)
    model.set_latents(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="budget 0 is below one generation"):
        latent_search(model, inst, 0, popsize=4)
    with pytest.raises(ValueError, match="strategy must be"):
        latent_search(model, inst, 100, popsize=4, strategy="grid")
    pomo = CO_POLICIES.resolve(f"attention_model({TINY})")("tsp")
    with pytest.raises(ValueError, match="budget 7 is below one generation"):
        sample_search(pomo, inst, 7, per_generation=2)


def test_cvt_centroids_tile_the_box():
    c = cvt_centroids(2, 1, seed=0, samples=2000).flatten().sort().values
    assert torch.allclose(c, torch.tensor([-0.5, 0.5]), atol=0.03)
    c4 = cvt_centroids(4, 2, seed=0, samples=2000)
    assert torch.allclose(c4.abs(), torch.full((4, 2), 0.5), atol=0.05)  # the four quadrants' centres


def test_search_bookkeeping_without_latent_effect_is_greedy_multistart():
    # zero latent maps: every latent decodes the checkpoint's greedy tours, so the search's best is exactly its
    # greedy multistart, whatever CMA-ES proposes, and the budget is spent in whole generations
    torch.manual_seed(0)
    pomo = CO_POLICIES.resolve(f"attention_model({TINY})")("tsp")
    model = from_checkpoint(pomo, LatentParams(latent_dim=4, latents=2))
    inst = generate("tsp", 6, 5, seed=3)
    res = latent_search(model, inst, budget=100, popsize=4, components=2, seed=0, batch_size=2)
    assert res.used == 96 and len(res.curve) == 4  # 4 generations of 4 latents x 6 starts
    assert torch.allclose(res.cost.float(), evaluate(pomo, inst, "multistart"))


def test_sampling_with_a_budget_finds_the_optimum_of_tiny_instances():
    torch.manual_seed(0)
    pomo = CO_POLICIES.resolve(f"attention_model({TINY})")("tsp")
    inst = generate("tsp", 6, 4, seed=4)
    ref = reference(inst, iterations=100)[0]
    res = sample_search(pomo, inst, budget=6 * 8 * 10, seed=0, per_generation=8)
    assert res.used == 480 and [u for u, _ in res.curve] == [48 * (g + 1) for g in range(10)]
    assert torch.allclose(res.cost, ref.double(), atol=1e-5)
    assert all(a >= b for (_, a), (_, b) in zip(res.curve, res.curve[1:]))


def test_compass_learns_and_its_latents_specialise(one_thread):
    inst = generate("tsp", 8, 64, seed=99)
    ts = EvalSet(inst, *reference(inst, iterations=200))
    cfg = CoConfig(
        problem="tsp", n=8, policy=f"compass({TINY}, latent_dim=4, latents=4)", loss="compass", steps=40,
        batch_size=16, lr=1e-3, eval_modes=["greedy"],
    )  # fmt: skip
    tr = CompassTrainer(cfg, seed=0, test=ts)
    z = tr.policy.sample_latents(4, torch.Generator().manual_seed(5))
    tr.policy.set_latents(z)
    before = tr.evaluate(["multistart"])["eval/gap_multistart"]
    assert tr.fit()
    tr.policy.set_latents(z)
    after = tr.evaluate(["multistart"])["eval/gap_multistart"]
    assert before > 20.0 and after < 5.0, (before, after)
    assert tr.policy.latent_query.weight.abs().sum() > 0 and tr.policy.latent_value.weight.abs().sum() > 0
    # different latents are different policies: their greedy tours differ on some instances
    sol = rollout(tr.policy.eval(), inst, 4 * 8, starts=True, greedy=True)
    per_latent = (-sol.reward).view(64, 4, 8).min(dim=-1).values
    assert (per_latent.max(dim=1).values - per_latent.min(dim=1).values > 1e-6).float().mean() > 0.1
