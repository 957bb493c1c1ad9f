"""Retrieval-augmented DQN (arXiv:2202.08417): nearest-neighbour and attention references, the index from the
buffer, end-to-end gradients, exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

from ascent.app.pipeline import train  # noqa: E402
from ascent.classic.base import ClassicContext  # noqa: E402
from ascent.classic.envs import VecEnv, make_env  # noqa: E402
from ascent.classic.retrieval import RetrievalParams, RetrievalQNetwork, nearest, retrieval_dqn  # noqa: E402
from ascent.config import ConfigError, load_config  # noqa: E402
from ascent.trainer.checkpoint import Checkpointer  # noqa: E402


def test_nearest_matches_a_sort_and_skips_the_query_itself():
    g = torch.Generator().manual_seed(0)
    keys = torch.randn(20, 3, generator=g)
    query = torch.cat([keys[:2], torch.randn(3, 3, generator=g)])  # the first two are stored entries
    idx, ok = nearest(query, keys, 4)
    assert ok.all()
    for b in range(5):
        d = [float((query[b] - keys[m]).norm()) for m in range(20)]
        want = [m for m in sorted(range(20), key=lambda m: d[m]) if d[m] > 1e-6][:4]
        assert idx[b].tolist() == want
    assert 0 not in idx[0].tolist() and 1 not in idx[1].tolist()
    idx, ok = nearest(torch.zeros(1, 3), torch.zeros(2, 3), 4)  # only the query itself: nothing valid
    assert idx.shape == (1, 2) and not ok.any()


def test_summary_is_attention_over_the_retrieved_features():
    torch.manual_seed(0)
    net = RetrievalQNetwork(obs_dim=2, n_actions=2, k=2, width=3, hidden=[4])
    keys = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    features = torch.randn(3, 2 * 2 + 2 + 1)
    obs = torch.tensor([[0.9, 0.1]])
    assert torch.equal(net.summary(obs), torch.zeros(1, 3))  # empty index: no summary
    net.keys, net.features = keys, features
    with torch.no_grad():
        f = features[[1, 0]]  # the two nearest, nearest first
        logits = torch.stack([net.key(f[m]) @ net.query(obs[0]) for m in range(2)]) / 3**0.5
        w = torch.exp(logits) / torch.exp(logits).sum()
        want = w[0] * net.value(f[0]) + w[1] * net.value(f[1])
        torch.testing.assert_close(net.summary(obs)[0], want)
        q = net.head(torch.cat([obs[0], want]))
        torch.testing.assert_close(net(obs)[0], q)


def _algo(**kw):
    envs = VecEnv(lambda: make_env("CartPole-v1"), 1, seed=0)
    params = RetrievalParams(hidden=[16], learning_starts=20, batch_size=8, **kw)
    return retrieval_dqn(ClassicContext(envs, 400, 0, torch.device("cpu")), params)


def test_index_is_the_last_transitions_refreshed_on_schedule():
    algo = _algo(index_size=8, refresh_interval=12, k=2, buffer_size=10)
    for _ in range(2):
        algo.collect()  # 4 steps each
    assert algo.q.keys.shape[0] == 0  # no refresh before step 12
    algo.collect()
    assert algo.q.keys.shape == (8, 4) and algo.q_target.keys is algo.q.keys
    last = [(algo.buffer.pos - 8 + i) % 10 for i in range(8)]  # the ring of 10 has wrapped: rows 4..9, 0, 1
    np.testing.assert_array_equal(algo.q.keys.numpy(), algo.buffer.obs[last])
    f = algo.q.features.numpy()
    np.testing.assert_array_equal(f[:, 4:6], np.eye(2, dtype=np.float32)[algo.buffer.actions[last]])
    np.testing.assert_array_equal(f[:, 6], algo.buffer.rewards[last])
    np.testing.assert_allclose(f[:, 7:], algo.buffer.next_obs[last] - algo.buffer.obs[last])


def test_the_dqn_loss_trains_the_retrieval_attention_end_to_end():
    algo = _algo(refresh_interval=20, k=4)
    for _ in range(6):
        algo.collect()
    before = {n: p.detach().clone() for n, p in algo.q.named_parameters()}
    algo.gradient_step()
    for name in ("query.weight", "key.weight", "value.weight", "head.0.weight"):
        assert not torch.equal(before[name], dict(algo.q.named_parameters())[name]), name
    with pytest.raises(ConfigError, match="k <= index_size"):
        RetrievalParams(k=10, index_size=5)


def _weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(Checkpointer(run_dir / "checkpoints").latest() / "model.safetensors"))


def test_resume_is_exact(tmp_path):
    """N steps in one go == N/2, stop, resume: same weights and evaluation returns (the index in the state)."""
    algo = "retrieval_dqn(hidden=[16],learning_starts=50,batch_size=16,target_update_interval=100,refresh_interval=50)"
    common = [
        "classic.env=CartPole-v1",
        "classic.total_steps=240",
        "classic.eval_episodes=1",
        f"classic.algorithm={algo}",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    whole = train(load_config("acrobot-dqn", [*common, "name=whole"]))
    assert train(load_config("acrobot-dqn", [*common, "name=split"]), stop_at=120) is None
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"] and split["env_steps"] == whole["env_steps"]
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
