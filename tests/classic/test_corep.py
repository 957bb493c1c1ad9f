"""COREP (Zhang et al. 2024, arXiv:2306.02747) and its non-stationary setting: the graph-attention layer by hand
(self-loops, LeakyReLU slope, edge direction), the Gumbel edges' distribution, the graph losses by hand, the guided
update's steadiness test and what it freezes, the `drifting` schedule on CartPole's physics, learning on drifting
CartPole, and exact resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ascent.classic.corep import (
    COREPParams,
    GraphAttention,
    cosine_matrix,
    graph_losses,
    gumbel_edges,
    kl_standard_normal,
    steady_td,
)
from ascent.classic.nonstationary import DriftingParams
from ascent.typed import ConfigError


def _layer(att_src, att_dst, heads=1, concat=True) -> GraphAttention:
    layer = GraphAttention(2, 2, heads, concat)
    with torch.no_grad():
        layer.lin.weight.copy_(torch.eye(2).repeat(heads, 1))  # W = I per head
        layer.att_src.copy_(torch.tensor([att_src] * heads))
        layer.att_dst.copy_(torch.tensor([att_dst] * heads))
    return layer


def test_graph_attention_by_hand():
    """Edges 0 -> 2 and 1 -> 2: nodes 0 and 1 see only themselves; node 2 attends over {0, 1, 2} with
    e_2j = LeakyReLU(a_dst . x_2 + a_src . x_j)."""
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # (1, 3, 2)
    edges = torch.zeros(1, 3, 3)
    edges[0, 0, 2] = edges[0, 1, 2] = 1.0  # edges[b, j, i]: j -> i
    out = _layer([1.0, 0.0], [0.0, -3.0])(x, edges)[0]
    # e_2j = leaky(-3 + x_j[0]) = leaky(-2, -3, -2) = (-0.4, -0.6, -0.4)
    w = [math.exp(-0.4), math.exp(-0.6), math.exp(-0.4)]
    a = [v / sum(w) for v in w]
    expected = torch.tensor([[1.0, 0.0], [0.0, 1.0], [a[0] + a[2], a[1] + a[2]]])
    assert torch.allclose(out, expected, atol=1e-6)
    # reversing the edges (2 -> 0, 2 -> 1) changes who aggregates: node 2 keeps itself, 0 and 1 mix with it
    back = _layer([1.0, 0.0], [0.0, -3.0])(x, edges.transpose(1, 2))[0]
    assert torch.allclose(back[2], x[0, 2]) and not torch.allclose(back[0], x[0, 0])


def test_graph_attention_heads_concatenate_or_average():
    x, edges = torch.randn(5, 4, 2), torch.zeros(5, 4, 4)
    assert _layer([1.0, 0.0], [0.0, 1.0], heads=3)(x, edges).shape == (5, 4, 6)
    # no edges: every node attends to itself only, so each head returns W x = x
    assert torch.allclose(_layer([1.0, 0.0], [0.0, 1.0], heads=3, concat=False)(x, edges), x, atol=1e-6)


def test_gumbel_edges_draw_the_softmax_of_similarities():
    """Row i draws node j with chance softmax_j(sigmoid(cos_ij) - threshold); drawing itself leaves the row empty."""
    torch.manual_seed(0)
    nodes = torch.tensor([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.1]]).expand(40000, 3, 2)
    edges = gumbel_edges(nodes, threshold=0.8, temperature=0.8)
    p = torch.softmax(torch.sigmoid(cosine_matrix(nodes[:1]))[0] - 0.8, dim=-1)  # (3, 3)
    freq = edges.mean(0)
    off = ~torch.eye(3, dtype=torch.bool)
    assert torch.all(edges.diagonal(dim1=1, dim2=2) == 0) and torch.all(edges.sum(-1) <= 1)
    assert torch.allclose(freq[off], p[off], atol=0.01)
    assert torch.allclose(1 - edges.sum(-1).mean(0), p.diagonal(), atol=0.01)


def test_graph_losses_and_kl_by_hand():
    core = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # orthogonal: cos 0, A = sigmoid(0) = 0.5 off the diagonal
    general = torch.tensor([[[1.0, 0.0], [2.0, 0.0]]])  # parallel: cos 1, A = sigmoid(-1 / 0.7)
    s = 1 / (1 + math.exp(1 / 0.7))
    g = graph_losses(core, general, 0.7)
    assert math.isclose(g["graph"].item(), 2 * (0.5 - s) / 4, rel_tol=1e-5)
    assert math.isclose(g["sparsity"].item(), 2 * 0.5 / 4 + 2 * s / 4, rel_tol=1e-5)
    assert g["mag"].item() == 0.0  # cosine similarity is symmetric, so is this adjacency
    kl = kl_standard_normal(torch.tensor([[0.0, 1.0]]), torch.tensor([[math.log(4.0), 0.0]]))
    assert math.isclose(kl.item(), 0.5 * (4 - 1 - math.log(4.0)) + 0.5, rel_tol=1e-6)


def test_steady_td_band():
    assert not steady_td([1.0], 0.1, 1.96)  # too little history
    assert not steady_td([1.0] * 10, 0.1, 1.96)  # std 0: nothing is strictly inside
    calm = [1.0, 2.0] * 10  # mean 1.5, std 0.5; newest 10%: (1, 2), mean 1.5
    assert steady_td(calm, 0.1, 1.96)
    # a jump: mean 2.35, std 2.594, band up to 7.43; the newest two average 10
    assert not steady_td([1.0, 2.0] * 9 + [10.0, 10.0], 0.1, 1.96)
    assert steady_td([1.0, 2.0] * 9 + [10.0, 10.0], 0.1, 4.0)  # a wider band takes it


def _algo(**kw):
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.base import ClassicContext
    from ascent.classic.corep import COREP
    from ascent.classic.envs import VecEnv

    torch.manual_seed(0)
    envs = VecEnv(lambda: gym.make("CartPole-v1"), 2, seed=0)
    params = COREPParams(n_steps=32, batch_size=32, n_epochs=1, hidden=[16, 16], **kw)
    return COREP(ClassicContext(envs, 10_000, 0, torch.device("cpu")), params)


def _snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _same(a: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, module.parameters()))


@pytest.mark.parametrize("guided, freeze, core_learns", [(True, True, False), (True, False, True), (False, True, True)])
def test_guided_update_freezes_only_the_core_gat(guided, freeze, core_learns):
    algo = _algo(guided=guided)
    algo.collect()
    algo.freeze = freeze
    core, general, nodes = (_snapshot(m) for m in (algo.encoder.core, algo.encoder.general, algo.encoder.nodes))
    algo.update_vae()
    assert _same(core, algo.encoder.core) != core_learns
    assert not _same(general, algo.encoder.general) and not _same(nodes, algo.encoder.nodes)


def test_guide_freezes_while_the_td_error_is_steady_and_releases_on_a_jump():
    algo = _algo(freeze_eps=0.0)
    for v in [1.0, 2.0] * 10:
        algo.guide(v)
    assert algo.freeze
    algo.guide(30.0)
    algo.guide(30.0)
    assert not algo.freeze
    assert algo.iteration(True)["train/core_frozen"] in (0.0, 1.0)


def test_vae_learns_the_transitions_of_a_rollout():
    """The decoders, fed the causal-origin latent, fit s' and r of a rollout: the loss on it falls by more than
    half over 40 passes (the KL and graph terms are small beside the reconstruction)."""
    algo = _algo(vae_epochs=40)
    algo.collect()
    ro = algo.rollout
    batch = (ro.obs[..., :4].flatten(0, 1), ro.actions.flatten(0, 1), algo.env_rewards.flatten())
    torch.manual_seed(1)
    before, m0 = algo.vae_loss(*batch, algo.next_obs.flatten(0, 1))
    algo.update_vae()
    torch.manual_seed(1)
    after, m1 = algo.vae_loss(*batch, algo.next_obs.flatten(0, 1))
    assert after.item() < 0.5 * before.item(), (m0, m1)
    assert m1["vae/state"] < 0.5 * m0["vae/state"]


def test_policy_sees_the_state_and_its_latent():
    algo = _algo(latent_dim=3)
    obs = np.zeros((5, 4), np.float32)
    assert algo.policy_input(torch.from_numpy(obs)).shape == (5, 4 + 6)
    assert algo.act(obs, True).shape == (5,)


def test_drifting_schedule_by_hand_and_on_cartpole():
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.nonstationary import drifting

    p = DriftingParams(keys=["length", "force_mag"], amplitude=[0.5, 0.2], period=4, hold=2)
    # key 0 phase 0, key 1 phase pi/2; the angle steps by pi/2 every 2 episodes
    expected = [[1.0, 1.2], [1.0, 1.2], [1.5, 1.0], [1.5, 1.0], [1.0, 0.8], [1.0, 0.8], [0.5, 1.0], [0.5, 1.0]]
    assert np.allclose(p.factors(), expected)
    env = drifting(gym.make("CartPole-v1"), True, p)
    seen = []
    for e in range(10):
        env.reset(seed=0 if e == 0 else None)
        seen.append([env.unwrapped.length / 0.5, env.unwrapped.force_mag / 10.0])
    assert np.allclose(seen, expected + expected[:2])  # the cycle starts over after period * hold episodes
    evaluation = drifting(gym.make("CartPole-v1"), False, p)
    evaluation.reset(seed=10003)  # starts at 10003 mod 8 = 3
    assert math.isclose(evaluation.unwrapped.length, 0.5 * 1.5)


def test_bad_drifting_and_corep_settings_say_what_to_change():
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.nonstationary import drifting

    with pytest.raises(ConfigError, match="amplitude needs one value in"):
        DriftingParams(keys=["length"], amplitude=[1.0])
    with pytest.raises(ConfigError, match="valid keys: .*gravity"):
        drifting(gym.make("CartPole-v1"), True, DriftingParams(keys=["wind"], amplitude=[0.1]))
    with pytest.raises(ValueError, match="td_recent"):
        COREPParams(td_recent=0.0)


def _train(tmp_path, name: str, steps: int, extra: list[str] = (), stop_at=None):
    from ascent.app.pipeline import train
    from ascent.config import load_config

    algo = "classic.algorithm=corep(n_steps=32,batch_size=256,n_epochs=10,gamma=0.98,gae_lambda=0.8,lr=0.001)"
    wrap = "classic.wrappers=[{drifting: {keys: [length, force_mag], amplitude: [0.6, 0.6], period: 8, hold: 4}}]"
    cfg = [algo, wrap, f"classic.total_steps={steps}", "logging.progress=false", f"output_dir={tmp_path}"]
    return train(load_config("cartpole-ppo", [*cfg, f"name={name}", *extra]), stop_at=stop_at)


def test_learns_on_drifting_cartpole(tmp_path):
    """8k steps on CartPole whose pole length and motor force drift over +-60%: the training episodes of the last
    quarter last several times those of the first."""
    pytest.importorskip("gymnasium")
    import json

    summary = _train(tmp_path, "learn", 8192, ["classic.log_every=1024", "classic.eval_episodes=5"])
    lines = [json.loads(x) for x in (tmp_path / "learn" / "metrics.jsonl").read_text().splitlines()]
    lines = [x for x in lines if "episode/return" in x]
    first, last = lines[0], lines[-1]
    assert last["episode/return"] > 2.5 * first["episode/return"], (first, last)
    assert summary["final_return"] > 60


def test_resume_is_exact(tmp_path):
    pytest.importorskip("gymnasium")
    from safetensors.torch import load_file

    from ascent.trainer.checkpoint import Checkpointer

    extra = ["classic.eval_episodes=2"]
    whole = _train(tmp_path, "whole", 768, extra)
    assert _train(tmp_path, "split", 768, extra, stop_at=256) is None
    from ascent.app.pipeline import train

    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert any("encoder.core" in k for k in a) and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
