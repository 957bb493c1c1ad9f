"""A toy 2-D consistency model: data, the exact teacher denoiser, consistency distillation and the multistep
sampler (Song, Dhariwal, Chen & Sutskever 2023, "Consistency Models", arXiv:2303.01469).

Data: a mixture of `modes` isotropic Gaussians (std `spread`) evenly spaced on a circle of radius `radius`. Its
denoiser under Gaussian noise x = x0 + σ z is exact:

    D(x, σ) = E[x0 | x] = Σ_k w_k(x) (μ_k + s² / (s² + σ²) (x − μ_k)),   w_k ∝ N(x; μ_k, (s² + σ²) I)

so the probability-flow ODE dx/dσ = (x − D(x, σ)) / σ is known, and it plays the pretrained diffusion model that
consistency distillation (CD) distils (the paper distils a trained EDM). The consistency function uses the paper's
parametrisation f_θ(x, σ) = c_skip(σ) x + c_out(σ) F_θ(x, σ) with c_skip = σ_d² / ((σ − σ_min)² + σ_d²),
c_out = σ_d (σ − σ_min) / √(σ_d² + σ²), so f_θ(x, σ_min) = x exactly. CD minimises, over the Karras grid
σ_1 < … < σ_N,

    E ‖ f_θ(x_{n+1}, σ_{n+1}) − f_θ⁻(x̂_n, σ_n) ‖²,   x_{n+1} = x0 + σ_{n+1} z,
    x̂_n = x_{n+1} + (σ_n − σ_{n+1}) (x_{n+1} − D(x_{n+1}, σ_{n+1})) / σ_{n+1}     (one Euler step of the ODE)

with θ⁻ an EMA of θ. The multistep sampler (the paper's Algorithm 1): x = σ_max z, x̂ = f(x, σ_max), then for each
τ of `taus`: x = x̂ + √(τ² − σ_min²) z, x̂ = f(x, τ).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

SIGMA_MIN = 0.002


@dataclass(frozen=True)
class ToyData:
    """A ring of Gaussian modes in the plane."""

    modes: int = 8
    """Number of mixture components, evenly spaced on the circle."""
    radius: float = 2.0
    """Radius of the circle of means."""
    spread: float = 0.15
    """Standard deviation of each component."""

    def means(self) -> torch.Tensor:
        """(K, 2) the component means, the first at angle 0."""
        angles = torch.arange(self.modes, dtype=torch.float64) * 2 * math.pi / self.modes
        return (self.radius * torch.stack([angles.cos(), angles.sin()], dim=-1)).float()

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """(n, 2) points of the mixture."""
        k = torch.randint(self.modes, (n,), generator=generator)
        return self.means()[k] + self.spread * torch.randn(n, 2, generator=generator)

    def denoise(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """(n, 2) the exact E[x0 | x0 + σ z = x] (σ: (n,) or a scalar)."""
        mu = self.means()  # (K, 2)
        var = self.spread**2 + torch.as_tensor(sigma, dtype=x.dtype).reshape(-1, 1) ** 2  # (n, 1)
        logw = -((x[:, None, :] - mu[None]) ** 2).sum(-1) / (2 * var)  # (n, K); equal priors and variances
        w = torch.softmax(logw, dim=-1)  # (n, K)
        shrink = self.spread**2 / var  # (n, 1)
        post = mu[None] + shrink[:, :, None] * (x[:, None, :] - mu[None])  # (n, K, 2)
        return (w[:, :, None] * post).sum(1)


def karras_sigmas(n: int, sigma_max: float, rho: float = 7.0) -> torch.Tensor:
    """(n,) the increasing Karras grid from SIGMA_MIN to sigma_max.

    >>> [round(s, 4) for s in karras_sigmas(3, 1.0).tolist()]
    [0.002, 0.0872, 1.0]
    """
    ramp = torch.linspace(0, 1, n, dtype=torch.float64)
    lo, hi = SIGMA_MIN ** (1 / rho), sigma_max ** (1 / rho)
    return ((lo + ramp * (hi - lo)) ** rho).float()


class ConsistencyModel(nn.Module):
    """f_θ(x, σ) = c_skip(σ) x + c_out(σ) F_θ(x, log σ) for 2-D points; F_θ an MLP."""

    def __init__(self, hidden: int = 128, sigma_data: float = 1.0) -> None:
        super().__init__()
        self.sigma_data = sigma_data
        self.net = nn.Sequential(
            nn.Linear(3, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2)
        )

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """(n, 2) f_θ(x, σ); σ: (n,) or a scalar."""
        s = torch.as_tensor(sigma, dtype=x.dtype).reshape(-1, 1).expand(x.shape[0], 1)  # (n, 1)
        sd = self.sigma_data
        c_skip = sd**2 / ((s - SIGMA_MIN) ** 2 + sd**2)
        c_out = sd * (s - SIGMA_MIN) / (sd**2 + s**2).sqrt()
        return c_skip * x + c_out * self.net(torch.cat([x, s.log() / 4], dim=-1))


@dataclass(frozen=True)
class DistillConfig:
    """Consistency distillation of the toy model."""

    steps: int = 1500
    """Adam steps."""
    batch_size: int = 256
    """Data points per step."""
    lr: float = 2e-3
    """Adam learning rate."""
    grid: int = 18
    """Points of the Karras grid (N)."""
    sigma_max: float = 4.0
    """Largest noise level."""
    ema: float = 0.95
    """EMA rate of the target network θ⁻."""


def distill(model: ConsistencyModel, data: ToyData, cfg: DistillConfig, seed: int) -> list[float]:
    """Train `model` in place by consistency distillation from the exact denoiser; returns the loss per step."""
    g = torch.Generator().manual_seed(seed)
    target = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sigmas = karras_sigmas(cfg.grid, cfg.sigma_max)
    losses = []
    for _ in range(cfg.steps):
        x0 = data.sample(cfg.batch_size, g)  # (B, 2)
        n = torch.randint(cfg.grid - 1, (cfg.batch_size,), generator=g)
        s_hi, s_lo = sigmas[n + 1], sigmas[n]  # (B,)
        x_hi = x0 + s_hi[:, None] * torch.randn(x0.shape, generator=g)
        with torch.no_grad():
            drift = (x_hi - data.denoise(x_hi, s_hi)) / s_hi[:, None]
            x_lo = x_hi + (s_lo - s_hi)[:, None] * drift  # one Euler step of the probability-flow ODE
            want = target(x_lo, s_lo)
        loss = ((model(x_hi, s_hi) - want) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p_t, p in zip(target.parameters(), model.parameters()):
                p_t.mul_(cfg.ema).add_(p, alpha=1 - cfg.ema)
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def sample(
    model: ConsistencyModel, n: int, sigma_max: float, taus: tuple[float, ...], generator: torch.Generator
) -> torch.Tensor:
    """(n, 2) points of the multistep consistency sampler (Algorithm 1 of the paper)."""
    x = sigma_max * torch.randn(n, 2, generator=generator)
    x0 = model(x, torch.tensor(sigma_max))
    for tau in taus:
        x = x0 + math.sqrt(tau**2 - SIGMA_MIN**2) * torch.randn(n, 2, generator=generator)
        x0 = model(x, torch.tensor(tau))
    return x0
