"""The learned retrieval process of retrieval-augmented DQN (Goyal et al. 2022, arXiv:2202.08417): top-k attention
by a learned score, one round by hand, gradients into the retrieval embedding through DQN's loss, and a tiny task
where the learned score retrieves what Euclidean nearest neighbours cannot."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("gymnasium")

from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv, make_env  # noqa: E402
from ascent.classic.retrieval import (  # noqa: E402
    LearnedRetrievalParams,
    LearnedRetrievalQNetwork,
    learned_retrieval_dqn,
    learned_top_k,
    nearest,
)
from ascent.config import ConfigError  # noqa: E402


def test_top_k_weights_are_a_softmax_over_the_k_best_unexcluded_scores():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 2, 10, generator=g)
    excluded = torch.zeros(3, 10, dtype=torch.bool)
    excluded[:, 4] = True
    scores[:, :, 4] = 100.0  # the best score, but excluded (the query itself)
    w = learned_top_k(scores, excluded, 3)
    for b in range(3):
        for s in range(2):
            order = [m for m in scores[b, s].argsort(descending=True).tolist() if m != 4][:3]
            want = torch.zeros(10)
            want[order] = F.softmax(scores[b, s, order], dim=0)
            torch.testing.assert_close(w[b, s], want)
    assert learned_top_k(torch.zeros(1, 1, 2), torch.ones(1, 2, dtype=torch.bool), 2).abs().sum() == 0


def test_one_retrieval_round_by_hand():
    torch.manual_seed(0)
    p = LearnedRetrievalParams(k=2, width=4, hidden=[5], slots=1, retrieval_steps=1)
    net = LearnedRetrievalQNetwork(obs_dim=2, n_actions=2, p=p)
    obs = torch.tensor([[0.5, -0.2]])
    empty_m, _ = net.retrieve(obs)
    torch.testing.assert_close(empty_m[0, 0], net.init[0] + net.from_state(obs[0]))  # empty index: m_0
    net.keys, net.features = torch.randn(6, 2), torch.randn(6, 2 * 2 + 2 + 1)
    net.keys[3] = obs[0]  # the query's own transition: never retrieved
    with torch.no_grad():
        m0 = net.init[0] + net.from_state(obs[0])
        q = net.query(torch.cat([m0, obs[0]]))
        scores = torch.stack([q @ net.key_embed(net.features[i]) for i in range(6)]) / 2.0
        scores[3] = -float("inf")
        top = scores.argsort(descending=True)[:2]
        w = F.softmax(scores[top], dim=0)
        u = w[0] * net.value(net.features[top[0]]) + w[1] * net.value(net.features[top[1]])
        m1 = net.gru(u[None], m0[None])[0]
        torch.testing.assert_close(net.retrieve(obs)[0][0, 0], m1)
        torch.testing.assert_close(net(obs)[0], net.head(torch.cat([obs[0], m1])))
        assert net.retrieve(obs)[1][0, 0, 3] == 0


def test_the_dqn_loss_trains_the_learned_retrieval_embedding():
    envs = VecEnv(lambda: make_env("CartPole-v1"), 1, seed=0)
    params = LearnedRetrievalParams(hidden=[16], learning_starts=20, batch_size=8, refresh_interval=20, k=4)
    algo = learned_retrieval_dqn(ClassicContext(envs, 400, 0, torch.device("cpu")), params)
    for _ in range(6):
        algo.collect()
    assert algo.q.keys.shape[0] > 0 and algo.q_target.features is algo.q.features
    before = {n: p.detach().clone() for n, p in algo.q.named_parameters()}
    algo.gradient_step()
    for name in ("init", "query.weight", "key_embed.0.weight", "key_embed.2.weight", "value.weight", "gru.weight_ih"):
        assert not torch.equal(before[name], dict(algo.q.named_parameters())[name]), name
    with pytest.raises(ConfigError, match="slots"):
        LearnedRetrievalParams(slots=0)


def _episode(g: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """An index of 8 entries, two per category (one-hot in obs[:4]) with large noise in obs[4:], the category's value
    (fresh each batch) stored as the entry's reward; queries of a random category with fresh noise, target its
    value. Only retrieving an entry of the query's category tells the value; the noise makes Euclidean
    neighbours mostly of other categories."""
    cat = torch.arange(8) % 4
    value = torch.randint(0, 2, (4,), generator=g).float() * 2 - 1  # (4,)
    keys = torch.cat([F.one_hot(cat, 4).float(), 3 * torch.randn(8, 2, generator=g)], dim=1)  # (8, 6)
    features = torch.cat([keys, torch.zeros(8, 1), value[cat, None], torch.zeros(8, 6)], dim=1)  # (8, 14)
    qcat = torch.randint(0, 4, (batch,), generator=g)
    obs = torch.cat([F.one_hot(qcat, 4).float(), 3 * torch.randn(batch, 2, generator=g)], dim=1)  # (B, 6)
    return keys, features, obs, value[qcat], qcat


def test_the_learned_score_retrieves_what_euclidean_neighbours_miss():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    p = LearnedRetrievalParams(k=4, width=16, hidden=[32], slots=1, retrieval_steps=1)
    net = LearnedRetrievalQNetwork(obs_dim=6, n_actions=1, p=p)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)

    def loss_and_hits(keys, features, obs, target, qcat):
        net.keys, net.features = keys, features
        _, w = net.retrieve(obs)  # (B, 1, 8)
        hits = (w[:, 0] * (torch.arange(8)[None] % 4 == qcat[:, None])).sum(1).mean()
        return ((net(obs)[:, 0] - target) ** 2).mean(), hits

    with torch.no_grad():
        _, hit_before = loss_and_hits(*_episode(torch.Generator().manual_seed(99), 256))
    for _ in range(300):
        loss, _ = loss_and_hits(*_episode(g, 32))
        opt.zero_grad()
        loss.backward()
        opt.step()
    keys, features, obs, target, qcat = _episode(torch.Generator().manual_seed(99), 256)
    with torch.no_grad():
        loss, hit = loss_and_hits(keys, features, obs, target, qcat)
    euclid, _ = nearest(obs, keys, 2)
    euclid_hit = (euclid % 4 == qcat[:, None]).float().mean()
    assert hit_before < 0.5 and hit > 0.9 and loss < 0.1  # chance: 0.25 of the attention, a loss of 1
    assert euclid_hit < 0.6
