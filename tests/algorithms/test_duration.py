"""duration_aware (MLE-agent RL, Yang, He-Yueya & Liang 2025): hand-computed values, reduction to dr_grpo, the
unit invariance, and the correction of the asynchronous frequency bias."""

from __future__ import annotations

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.duration import DurationParams, duration_aware
from ascent.config.schema import AlgorithmConfig

CFG = AlgorithmConfig()


def inp(rewards, durations, groups=None, valid=None):
    r = torch.tensor(rewards, dtype=torch.float32)
    n = r.shape[0]
    g = torch.zeros(n, dtype=torch.long) if groups is None else torch.tensor(groups)
    v = torch.ones(n, dtype=torch.bool) if valid is None else torch.tensor(valid)
    return AdvantageInput(r, v, g, torch.ones(n, 2), {"durations": torch.tensor(durations, dtype=torch.float32)})


def test_hand_computed_values():
    """r = (1, 0, 0.5), d = (1, 3, 2): b = (1 + 0 + 1) / 6 = 1/3, w = d / 2 = (0.5, 1.5, 1),
    A = (0.5 * 2/3, 1.5 * -1/3, 1 * 1/6) = (1/3, -1/2, 1/6); the weighted advantages sum to 0."""
    a = duration_aware(inp([1.0, 0.0, 0.5], [1.0, 3.0, 2.0]), CFG)
    assert torch.allclose(a[:, 0], torch.tensor([1 / 3, -0.5, 1 / 6]))
    assert torch.allclose(a[:, 1], a[:, 0]), "broadcast over the completion tokens"
    assert abs(float(a[:, 0].sum())) < 1e-6


def test_power_zero_is_dr_grpo_and_invalid_rows_are_left_out():
    g = torch.Generator().manual_seed(0)
    r = torch.rand(12, generator=g)
    d = torch.rand(12, generator=g) * 30
    groups = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3]
    valid = [True] * 12
    valid[4] = False
    x = inp(r.tolist(), d.tolist(), groups, valid)
    x.rewards[4] = float("nan")
    plain = ADVANTAGES.resolve("dr_grpo")(x, CFG)
    ours = ADVANTAGES.resolve("duration_aware(power=0)")(x, CFG)
    assert torch.allclose(ours, plain, atol=1e-6)
    full = duration_aware(x, CFG)
    assert float(full[4].abs().sum()) == 0.0 and torch.isfinite(full).all()


def test_invariant_to_the_unit_of_time():
    x = inp([0.2, 0.9, 0.4, 0.0], [1.0, 25.0, 3.0, 7.0], [0, 0, 1, 1])
    y = inp([0.2, 0.9, 0.4, 0.0], [60.0, 1500.0, 180.0, 420.0], [0, 0, 1, 1])
    assert torch.allclose(duration_aware(x, CFG), duration_aware(y, CFG))


def test_corrects_the_frequency_bias_of_completion_ordered_batches():
    """Asynchronous collection: action a enters the batch with probability proportional to pi(a) / dt(a). The
    duration-aware policy gradient of such a batch matches the on-policy gradient E_pi[(r - V) grad log pi]
    (within Monte-Carlo error); the plain one (dr_grpo) points elsewhere."""
    logits = torch.tensor([0.5, 0.0, -0.5], requires_grad=True)
    pi = torch.softmax(logits.detach(), 0)
    reward, dt = torch.tensor([0.5, 0.6, 0.9]), torch.tensor([1.0, 4.0, 20.0])
    exact = torch.autograd.grad((torch.softmax(logits, 0) * reward).sum(), logits)[0]  # grad E_pi[r]
    biased = pi / dt / (pi / dt).sum()
    g = torch.Generator().manual_seed(0)
    a = torch.multinomial(biased, 200_000, replacement=True, generator=g)
    grads = {}
    for name in ("duration_aware", "dr_grpo"):
        x = inp(reward[a].tolist(), dt[a].tolist())
        adv = ADVANTAGES.resolve(name)(x, CFG)[:, 0]
        loss = (adv * torch.log_softmax(logits, 0)[a]).mean()
        grads[name] = torch.autograd.grad(loss, logits)[0]
    cos = lambda u, v: float(u @ v / (u.norm() * v.norm()))  # noqa: E731
    assert cos(grads["duration_aware"], exact) > 0.999
    assert torch.allclose(grads["duration_aware"], exact, atol=2e-3)
    assert cos(grads["dr_grpo"], exact) < 0.99
    assert grads["dr_grpo"][2] < 0.5 * exact[2], "the slow best action gets too little push without the weight"


def test_clear_errors():
    x = inp([1.0, 0.0], [1.0, 2.0])
    del x.extras["durations"]
    with pytest.raises(ValueError, match="needs inp.extras\\['durations'\\]"):
        duration_aware(x, CFG)
    y = inp([1.0, 0.0], [1.0, 2.0])
    y.extras["durations"] = torch.ones(3)
    with pytest.raises(ValueError, match="must be \\(2,\\)"):
        duration_aware(y, CFG)
    with pytest.raises(ValueError, match="power must be >= 0"):
        DurationParams(power=-1.0)


def test_benchmark_runs_on_a_tiny_budget():
    """benchmarks/agent_duration.py end to end: every arm per seed, then the paired summaries."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    args = ["benchmarks/agent_duration.py", "--seeds", "2", "--episodes", "64", "--batch", "8", "--workers", "8"]
    out = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert [r["arm"] for r in lines[:3]] == ["plain", "duration", "duration_outcome"] and len(lines) == 7
    for r in lines[:6]:
        assert 0 < r["expected_outcome"] <= 0.622 and abs(r["regret"] + r["expected_outcome"] - 0.6219) < 2e-3
    summary = lines[-1]
    assert set(summary["duration_vs_plain"]) >= {"expected_outcome", "p_deep_large"}
