"""GoRL (Zhang et al. 2025, arXiv:2512.02581): the prior KL and the flow-matching loss by hand, the decoder learning
a state-conditioned two-mode action distribution from the fixed prior, the stage schedule (identity decoder, then a
refined one with a fresh latent policy whose decoded behaviour matches the last stage's), and exact resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ascent.classic.gorl import FlowDecoder, GoRLParams, flow_matching_loss, kl_to_standard_normal


def test_kl_to_the_prior_by_hand():
    mean = torch.tensor([[0.0, 0.0], [1.0, -2.0]])
    log_std = torch.tensor([0.0, math.log(2.0)])
    # row 0: dim 0 is the prior (0); dim 1: (4 + 0 - 1) / 2 - ln 2. row 1 adds mu^2 / 2: 0.5 and 2.
    kl = kl_to_standard_normal(mean, log_std)
    assert torch.allclose(kl, torch.tensor([1.5 - math.log(2.0), 1.5 - math.log(2.0) + 2.5]))


def test_flow_matching_loss_by_hand():
    """A zero velocity field: the loss is |a - x0|^2 summed over dims, whatever t."""
    dec = FlowDecoder(obs_dim=1, action_dim=2, hidden=[8], flow_steps=4)
    for m in dec.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.zeros_(m.weight), torch.nn.init.zeros_(m.bias)
    obs, actions = torch.zeros(2, 1), torch.tensor([[1.0, 2.0], [0.0, -1.0]])
    x0, t = torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([0.3, 0.9])
    assert math.isclose(flow_matching_loss(dec, obs, actions, x0, t).item(), (1 + 4 + 1 + 4) / 2, rel_tol=1e-6)
    assert torch.equal(dec(obs, x0), x0)  # zero velocity: the ODE leaves the latent where it is


def test_decoder_learns_a_state_conditioned_bimodal_map_from_the_prior():
    """Actions +-(1 + s) with equal odds: a Gaussian cannot put its mass there, the flow from N(0, 1) does."""
    torch.manual_seed(0)
    dec = FlowDecoder(obs_dim=1, action_dim=1, hidden=[64, 64], flow_steps=10)
    opt = torch.optim.Adam(dec.parameters(), lr=3e-3)
    for _ in range(1500):
        s = torch.rand(256, 1)
        a = (1 + s) * torch.where(torch.rand(256, 1) < 0.5, -1.0, 1.0)
        loss = flow_matching_loss(dec, s, a, torch.randn(256, 1), torch.rand(256))
        opt.zero_grad(), loss.backward(), opt.step()
    with torch.no_grad():
        s = torch.full((2000, 1), 0.5)
        out = dec(s, torch.randn(2000, 1)).squeeze(1)
        near = ((out.abs() - 1.5).abs() < 0.3).float().mean()
        # the sign of the output follows the sign of the latent: the map splits the prior into the two modes
        lat = torch.linspace(-2, 2, 9)[:, None]
        mapped = dec(torch.full((9, 1), 0.5), lat).squeeze(1)
    assert near > 0.8, f"only {near:.2f} of the samples near +-1.5"
    assert 0.35 < (out > 0).float().mean() < 0.65
    assert mapped[0] < -1.0 and mapped[-1] > 1.0


def test_bad_params_say_what_to_change():
    with pytest.raises(ValueError, match="stages must be > 0"):
        GoRLParams(stages=0)
    with pytest.raises(ValueError, match="kl_coef must be >= 0"):
        GoRLParams(kl_coef=-1.0)


def _algo(total_steps: int, **kw):
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from ascent.classic.base import ClassicContext
    from ascent.classic.envs import VecEnv
    from ascent.classic.gorl import GoRL

    torch.manual_seed(0)
    envs = VecEnv(lambda: gym.make("Pendulum-v1"), 2, seed=0)
    params = GoRLParams(n_steps=32, batch_size=32, n_epochs=2, hidden=[16, 16], decoder_hidden=[32, 32], **kw)
    return GoRL(ClassicContext(envs, total_steps, 0, torch.device("cpu")), params)


def test_stages_switch_from_identity_to_a_decoder_that_keeps_the_behaviour():
    """Stage 0 acts with a = clip(eps); the boundary refines the decoder on the stage's actions and resets the
    latent policy to ~N(0, I), under which decoder(prior) reproduces the stage's action distribution."""
    algo = _algo(256, stages=2, decoder_updates=800, decoder_batch=64)
    obs = np.zeros((4, 3), np.float32)
    assert not algo.decoded and np.allclose(
        algo.act(obs, True), np.clip(algo.actor.net(torch.from_numpy(obs)).detach().numpy(), -2, 2)
    )
    while algo.stage == 0:
        algo.iteration(False)
    assert algo.decoded and algo.steps == 128 and algo.buf_len == 0
    o = torch.from_numpy(np.tile(algo.envs.obs[:1], (4000, 1)))
    with torch.no_grad():
        assert float(algo.actor.net(o).abs().max()) < 0.5  # a fresh latent policy near the prior's mean
        decoded = algo.decoder(o, torch.randn(4000, 1)).clamp(-2, 2).squeeze(1)
    # stage 0's actions were clip(N(mu(s) ~ 0, 1)): mean ~0, sd ~1
    assert abs(float(decoded.mean())) < 0.3 and 0.6 < float(decoded.std()) < 1.3


def test_resume_is_exact(tmp_path):
    pytest.importorskip("gymnasium")
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import Checkpointer

    algo = "classic.algorithm=gorl(n_steps=32,batch_size=32,n_epochs=2,stages=2,decoder_updates=20,hidden=[16,16])"
    common = ["classic.env=Pendulum-v1", "classic.total_steps=256", "classic.num_envs=2", algo]
    common += ["logging.progress=false", "classic.eval_episodes=2", f"output_dir={tmp_path}"]
    whole = train(load_config("cartpole-ppo", [*common, "name=whole"]))
    assert train(load_config("cartpole-ppo", [*common, "name=split"]), stop_at=192) is None  # after the boundary
    split = train(run_dir=tmp_path / "split", resume=True)
    assert split["final_returns"] == whole["final_returns"]
    a, b = (
        load_file(str(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors"))
        for n in ("whole", "split")
    )
    assert a.keys() == b.keys() and any("decoder" in k for k in a) and all(torch.equal(a[k], b[k]) for k in a)
