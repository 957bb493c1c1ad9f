"""The search world's Plackett-Luce retriever (HARR): the list log-probability against a hand computation, the
sampler's law, the policy-gradient direction, the history features, and the env's records of sampled lists."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ascent.envs.retriever import (
    FEATURES,
    RETRIEVERS,
    PlackettLuceParams,
    PlackettLuceRetriever,
    RetrieverTrainer,
    features,
    plackett_luce_logprob,
)
from ascent.envs.search_world import SearchWorld, SearchWorldEnv, WorldConfig
from ascent.typed import ConfigError

WORLD = SearchWorld(WorldConfig(num_people=6, num_companies=3, num_cities=3, num_countries=2, seed=3))


def search(query: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'search', 'arguments': {'query': query}})}</tool_call>"


def test_logprob_matches_a_hand_computation():
    s = torch.tensor([[1.0, 0.0, -1.0, 2.0]])
    valid = torch.ones(1, 4, dtype=torch.bool)
    e = [math.exp(x) for x in (1.0, 0.0, -1.0, 2.0)]
    # order (3, 0, 2): e^2/(sum all) * e^1/(e^1+e^0+e^-1) * e^-1/(e^0+e^-1)
    want = math.log(e[3] / sum(e)) + math.log(e[0] / (e[0] + e[1] + e[2])) + math.log(e[2] / (e[1] + e[2]))
    got = plackett_luce_logprob(s, torch.tensor([[3, 0, 2]]), valid)
    assert float(got[0]) == pytest.approx(want, abs=1e-6)


def test_logprob_ignores_invalid_candidates_and_padding():
    s = torch.tensor([[1.0, 5.0, 0.0], [0.3, -0.2, 9.0]])
    valid = torch.tensor([[True, False, True], [True, True, True]])
    got = plackett_luce_logprob(s, torch.tensor([[0, -1], [2, 0]]), valid)
    assert float(got[0]) == pytest.approx(math.log(math.e / (math.e + 1.0)), abs=1e-6)  # candidate 1 is masked
    e = [math.exp(x) for x in (0.3, -0.2, 9.0)]
    assert float(got[1]) == pytest.approx(math.log(e[2] / sum(e)) + math.log(e[0] / (e[0] + e[1])), abs=1e-5)


def test_the_lists_of_two_sum_to_one():
    s = torch.tensor([0.5, -1.0, 2.0])
    orders = torch.tensor([[i, j] for i in range(3) for j in range(3) if i != j])
    p = plackett_luce_logprob(s.expand(len(orders), 3), orders, torch.ones(len(orders), 3, dtype=torch.bool)).exp()
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-6)


def test_sampling_follows_the_plackett_luce_law():
    r = PlackettLuceRetriever(PlackettLuceParams(history=False, init_bm25=2.0)).train(True)
    g = torch.Generator().manual_seed(0)
    q = "What is the capital of the country of Jorsodru?"
    first = [r.retrieve(WORLD, q, [], 2, g)[0][0][0] for _ in range(3000)]
    s = r.scores(features(WORLD, q, [], r.names))
    p = torch.softmax(s.detach(), 0)
    ids = list(WORLD.docs)
    for d in set(first):
        assert first.count(d) / len(first) == pytest.approx(float(p[ids.index(d)]), abs=0.03)


def test_policy_gradient_raises_the_probability_of_an_advantaged_list():
    r = PlackettLuceRetriever(PlackettLuceParams(init_bm25=1.0, lr=0.05, max_grad_norm=0.0)).train(True)
    trainer = RetrieverTrainer(r)
    feats = features(WORLD, "Jorsodru", [], r.names).tolist()
    good, bad = {"features": feats, "order": [3, 11]}, {"features": feats, "order": [11, 3]}
    before = r.logprob([good, bad]).detach()
    # with A = +1 for the good list's episode and -1 for the bad one's, the step ascends logp(good) - logp(bad)
    m = trainer.step([[good], [bad]], torch.tensor([1.0, -1.0]), torch.tensor([True, True]))
    after = r.logprob([good, bad]).detach()
    assert m["retriever/lists"] == 2.0 and after[0] - after[1] > before[0] - before[1]
    # the hand gradient of -(logp(good) - logp(bad))/2 w.r.t. w has the sign Adam's first step follows
    w = r.weight.detach().clone().requires_grad_(True)
    f = torch.tensor(feats)
    order = torch.tensor([[3, 11], [11, 3]])
    lp = plackett_luce_logprob((f @ w).expand(2, -1), order, torch.ones(2, len(feats), dtype=torch.bool))
    (-(lp[0] - lp[1]) / 2).backward()
    moved = r.weight.detach() - torch.tensor([1.0, 0, 0, 0, 0])
    nonzero = w.grad.abs() > 1e-8
    assert torch.equal(torch.sign(moved[nonzero]), -torch.sign(w.grad[nonzero]))


def test_features_follow_the_history():
    q = WORLD.questions(1, hops=2, seed=0)[0]
    subject, bridge = q.evidence
    ids = list(WORLD.docs)
    f = features(WORLD, q.question, [subject])
    col = {n: j for j, n in enumerate(FEATURES)}
    assert f[ids.index(subject), col["seen"]] == 1 and f[ids.index(subject), col["in_query"]] == 1
    assert f[ids.index(bridge), col["linked"]] == 1, "the subject's document names the next hop"
    assert f[:, col["bm25"]].max() == pytest.approx(1.0)
    assert torch.equal(features(WORLD, q.question, [])[:, col["linked"]], torch.zeros(len(ids)))


def test_env_records_sampled_lists_and_greedy_equals_bm25_at_start():
    r = RETRIEVERS.resolve("plackett_luce", key="retriever")(seed=1)
    q = WORLD.questions(1, hops=2, seed=0)[0]
    env = SearchWorldEnv(WORLD, top_k=2, snippet_chars=200, retriever=r)
    env.reset(q)
    greedy = env.step(search(q.question))
    assert "retrievals" not in greedy.info, "evaluation (greedy) records nothing"
    bm25 = WORLD.scores(q.question)
    assert sorted(bm25[d] for d in env.retrieved) == sorted(s for _, s in WORLD.search(q.question, 2))  # ties aside
    r.train(True)
    env = SearchWorldEnv(WORLD, top_k=2, snippet_chars=200, retriever=r)
    env.reset(q)
    step = env.step(search(q.question))
    (rec,) = step.info["retrievals"]
    assert len(rec["order"]) == 2 and len(rec["features"]) == len(WORLD.docs)
    assert [list(WORLD.docs)[i] for i in rec["order"]] == env.retrieved


def test_the_option_is_checked():
    with pytest.raises(ConfigError, match="valid names: bm25, plackett_luce"):
        RETRIEVERS.resolve("dense", key="retriever")
    with pytest.raises(ConfigError, match="lr"):
        RETRIEVERS.resolve("plackett_luce(lr=0)", key="retriever")


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_one_list_moves_with_the_sign_of_its_advantage(advantage):
    r = PlackettLuceRetriever(PlackettLuceParams(init_bm25=1.0, lr=0.05)).train(True)
    q = WORLD.questions(1, hops=2, seed=0)[0]
    rec = {"features": features(WORLD, q.question, [q.evidence[0]]).tolist(), "order": [4, 1]}
    before = float(r.logprob([rec]))
    RetrieverTrainer(r).step([[rec], []], torch.tensor([advantage, 5.0]), torch.tensor([True, True]))
    assert (float(r.logprob([rec])) - before) * advantage > 0
