"""ReLIC (Elawady et al. 2024, arXiv:2410.02751): sink key/values against attention by hand, causality over the
trial, GAE by hand, partial updates (one PPO update per chunk, over the whole prefix), evaluation with frozen
weights."""

import math

import numpy as np
import torch

from ascent.incontext import relic
from ascent.incontext.relic import Block, ReLICParams, TrialTransformer, evaluate_trial, gae, train_relic
from ascent.incontext.tasks import make_family


def test_sink_attention_matches_a_softmax_by_hand():
    torch.manual_seed(0)
    blk = Block(8, 2, sink=True)
    with torch.no_grad():
        blk.sink_k.normal_()
        blk.sink_v.normal_()
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        q, k, v = blk.qkv(x).view(1, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
    outs = []
    for h in range(2):
        for t in range(5):
            scores = [float(q[0, h, t] @ blk.sink_k[h, 0].detach())] + [
                float(q[0, h, t] @ k[0, h, s]) for s in range(t + 1)
            ]
            w = torch.softmax(torch.tensor(scores) / math.sqrt(4), 0)
            vals = torch.stack([blk.sink_v[h, 0].detach()] + [v[0, h, s] for s in range(t + 1)])
            outs.append((w[:, None] * vals).sum(0))
    ref = torch.stack(outs).view(2, 5, 4).transpose(0, 1).reshape(1, 5, 8)
    torch.testing.assert_close(blk.attend(x), blk.proj(ref), atol=1e-5, rtol=1e-5)


def test_the_trial_transformer_is_causal_with_and_without_sinks():
    for sink in (True, False):
        torch.manual_seed(1)
        m = TrialTransformer(3, 5, 4, 16, 2, 2, sink)
        obs, a, r, s = (
            torch.randint(0, 9, (2, 12)),
            torch.randint(0, 6, (2, 12)),
            torch.rand(2, 12),
            torch.arange(12) % 4,
        )
        s = s.expand(2, 12)
        l1, v1 = m(obs, a, r, s)
        obs2 = obs.clone()
        obs2[:, 7:] = (obs2[:, 7:] + 1) % 9
        l2, v2 = m(obs2, a, r, s)
        torch.testing.assert_close(l1[:, :7], l2[:, :7])
        torch.testing.assert_close(v1[:, :7], v2[:, :7])
        assert not torch.allclose(l1[:, 7:], l2[:, 7:])


def test_gae_bootstraps_mid_episode_only():
    r, v = np.array([[1.0, 1.0]]), np.array([[0.0, 0.0]])
    np.testing.assert_allclose(gae(r, v, np.array([10.0]), np.array([False, False]), 0.5, 1.0), [[1 + 0.5 * 6, 6.0]])
    np.testing.assert_allclose(gae(r, v, np.array([10.0]), np.array([False, True]), 0.5, 1.0), [[1.5, 1.0]])


def test_partial_updates_run_one_ppo_update_per_chunk_over_the_whole_prefix(monkeypatch):
    calls = []
    real = relic.ppo_update
    monkeypatch.setattr(
        relic, "ppo_update", lambda m, o, tr, lo, hi, h, p: (calls.append((lo, hi)), real(m, o, tr, lo, hi, h, p))
    )
    fam = make_family("darkroom(size=3,horizon=4,num_test=3)")
    p = ReLICParams(
        family="darkroom(size=3,horizon=4,num_test=3)",
        trial_episodes=3,
        chunk=5,
        tasks=2,
        trials=1,
        d=8,
        heads=2,
        layers=1,
    )
    train_relic(p, fam, 0, partial=True, sink=True)
    assert calls == [(0, 5), (5, 10), (10, 12)]
    calls.clear()
    train_relic(p, fam, 0, partial=False, sink=False)
    assert calls == [(0, 12)]


def test_training_changes_weights_and_evaluation_leaves_them_frozen():
    fam = make_family("darkroom(size=3,horizon=4,num_test=3)")
    p = ReLICParams(
        family="darkroom(size=3,horizon=4,num_test=3)",
        trial_episodes=3,
        chunk=4,
        tasks=4,
        trials=2,
        d=8,
        heads=2,
        layers=1,
    )
    torch.manual_seed(0)
    fresh = TrialTransformer(3, 5, 4, 8, 1, 2, True)
    model = train_relic(p, fam, 0, partial=True, sink=True)
    assert not torch.allclose(fresh.pi.weight, model.pi.weight)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ret = evaluate_trial(model, fam, fam.tasks("test", 3, 0), 3, seed=5)
    assert ret.shape == (3, 3) and ret.min() >= 0 and ret.max() <= 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    np.testing.assert_array_equal(ret, evaluate_trial(model, fam, fam.tasks("test", 3, 0), 3, seed=5))
