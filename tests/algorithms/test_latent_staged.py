"""ReLaX's Dynamic Spectral Dispersion and `relax` advantage (ascent/algorithms/latent.py) and Tree-OPO's staged
advantage (ascent/algorithms/staged.py): DSD recovers a known linear system's eigenvalue moduli, the advantages
match hand-computed values."""

from __future__ import annotations

import types

import pytest
import torch

from ascent.algorithms import ADVANTAGES
from ascent.algorithms.advantages import grpo
from ascent.algorithms.latent import (
    DsdState,
    RelaxParams,
    completion_states,
    dmd_eigenvalues,
    dynamic_spectral_dispersion,
    relax,
)
from ascent.algorithms.staged import isotonic, stage_baselines, staged
from ascent.algorithms.types import AdvantageInput
from ascent.config.schema import AlgorithmConfig

CFG = AlgorithmConfig(std_eps=1e-6)


def trajectory(a: torch.Tensor, x0: torch.Tensor, steps: int, embed: torch.Tensor) -> torch.Tensor:
    """(steps + 1, D) states embed @ z_t of the linear system z_{t+1} = a z_t."""
    zs = [x0]
    for _ in range(steps):
        zs.append(a @ zs[-1])
    return torch.stack(zs) @ embed.T


def test_dsd_recovers_a_linear_systems_eigenvalue_moduli():
    g = torch.Generator().manual_seed(0)
    p = torch.randn(3, 3, generator=g, dtype=torch.float64)
    a = p @ torch.diag(torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64)) @ torch.linalg.inv(p)  # not symmetric
    embed = torch.randn(6, 3, generator=g, dtype=torch.float64)  # 3-dim dynamics seen in 6 dims
    states = trajectory(a, torch.randn(3, generator=g, dtype=torch.float64), 10, embed)
    lam = dmd_eigenvalues(states, rank=8)  # the rank is cut to the 3 directions the states span
    assert lam.numel() == 3
    assert sorted(lam.abs().tolist()) == pytest.approx([0.2, 0.5, 0.9], abs=1e-6)
    assert dynamic_spectral_dispersion(states) == pytest.approx(0.2466667 / 3, abs=1e-6)  # Var([.9, .5, .2])
    # a damped rotation (complex pair of modulus 0.8) and a decay 0.3: Var([0.8, 0.8, 0.3]) = 1/18
    c, s = torch.cos(torch.tensor(0.7, dtype=torch.float64)), torch.sin(torch.tensor(0.7, dtype=torch.float64))
    rot = torch.tensor([[0.8 * c, -0.8 * s, 0.0], [0.8 * s, 0.8 * c, 0.0], [0.0, 0.0, 0.3]], dtype=torch.float64)
    states = trajectory(rot, torch.tensor([1.0, 0.5, 1.0], dtype=torch.float64), 8, embed)
    assert dynamic_spectral_dispersion(states) == pytest.approx(1 / 18, abs=1e-6)
    # uniform dynamics (every mode decays alike) have zero dispersion; too short a sequence has none
    states = trajectory(0.7 * torch.eye(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), 5, embed)
    assert dynamic_spectral_dispersion(states) == pytest.approx(0.0, abs=1e-12)
    assert dynamic_spectral_dispersion(torch.ones(1, 4)) == 0.0
    with pytest.raises(ValueError, match="rank"):
        RelaxParams(rank=1)


def test_completion_states_span_the_choices():
    h = torch.arange(8.0)[:, None]
    assert completion_states(h, torch.tensor([0, 0, 0, 1, 1, 1, 0, 0])).squeeze(-1).tolist() == [2.0, 3.0, 4.0, 5.0]
    assert completion_states(h, torch.zeros(8)).shape == (0, 1)


def advantage_input(rewards, groups, dsd=None, stage=None) -> AdvantageInput:
    n = len(rewards)
    extras = {}
    if dsd is not None:
        extras["dsd"] = torch.tensor(dsd)
    if stage is not None:
        extras["stage"] = torch.tensor(stage)
    return AdvantageInput(
        torch.tensor(rewards), torch.ones(n, dtype=torch.bool), torch.tensor(groups), torch.ones(n, 2), extras
    )


