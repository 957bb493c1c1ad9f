"""Meta-RTL: reinforcement-based meta-transfer learning (Fu, He, Yang, Liu & Xiong 2024, "Meta-RTL:
Reinforcement-Based Meta-Transfer Learning for Low-Resource Commonsense Reasoning", arXiv:2409.19075).

Multi-source meta-transfer learning trains a meta model on N source tasks for a low-resource target task; plain
meta learning weighs the sources equally, whatever their relation to the target. Meta-RTL learns the weights. Each
meta iteration t:

1. for every source i: a temporal meta model theta_i' = theta - alpha grad L_{S_i}^support(theta) (one inner step, as
   in MAML, Finn et al. 2017, arXiv:1703.03400);
2. the reward of source i is the loss difference on a batch of target data
       r_i = L_T(theta) - L_T(theta_i')
   (the general loss of the meta model minus the task-specific loss of the source's temporal meta model: positive
   when a step on source i helps the target);
3. an LSTM policy, fed the previous weights and rewards, outputs the source weights w_t (a softmax of Gaussian-
   perturbed logits, so that REINFORCE has a density) and is updated by REINFORCE with the weighted reward
   sum_i w_i r_i against a moving-average baseline;
4. the meta model takes the weighted first-order meta step
       theta <- theta - beta sum_i w_i grad L_{S_i}^query(theta_i').

The control (`uniform`) is the same loop with w_i = 1/N and no policy. After meta training both meta models are
fine-tuned on the target's few labelled points and scored by the mean squared error on fresh target points.

The toy task family (regression, `Domain`): linear regression y = w . x + 0.1 noise, x ~ N(0, I_d); the target
tasks draw w ~ N(w0, 0.3^2 I) and are known from `shots` < d points, so the prior the meta model brings decides the
error. The four sources: (0) `related` w ~ N(w0, 0.3^2 I), the target's own family; (1) `opposite` w ~ N(-w0, ...);
(2) `other` w ~ N(u, ...) for an unrelated direction u; (3) `noise` y ~ N(0, 1) independent of x. Equal weights pull
the meta model towards the mean of the four (u / 4), learned weights can pull it towards w0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call

from ascent.incontext.methods import META_METHODS, PAIRS
from ascent.registry import Paper

META_RTL = Paper(
    "Meta-RTL",
    "Fu, He, Yang, Liu & Xiong",
    2024,
    "Meta-RTL: Reinforcement-Based Meta-Transfer Learning for Low-Resource Commonsense Reasoning",
    "arXiv:2409.19075",
)

SOURCE_NAMES = ("related", "opposite", "other", "noise")


class Domain:
    """The task family of one seed: the target's mean weight w0 and the unrelated direction u, both (d,)."""

    def __init__(self, dim: int, rng: np.random.Generator) -> None:
        self.dim, self.w0, self.u = dim, rng.normal(0, 1, dim), rng.normal(0, 1, dim)
        self.means = {"related": self.w0, "opposite": -self.w0, "other": self.u}

    def sample_task(self, kind: str, rng: np.random.Generator) -> np.ndarray:
        """The weight vector (d,) of a task of `kind` (`target` draws like `related`; `noise` has none)."""
        if kind not in (*SOURCE_NAMES, "target"):
            raise ValueError(f"unknown task kind {kind!r}; valid: {SOURCE_NAMES + ('target',)}")
        mean = self.w0 if kind == "target" else self.means.get(kind, np.zeros(self.dim))
        return mean + rng.normal(0, 0.3, self.dim)

    def batch(self, kind: str, w: np.ndarray, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(x (n, d), y (n, 1)) of the task with weights w (`noise`: labels independent of x)."""
        x = rng.normal(0, 1, (n, self.dim))
        y = rng.normal(0, 1, (n, 1)) if kind == "noise" else x @ w[:, None] + rng.normal(0, 0.1, (n, 1))
        return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)


def regressor(dim: int) -> torch.nn.Module:
    return torch.nn.Linear(dim, 1)


def mse(model: torch.nn.Module, params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.mean((functional_call(model, params, (x,)) - y) ** 2)


class WeightPolicy(torch.nn.Module):
    """LSTM over meta iterations: input (previous weights, previous rewards) (2N,), output N logits; the weights
    are softmax(logits + sigma * noise) (REINFORCE on the Gaussian of the perturbed logits)."""

    def __init__(self, n: int, hidden: int, sigma: float) -> None:
        super().__init__()
        self.cell = torch.nn.LSTMCell(2 * n, hidden)
        self.head = torch.nn.Linear(hidden, n)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)  # starts uniform
        self.sigma, self.state = sigma, None

    def act(
        self, prev_w: torch.Tensor, prev_r: torch.Tensor, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights (N,), log-probability of the sampled logits)."""
        state = None if self.state is None else (self.state[0].detach(), self.state[1].detach())
        h, c = self.cell(torch.cat([prev_w, prev_r])[None], state)
        self.state = (h, c)
        mu = self.head(h)[0]  # (N,)
        z = mu.detach() + self.sigma * torch.randn(mu.shape, generator=gen)
        logp = (-0.5 * ((z - mu) / self.sigma) ** 2).sum()
        return torch.softmax(z, 0), logp


@dataclass(frozen=True)
class MetaRTLParams:
    iterations: int = 200
    """Meta iterations."""
    tasks_per_seed: int = 4
    """Target tasks (held out, one meta training per arm each) per seed."""
    shots: int = 5
    """Labelled target points (the low-resource target's training data)."""
    batch: int = 20
    """Points per source support and query batch."""
    inner_lr: float = 0.05
    """alpha, the temporal meta models' step."""
    meta_lr: float = 0.02
    """beta, Adam step of the meta model."""
    policy_lr: float = 0.01
    """Adam step of the LSTM policy."""
    sigma: float = 0.5
    """Exploration noise on the policy's logits."""
    dim: int = 8
    """d, input dimension of the linear tasks (shots < d: the target alone is underdetermined)."""
    lstm_hidden: int = 32
    """Width of the LSTM policy."""
    finetune_steps: int = 20
    """SGD steps on the target's labelled points after meta training."""
    finetune_lr: float = 0.05
    """Their step size."""
    test_points: int = 200
    """Fresh target points of the score."""

    def __post_init__(self) -> None:
        if min(self.iterations, self.tasks_per_seed, self.shots, self.batch, self.dim, self.test_points) < 1:
            raise ValueError("meta_rtl sizes (iterations, tasks_per_seed, shots, batch, dim, test_points) must be >= 1")
        if min(self.inner_lr, self.meta_lr, self.policy_lr, self.sigma, self.finetune_lr) <= 0:
            raise ValueError("meta_rtl learning rates and sigma must be > 0")


def meta_train(p: MetaRTLParams, dom: Domain, shots: tuple, seed: int, learn_weights: bool) -> tuple:
    """Meta-train a regressor on the four sources for the target whose labelled points are `shots`; returns the
    model and the (iterations, N) weights used."""
    rng = np.random.default_rng([seed, 7])  # the same source batches for both arms
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = regressor(p.dim)
    opt = torch.optim.Adam(model.parameters(), lr=p.meta_lr)
    n = len(SOURCE_NAMES)
    policy = WeightPolicy(n, p.lstm_hidden, p.sigma)
    popt = torch.optim.Adam(policy.parameters(), lr=p.policy_lr)
    w, r, baseline, scale, used = torch.full((n,), 1.0 / n), torch.zeros(n), 0.0, 0.0, []
    xs, ys = shots
    for _ in range(p.iterations):
        params = dict(model.named_parameters())
        temporal, query = [], []
        for kind in SOURCE_NAMES:
            task = dom.sample_task(kind, rng)
            xs_s, ys_s = dom.batch(kind, task, p.batch, rng)
            grads = torch.autograd.grad(mse(model, params, xs_s, ys_s), list(params.values()))
            temporal.append({k: v.detach() - p.inner_lr * g for (k, v), g in zip(params.items(), grads)})
            query.append(dom.batch(kind, task, p.batch, rng))
        if learn_weights:
            with torch.no_grad():
                general = float(mse(model, params, xs, ys))
                r = torch.tensor([general - float(mse(model, t, xs, ys)) for t in temporal])  # loss differences
            w_new, logp = policy.act(w, r, gen)
            reward = float((w_new * r).sum())
            adv = (reward - baseline) / (scale + 1e-8)
            baseline, scale = 0.9 * baseline + 0.1 * reward, 0.9 * scale + 0.1 * abs(reward - baseline)
            popt.zero_grad()
            (-adv * logp).backward()
            popt.step()
            w = w_new.detach()
        opt.zero_grad()
        for wi, t, (xq, yq) in zip(w, temporal, query):  # first-order meta gradient, weighted
            t = {k: v.requires_grad_(True) for k, v in t.items()}
            grads = torch.autograd.grad(mse(model, t, xq, yq), list(t.values()))
            for prm, g in zip(model.parameters(), grads):
                prm.grad = wi * g if prm.grad is None else prm.grad + wi * g
        opt.step()
        used.append(w.tolist())
    return model, np.array(used)


def finetune_score(model: torch.nn.Module, p: MetaRTLParams, shots: tuple, test: tuple) -> float:
    """Target test MSE after `finetune_steps` SGD steps on the labelled points."""
    opt = torch.optim.SGD(model.parameters(), lr=p.finetune_lr)
    xs, ys = shots
    for _ in range(p.finetune_steps):
        opt.zero_grad()
        torch.mean((model(xs) - ys) ** 2).backward()
        opt.step()
    with torch.no_grad():
        return float(torch.mean((model(test[0]) - test[1]) ** 2))


@META_METHODS.register(
    "meta_rtl",
    params=MetaRTLParams,
    paper=META_RTL,
    fidelity="reduced",
    departures=(
        "toy linear regression with four synthetic source families instead of BERT/ALBERT on commonsense QA",
        "first-order meta gradient (no second derivatives through the inner step), one inner step per source",
        "the policy's weights are a softmax of Gaussian-perturbed LSTM logits, trained by REINFORCE per iteration",
    ),
)
def run_meta_rtl(seed: int, params: MetaRTLParams = MetaRTLParams()) -> dict:
    """`tasks_per_seed` held-out target tasks: Meta-RTL and uniform weighting meta-trained from the same initial
    weights on the same source batches, both fine-tuned on the same shots; target test MSE of each, and the mean
    weight Meta-RTL gave each source over the last half of meta training."""
    p = params
    rng = np.random.default_rng([seed, 11])
    dom = Domain(p.dim, rng)
    out: dict = {"mse_meta_rtl_per_task": [], "mse_uniform_per_task": []}
    weights = []
    for k in range(p.tasks_per_seed):
        target = dom.sample_task("target", rng)
        shots = dom.batch("target", target, p.shots, rng)
        test = dom.batch("target", target, p.test_points, rng)
        for arm, learn in (("meta_rtl", True), ("uniform", False)):
            model, used = meta_train(p, dom, shots, seed * 1000 + k, learn)
            out[f"mse_{arm}_per_task"].append(finetune_score(model, p, shots, test))
            if learn:
                weights.append(used[len(used) // 2 :].mean(0))
    out["mse_meta_rtl"] = float(np.mean(out["mse_meta_rtl_per_task"]))
    out["mse_uniform"] = float(np.mean(out["mse_uniform_per_task"]))
    for name, w in zip(SOURCE_NAMES, np.mean(weights, 0)):
        out[f"weight_{name}"] = float(w)
    return out


PAIRS["meta_rtl"] = [("mse_meta_rtl", "mse_uniform")]
