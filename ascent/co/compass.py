"""COMPASS (Chalumeau et al. 2023, "Combinatorial Optimization with Policy Adaptation using Latent Space Search",
arXiv:2311.13569): one decoder conditioned on a continuous latent vector z, so that every z is a different policy;
trained so that only the best latent per instance and start gets the gradient, searched at test time with CMA-ES.

- Policy (`compass`, `LatentModel`): the attention model whose decoder also reads `a * z`, z in [-1, 1]^L (L = 16,
  amplification a = 100 in the authors' code). The authors concatenate the latent to the decoder's context query and
  to the keys and values of its glimpse; every one of those maps is linear, so concatenation adds `W_q z` to the
  query, a per-solution constant to every key (which the glimpse's softmax ignores: it shifts all compatibilities of
  a query by the same amount) and a per-solution constant to every value (which, attention weights summing to one,
  adds `W_v z` to the glimpse). `LatentModel` adds exactly those two terms, so it is the authors' conditioning with
  no (B, S, N, d) tensor. Both maps start at zero: a COMPASS model built from a trained POMO checkpoint
  (`from_checkpoint`) decodes like it until training makes the latents matter.
- Training (`compass` co_loss, `CompassTrainer`): each step samples K latents uniformly, rolls every latent out from
  every start node (S = K x n solutions per instance, latent-major), and gives the gradient only to the latent with
  the best return per (instance, start), with its own starts' mean as baseline (POMO's advantage); a (instance,
  start) where several latents tie for the best trains none (the authors' `calculate_loss`).
- Search (`latent_search`): per instance a pool of C CMA-ES states (the `cma` package) whose means start at the
  centroids of a centroidal Voronoi tessellation of the latent box, used in turn; each generation evaluates P latents
  by greedy rollouts from every start node (fitness: the best tour over the starts) and updates the state with the
  P // 2 best (the authors' `CMAPoolEmitter` and `slowrl_validate`). The budget counts rollouts per instance:
  generations x P x n. `strategy="uniform"` draws fresh uniform latents instead (the paper's ablation), and
  `sample_search` is the control: POMO sampling the same number of rollouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
import torch
from torch import nn

from ascent.co.decoding import Solutions, rollout
from ascent.co.envs import RouteState, make_env
from ascent.co.losses import CO_LOSSES
from ascent.co.model import CO_POLICIES, AttentionModel, AttentionModelParams, Decoder, Encoded, Encoder
from ascent.co.problems import Instances, generate
from ascent.co.train import CoTrainer
from ascent.config.schema import CoConfig
from ascent.papers import COMPASS, POMO


@dataclass(frozen=True)
class LatentParams(AttentionModelParams):
    """The attention model's parameters, plus the latent space's."""

    latent_dim: int = 16
    """L, the dimension of the latent space (the paper: 16)."""
    latents: int = 8
    """K, latents sampled per training step (the authors' TSP config: 128; fewer here for the CPU)."""
    amplification: float = 100.0
    """z in [-1, 1]^L enters the decoder as amplification * z (the authors' `behavior_amplification`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.latent_dim < 1:
            raise ValueError(f"latent_dim must be >= 1, got {self.latent_dim}")
        if self.latents < 2:
            raise ValueError(f"latents must be >= 2 (only the best of them trains), got {self.latents}")
        if not self.amplification > 0:
            raise ValueError(f"amplification must be > 0, got {self.amplification}")


class LatentModel(nn.Module):
    """The attention model with a latent-conditioned decoder; `set_latents` chooses the policies of the next rollout.

    With latents (K, L) shared by all instances, or (B, K, L) per instance, the S solutions of a rollout split over
    the K latents latent-major (solution s: latent s // (S / K), start s % (S / K)), the layout of a Poppy
    population, so `rollout` forces the starts and `Solutions.agents` = K."""

    def __init__(self, problem: str, p: LatentParams = LatentParams()) -> None:
        super().__init__()
        self.problem, self.p = problem, p
        self.encoder = Encoder(problem, p)
        self.decoder = Decoder(problem, p)
        self.latent_query = nn.Linear(p.latent_dim, p.embed_dim, bias=False)
        self.latent_value = nn.Linear(p.latent_dim, p.embed_dim, bias=False)
        nn.init.zeros_(self.latent_query.weight)
        nn.init.zeros_(self.latent_value.weight)
        self.z: Optional[torch.Tensor] = None

    @property
    def agents(self) -> int:
        """K, the latents of the next rollout."""
        if self.z is None:
            raise ValueError(
                "no latents set: call set_latents(z) with z of shape (K, latent_dim) or (B, K, latent_dim)"
            )
        return self.z.shape[-2]

    def set_latents(self, z: torch.Tensor) -> None:
        """Latents (K, L) for every instance or (B, K, L) per instance, for the following rollouts."""
        if z.dim() not in (2, 3) or z.shape[-1] != self.p.latent_dim or z.shape[-2] < 1:
            raise ValueError(
                f"latents must have shape (K, {self.p.latent_dim}) or (B, K, {self.p.latent_dim}), got {tuple(z.shape)}"
            )
        self.z = z.float()

    def sample_latents(self, k: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """(k, L) latents uniform in [-1, 1]^L (the paper's prior)."""
        return torch.rand(k, self.p.latent_dim, generator=generator) * 2 - 1

    def encode(self, locs: torch.Tensor, demand: Optional[torch.Tensor] = None) -> Encoded:
        return self.decoder.project(self.encoder(locs, demand))

    def log_probs(self, enc: Encoded, state: RouteState) -> torch.Tensor:
        B, S = state.current.shape
        K = self.agents
        if S % K:
            raise ValueError(f"{S} solutions do not split over {K} latents")
        z = self.p.amplification * self.z
        if z.dim() == 3 and z.shape[0] != B:
            raise ValueError(f"latents for {z.shape[0]} instances, the rollout has {B}")
        z = z.expand(B, K, -1).repeat_interleave(S // K, dim=1)  # (B, S, L)
        return self.decoder.log_probs(enc, state, self.latent_query(z), self.latent_value(z))


def from_checkpoint(model: AttentionModel, params: Optional[LatentParams] = None) -> LatentModel:
    """A COMPASS model warm-started from a trained single agent: its encoder and decoder, zero latent maps (the
    authors restore their POMO checkpoint the same way)."""
    base = {f: getattr(model.p, f) for f in AttentionModelParams.__dataclass_fields__}
    extra = {f: getattr(params, f) for f in ("latent_dim", "latents", "amplification")} if params else {}
    lm = LatentModel(model.problem, LatentParams(**base, **extra))
    lm.encoder.load_state_dict(model.encoder.state_dict())
    lm.decoder.load_state_dict(model.decoder.state_dict())
    return lm


@CO_POLICIES.register(
    "compass",
    params=LatentParams,
    paper=(COMPASS, POMO),
    fidelity="faithful",
    departures=(
        "the latent enters as two added terms (query, glimpse) instead of concatenation to query, keys and values: "
        "the same function class (the key term cancels in the softmax), without repeating the nodes per solution",
        "the latent maps start at zero so that a warm start from POMO decodes exactly like it (the authors' new "
        "input columns start random)",
        "Kool's logit keys (a separate projection) as in the rest of ascent; the authors' decoder scores the node "
        "embeddings directly",
    ),
)
def compass(problem: str, params: LatentParams = LatentParams()) -> LatentModel:
    """A latent-conditioned attention model (COMPASS, Chalumeau et al. 2023, arXiv:2311.13569)."""
    return LatentModel(problem, params)


@dataclass(frozen=True)
class CompassLossParams:
    """COMPASS's training objective."""

    skip_ties: bool = True
    """Train no latent where several tie for the best return (the authors' code); False: the first of them."""


@CO_LOSSES.register(
    "compass",
    params=CompassLossParams,
    paper=COMPASS,
    fidelity="faithful",
    departures=("a rollout with a single latent is refused (nothing to select from)",),
)
def compass_loss(sol: Solutions, params: CompassLossParams = CompassLossParams()) -> tuple[torch.Tensor, dict]:
    """COMPASS's objective (Chalumeau et al. 2023, arXiv:2311.13569, section 4.1 and the authors' `calculate_loss`):
    for K latents x M starts of each instance, the POMO advantage `A = R - mean over the latent's own starts`, and
    per (instance, start) only the latent with the strictly best return gets `-A log p`; the loss is the mean over
    the (instance, start) pairs that train."""
    B, S = sol.reward.shape
    K = sol.agents
    if K < 2:
        raise ValueError("compass needs at least 2 latents per rollout (co.policy=compass(latents=K))")
    reward = sol.reward.detach().view(B, K, S // K)  # (B, K, M)
    ll = sol.log_likelihood.view(B, K, S // K)
    adv = reward - reward.mean(dim=-1, keepdim=True)
    best = reward.argmax(dim=1, keepdim=True)  # (B, 1, M), the first on a tie
    top = reward.max(dim=1, keepdim=True).values
    train = ((reward == top).sum(dim=1, keepdim=True) == 1) if params.skip_ties else torch.ones_like(top, dtype=bool)
    term = (adv.gather(1, best) * ll.gather(1, best)).masked_fill(~train, 0.0)
    loss = -term.sum() / train.sum().clamp(min=1)
    return loss, {
        "loss/policy": float(loss.detach()),
        "train/reward": float(reward.mean()),
        "train/best_reward": float(reward.flatten(1).max(dim=1).values.mean()),
        "train/entropy": float(sol.entropy.mean()),
        "train/tie_share": float(1.0 - train.float().mean()),
    }


class CompassTrainer(CoTrainer):
    """`CoTrainer` whose step samples K fresh latents and rolls each out from every start (K x n per instance)."""

    def __init__(self, cfg: CoConfig, seed: int, test=None) -> None:
        super().__init__(cfg, seed, test)
        if not isinstance(self.policy, LatentModel):
            raise ValueError(f"CompassTrainer needs co.policy=compass(...), got {cfg.policy!r}")

    def step(self) -> dict[str, float]:
        cfg = self.cfg
        inst = generate(cfg.problem, cfg.n, cfg.batch_size, self.gen)
        starts = cfg.starts or len(make_env(inst).start_nodes())
        K = self.policy.p.latents
        self.policy.set_latents(self.policy.sample_latents(K, self.sample_gen))
        sol = rollout(self.policy, inst, K * starts, starts=True, greedy=False, generator=self.sample_gen)
        loss, metrics = self.loss(sol)
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm > 0:
            metrics["loss/grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
            )
        self.optim.step()
        self.steps += 1
        return metrics


def cvt_centroids(k: int, dim: int, seed: int = 0, samples: int = 10_000, iters: int = 30) -> torch.Tensor:
    """(k, dim) centroids of a centroidal Voronoi tessellation of [-1, 1]^dim: Lloyd's k-means on uniform samples
    (the authors' `compute_cvt_centroids`, which calls scikit-learn's KMeans)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(samples, dim, generator=g) * 2 - 1
    c = x[torch.randperm(samples, generator=g)[:k]].clone()
    for _ in range(iters):
        assign = torch.cdist(x, c).argmin(dim=1)
        for j in range(k):
            members = x[assign == j]
            if len(members):
                c[j] = members.mean(dim=0)
    return c


@dataclass(frozen=True)
class SearchResult:
    """The best solution found per instance, and how the best cost fell with the budget spent."""

    cost: torch.Tensor
    """(B,) the best tour length found per instance."""
    used: int
    """Rollouts spent per instance."""
    curve: list[tuple[int, float]]
    """(rollouts spent per instance, mean best cost) after each generation."""


def _generations(budget: int, per_generation: int, what: str) -> int:
    if budget < per_generation:
        raise ValueError(f"budget {budget} is below one generation of {what} ({per_generation} rollouts per instance)")
    return budget // per_generation


@torch.no_grad()
def latent_search(
    model: LatentModel,
    inst: Instances,
    budget: int,
    popsize: int = 16,
    components: int = 3,
    sigma: float = 1.0,
    strategy: Literal["cmaes", "uniform"] = "cmaes",
    greedy: bool = True,
    seed: int = 0,
    batch_size: int = 64,
) -> SearchResult:
    """COMPASS's test-time search: per instance, `budget` rollouts spent as generations of `popsize` latents, each
    rolled out from every start node (`greedy`: argmax decoding, the authors' TSP and CVRP setting); CMA-ES (the
    `cma` package, Hansen & Ostermeier 2001) over the latent space with `components` states started at CVT
    centroids and used in turn, initial step size `sigma` (in units of the [-1, 1] box; the authors' 100 in
    amplified units), the `popsize // 2` best latents recombined. `strategy="uniform"`: fresh uniform latents
    every generation (no adaptation)."""
    import cma

    if popsize < 2 or components < 1 or not sigma > 0:
        raise ValueError(f"popsize must be >= 2, components >= 1 and sigma > 0, got {popsize}, {components}, {sigma}")
    if strategy not in ("cmaes", "uniform"):
        raise ValueError(f"strategy must be 'cmaes' or 'uniform', got {strategy!r}")
    n_starts = len(make_env(inst[:1]).start_nodes())
    gens = _generations(budget, popsize * n_starts, f"{popsize} latents x {n_starts} starts")
    L = model.p.latent_dim
    B = inst.size
    was_training = model.training
    model.eval()
    rng = np.random.default_rng(seed)
    gen_z = torch.Generator().manual_seed(seed)
    pools: list[list] = []
    if strategy == "cmaes":
        centroids = cvt_centroids(components, L, seed=seed).double().numpy()
        for b in range(B):
            opts = {
                "popsize": popsize,
                "CMA_mu": popsize // 2,
                "seed": int(rng.integers(1, 2**31 - 1)),
                "verbose": -9,
                "randn": lambda *shape: rng.standard_normal(shape),
            }
            pools.append([cma.CMAEvolutionStrategy(centroids[c], sigma, opts) for c in range(components)])
    best = torch.full((B,), math.inf, dtype=torch.float64)
    curve = []
    for g in range(gens):
        if strategy == "cmaes":
            asked = [pool[g % components].ask() for pool in pools]
            z = torch.tensor(np.stack([np.stack(a) for a in asked]), dtype=torch.float32)  # (B, P, L)
        else:
            z = torch.rand(B, popsize, L, generator=gen_z) * 2 - 1
        cost = torch.empty(B, popsize, dtype=torch.float64)
        for lo in range(0, B, batch_size):
            part = inst[lo : lo + batch_size]
            model.set_latents(z[lo : lo + batch_size])
            sol = rollout(model, part, popsize * n_starts, starts=True, greedy=greedy, generator=gen_z)
            cost[lo : lo + batch_size] = (-sol.reward).view(part.size, popsize, n_starts).min(dim=-1).values.double()
        best = torch.minimum(best, cost.min(dim=1).values)
        if strategy == "cmaes":
            for b, pool in enumerate(pools):
                pool[g % components].tell(asked[b], cost[b].tolist())
        curve.append(((g + 1) * popsize * n_starts, float(best.mean())))
    model.train(was_training)
    return SearchResult(best, gens * popsize * n_starts, curve)


@torch.no_grad()
def sample_search(
    model: AttentionModel, inst: Instances, budget: int, seed: int = 0, batch_size: int = 64, per_generation: int = 16
) -> SearchResult:
    """The control at an equal budget: `budget` rollouts per instance sampled from a single-agent policy (POMO's
    sampling from every start node, temperature 1), `per_generation` x n of them at a time, the best kept."""
    n_starts = len(make_env(inst[:1]).start_nodes())
    gens = _generations(budget, per_generation * n_starts, f"{per_generation} samples x {n_starts} starts")
    if getattr(model, "agents", 1) != 1:
        raise ValueError("sample_search samples a single-agent policy (attention_model)")
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    B = inst.size
    best = torch.full((B,), math.inf, dtype=torch.float64)
    curve = []
    for g in range(gens):
        for lo in range(0, B, batch_size):
            part = inst[lo : lo + batch_size]
            rep = part[torch.arange(part.size).repeat(per_generation)]  # (P * b) instances, copy-major
            sol = rollout(model, rep, n_starts, starts=True, greedy=False, generator=gen)
            cost = (-sol.reward).min(dim=1).values.view(per_generation, part.size).min(dim=0).values.double()
            best[lo : lo + batch_size] = torch.minimum(best[lo : lo + batch_size], cost)
        curve.append(((g + 1) * per_generation * n_starts, float(best.mean())))
    model.train(was_training)
    return SearchResult(best, gens * per_generation * n_starts, curve)


__all__ = [
    "CompassTrainer",
    "LatentModel",
    "LatentParams",
    "SearchResult",
    "compass",
    "compass_loss",
    "cvt_centroids",
    "from_checkpoint",
    "latent_search",
    "sample_search",
]