def test_relax_by_hand():
    inp = advantage_input([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [0, 0, 0, 0, 1, 1], dsd=[3.0, 1.0, 1.0, 3.0, 5.0, 0.0])
    a = 0.75 / (1.0 / 3.0) ** 0.5 / 2  # GRPO: |r - 0.5| / std, std = sqrt(1/3)
    z = 1.0 / (4.0 / 3.0) ** 0.5  # DSD z-scores +-0.866
    b = 0.2 * z
    got = relax(inp, CFG, RelaxParams(beta=0.2, kappa=2.0))[:, 0]
    want = [a / 0.75 * 0.5 * 2 + b, -a / 0.75 * 0.5 * 2 - b, a / 0.75 * 0.5 * 2 - b, -a / 0.75 * 0.5 * 2 + b, 0, 0]
    assert got.tolist() == pytest.approx(want, abs=1e-4)  # the flat group (rewards 1, 1) stays at zero
    big = relax(inp, CFG, RelaxParams(beta=10.0, kappa=2.0))[:, 0]  # the bonus is clipped to |A| / kappa
    base = grpo(inp, CFG)[:, 0]
    assert big.tolist() == pytest.approx(
        (base + base.abs() / 2 * torch.tensor([1, -1, -1, 1, 0, 0])).tolist(), abs=1e-4
    )
    assert torch.all(torch.sign(big) == torch.sign(base))  # never flips an advantage
    assert torch.allclose(relax(inp, CFG, RelaxParams(beta=0.0)), grpo(inp, CFG))
    with pytest.raises(ValueError, match="dsd"):
        relax(advantage_input([1.0, 0.0], [0, 0]), CFG)


class Rows:
    """The three fields of a RolloutBatch that DsdState reads."""

    def __init__(self, input_ids, attention_mask, completion_mask):
        self.input_ids, self.attention_mask, self.completion_mask = input_ids, attention_mask, completion_mask

    def __len__(self):
        return len(self.input_ids)


def test_dsd_state_fills_the_extras_from_the_policys_hidden_states(tiny_policy):
    ids = torch.tensor([[3, 4, 5, 6, 7, 8, 0], [3, 4, 9, 9, 2, 1, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]], dtype=torch.float32)
    batch = Rows(ids, torch.tensor([[1] * 6 + [0], [1] * 7]), mask)
    services = types.SimpleNamespace(policy_model=tiny_policy.model, micro_batch_size=1)
    state = DsdState(RelaxParams(), services)
    got = state.advantage_extras(batch)["dsd"]
    with torch.no_grad():
        h = tiny_policy.model(input_ids=ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    want = [dynamic_spectral_dispersion(completion_states(h.hidden_states[-1][i].float(), mask[i])) for i in range(2)]
    assert got.shape == (2,) and got.tolist() == pytest.approx(want, abs=1e-5)
    assert state.after_optimizer_step(batch, torch.arange(2), mask) == {"relax/dsd_mean": pytest.approx(sum(want) / 2)}
    assert ADVANTAGES.entry("relax").state is DsdState


def test_isotonic_and_stage_baselines_by_hand():
    assert isotonic([0.0, 1.0, 0.5], [2.0, 2.0, 2.0]) == [0.0, 0.75, 0.75]
    assert isotonic([3.0, 2.0, 1.0], [1.0, 1.0, 1.0]) == [2.0, 2.0, 2.0]
    r = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    base = stage_baselines(
        r, torch.ones(6, dtype=torch.bool), torch.zeros(6, dtype=torch.long), torch.tensor([0, 0, 1, 1, 2, 2])
    )
    assert base.tolist() == [0.0, 0.0, 0.75, 0.75, 0.75, 0.75]


def test_staged_by_hand_and_grpo_without_stages():
    inp = advantage_input([0.0, 0.0, 1.0, 1.0, 1.0, 0.0], [0] * 6, stage=[0, 0, 1, 1, 2, 2])
    std = 0.3**0.5  # unbiased std of the group's rewards
    want = [0.0, 0.0, 0.25 / std, 0.25 / std, 0.25 / std, -0.75 / std]
    assert staged(inp, CFG)[:, 0].tolist() == pytest.approx(want, abs=1e-5)
    plain = advantage_input([0.0, 1.0, 1.0, 0.5, 0.5, 0.5], [0, 0, 0, 1, 1, 1])
    assert torch.allclose(staged(plain, CFG), grpo(plain, CFG), atol=1e-6)
    flat = advantage_input([1.0, 1.0, 1.0], [0, 0, 0], stage=[0, 1, 2])
    assert torch.equal(staged(flat, CFG), torch.zeros(3, 2))
