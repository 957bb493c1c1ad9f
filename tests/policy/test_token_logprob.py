"""`ascent.policy.logprob.token_logprob`: the chunked log-prob of chosen tokens and its in-place backward
equal torch's log_softmax + gather (values and gradients), with skipped targets, temperatures, chunk edges."""

from __future__ import annotations

import pytest
import torch

from ascent.policy import logprob
from ascent.policy.logprob import token_logprob


def reference(x: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    lp = torch.log_softmax(x.double() / temperature, -1).gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)
    return lp * (targets >= 0)


@pytest.mark.parametrize("shape", [(4, 7, 17), (3, 20, 5000), (2, 9, 1)])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("path", ["native", "torch-row-chunks", "torch"])  # native kernel; torch ops, 1 row per chunk
def test_values_and_gradients_match_log_softmax(shape, temperature, path, monkeypatch):
    from ascent import kernels

    if path == "native" and kernels.load() is None:
        pytest.skip(f"native kernels unavailable: {kernels.unavailable()}")
    if path != "native":
        monkeypatch.setattr(logprob, "_native", lambda: None)
    if path == "torch-row-chunks":
        monkeypatch.setattr(logprob, "CHUNK_BYTES", 64)
    g = torch.Generator().manual_seed(0)
    n, t, v = shape
    x = (3 * torch.randn(shape, generator=g)).requires_grad_()
    targets = torch.randint(0, v, (n, t), generator=g)
    targets[0, -1] = -1
    targets[-1, :2] = -1
    w = torch.randn(n, t, generator=g)
    lp = token_logprob(x, targets, temperature)
    assert lp.shape == (n, t) and lp.dtype == torch.float32
    assert bool((lp[targets < 0] == 0).all())
    (lp * w).sum().backward()
    xd = x.detach().double().requires_grad_()
    want = reference(xd, targets, temperature)
    (want * w.double()).sum().backward()
    torch.testing.assert_close(lp.double(), want.detach(), atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(x.grad.double(), xd.grad, atol=2e-6, rtol=1e-4)
    assert bool((x.grad[targets < 0] == 0).all())  # skipped positions get no gradient


def test_rows_split_across_threads_match_one_thread(two_threads):
    from ascent import kernels

    if kernels.load() is None:
        pytest.skip(f"native kernels unavailable: {kernels.unavailable()}")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 3000, generator=g).requires_grad_()
    targets = torch.randint(0, 3000, (37,), generator=g)
    lp = token_logprob(x, targets, 0.9)
    lp.sum().backward()
    torch.set_num_threads(1)
    x1 = x.detach().clone().requires_grad_()
    lp1 = token_logprob(x1, targets, 0.9)
    lp1.sum().backward()
    assert torch.equal(lp, lp1) and torch.equal(x.grad, x1.grad)  # same per-row arithmetic, any split


def test_bf16_logits_are_upcast_and_2d_inputs_work():
    x = torch.randn(6, 50, dtype=torch.bfloat16)
    targets = torch.tensor([0, 3, 49, -1, 7, 1])
    lp = token_logprob(x, targets)
    assert lp.dtype == torch.float32 and lp.shape == (6,)
    torch.testing.assert_close(lp, reference(x.float(), targets, 1.0).float(), atol=1e-5, rtol=1e-5)
