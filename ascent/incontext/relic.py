"""ReLIC: in-context RL trained by PPO with partial updates and sink key/values (Elawady, Chhablani, Ramrakhya,
Yadav, Batra, Kira & Szot 2024, "ReLIC: A Recipe for 64k Steps of In-Context Reinforcement Learning for Embodied
AI", arXiv:2410.02751).

The policy is a causal transformer over the agent's whole multi-episode experience in one task (a "trial": E
episodes on the same hidden goal, the context never cleared between episodes), trained from scratch by on-policy
RL. Two pieces of the recipe are built here:

- **Partial updates.** A trial of E x H steps is long; waiting for its end before every PPO update gives few updates
  per sample. ReLIC updates every `chunk` steps inside the trial: the new chunk's steps are scored by the policy
  run over the WHOLE prefix of the trial (steps collected by older policies included, as context only), the PPO
  loss is taken on the chunk's steps alone, and the trial then continues with the updated policy.
- **Sink key/values.** Every attention layer gets one learnable key and value per head, prepended to the keys and
  values of every query (no query of its own, never masked), so a head can put its attention mass on "nothing"
  instead of on arbitrary real steps (the paper's Sink-KV; cf. attention sinks, Xiao et al. 2023,
  arXiv:2309.17453).

The token of step t is, as in ascent's AD model, E_row[o_t] + E_col[o_t] + E_act[a_{t-1}] + W_r r_{t-1} +
E_step[t mod H]; the heads read the action logits and the value. PPO (Schulman et al. 2017, arXiv:1707.06347) with
GAE inside episodes (episodes end at H: no bootstrap across an episode boundary; a chunk that ends mid-episode
bootstraps from the value at the next step).

`run_relic` measures on held-out Dark Room goals, with frozen weights, the return per in-context episode of ReLIC
(partial updates + sinks) and of the control: the same transformer and PPO updated once per trial (no partial
updates) and without sinks, at the same number of environment steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ascent.incontext.methods import META_METHODS, PAIRS
from ascent.incontext.tasks import Family, make_family
from ascent.registry import Paper

RELIC = Paper(
    "ReLIC",
    "Elawady et al.",
    2024,
    "ReLIC: A Recipe for 64k Steps of In-Context Reinforcement Learning for Embodied AI",
    "arXiv:2410.02751",
)


class Block(torch.nn.Module):
    """Pre-norm causal self-attention (optionally with one sink key/value per head) and an MLP."""

    def __init__(self, d: int, heads: int, sink: bool) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
        self.sink_k = torch.nn.Parameter(torch.zeros(heads, 1, self.hd)) if sink else None
        self.sink_v = torch.nn.Parameter(torch.zeros(heads, 1, self.hd)) if sink else None

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)  # each (B, h, T, hd)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        if self.sink_k is not None:  # (B, h, 1 + T, hd): the sink first, visible to every query
            k = torch.cat([self.sink_k.expand(b, -1, -1, -1), k], 2)
            v = torch.cat([self.sink_v.expand(b, -1, -1, -1), v], 2)
            mask = torch.cat([torch.ones(t, 1, dtype=torch.bool, device=x.device), mask], 1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, T, hd)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.n1(x))
        return x + self.mlp(self.n2(x))


class TrialTransformer(torch.nn.Module):
    """(logits (B, T, A), values (B, T)) for trials given as obs, prev_actions, prev_rewards, steps (B, T)."""

    def __init__(self, grid: int, actions: int, horizon: int, d: int, layers: int, heads: int, sink: bool) -> None:
        super().__init__()
        self.grid, self.actions = grid, actions
        self.obs_emb = torch.nn.Embedding(2 * grid, d)
        self.act_emb = torch.nn.Embedding(actions + 1, d)
        self.rew_emb = torch.nn.Linear(1, d)
        self.step_emb = torch.nn.Embedding(horizon, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads, sink) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)
        self.pi, self.v = torch.nn.Linear(d, actions), torch.nn.Linear(d, 1)

    def forward(self, obs, prev_a, prev_r, steps) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.obs_emb(obs // self.grid) + self.obs_emb(self.grid + obs % self.grid)
        x = x + self.act_emb(prev_a) + self.rew_emb(prev_r.unsqueeze(-1)) + self.step_emb(steps)  # (B, T, d)
        for blk in self.blocks:
            x = blk(x)
        h = self.norm(x)
        return self.pi(h), self.v(h).squeeze(-1)


@dataclass
class Trial:
    """One trial of N tasks being collected: inputs (N, L) filled up to `t`, and what PPO needs per step."""

    obs: torch.Tensor
    prev_a: torch.Tensor
    prev_r: torch.Tensor
    steps: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    logp: torch.Tensor
    values: torch.Tensor
    t: int = 0


def new_trial(n: int, length: int, horizon: int, actions: int) -> Trial:
    z = lambda dt=torch.float32: torch.zeros((n, length), dtype=dt)  # noqa: E731
    steps = torch.as_tensor(np.arange(length) % horizon).expand(n, length).clone()
    return Trial(z(torch.long), torch.full((n, length), actions), z(), steps, z(torch.long), z(), z(), z())


def gae(
    rewards: np.ndarray, values: np.ndarray, last_value: np.ndarray, ends: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    """GAE advantages (N, C) for a chunk; `ends` (C,) marks steps that end an episode (no bootstrap after them);
    `last_value` (N,) bootstraps the chunk's last step when it does not end an episode.

    >>> gae(np.array([[0.0, 1.0]]), np.array([[0.5, 0.5]]), np.array([2.0]), np.array([False, True]), 0.5, 1.0)
    array([[0. , 0.5]])
    """
    adv, nxt_adv, nxt_v = np.zeros_like(rewards), np.zeros(len(rewards)), last_value
    for i in reversed(range(rewards.shape[1])):
        keep = 0.0 if ends[i] else 1.0
        delta = rewards[:, i] + gamma * keep * nxt_v - values[:, i]
        nxt_adv = delta + gamma * lam * keep * nxt_adv
        adv[:, i], nxt_v = nxt_adv, values[:, i]
    return adv


@dataclass(frozen=True)
class ReLICParams:
    family: str = "darkroom(size=7,horizon=12)"
    """Dark Room family (7 x 7: 29 training and 20 held-out goals; a smaller room than AD's 9 x 9 keeps the CPU
    budget; `darkroom` for the full one)."""
    trial_episodes: int = 6
    """E, episodes per trial (the in-context horizon)."""
    chunk: int = 20
    """ReLIC: steps between two partial updates (the control updates once per trial)."""
    tasks: int = 16
    """Tasks (goals) run in parallel per trial."""
    trials: int = 25
    """Training trials (environment steps = trials x tasks x E x H for both arms)."""
    epochs: int = 2
    """PPO epochs per update (full batch)."""
    lr: float = 1e-3
    """Adam step."""
    gamma: float = 0.95
    """Discount inside an episode."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip: float = 0.2
    """PPO ratio clip."""
    entropy: float = 0.01
    """Entropy bonus weight."""
    value_coef: float = 0.5
    """Value-loss weight."""
    d: int = 32
    """Transformer width."""
    layers: int = 2
    """Transformer layers."""
    heads: int = 2
    """Attention heads."""
    eval_tasks: int = 20
    """Held-out goals (the family's test split, repeated if it has fewer)."""
    arms: list[str] = field(default_factory=lambda: ["relic", "control"])
    """Arms run: relic (partial updates + sinks), control (one update per trial, no sinks), no_sink, no_partial."""

    def __post_init__(self) -> None:
        if self.trial_episodes < 2 or self.chunk < 2 or self.tasks < 1 or self.trials < 1 or self.epochs < 1:
            raise ValueError("relic needs trial_episodes >= 2, chunk >= 2, tasks, trials and epochs >= 1")
        if self.d % self.heads or not 0 < self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ValueError("relic needs d divisible by heads, gamma in (0, 1], gae_lambda in [0, 1]")
        if set(self.arms) - set(ARMS):
            raise ValueError(f"relic arms must be among {sorted(ARMS)}, got {self.arms}")


ARMS = {"relic": (True, True), "control": (False, False), "no_sink": (True, False), "no_partial": (False, True)}
"""arm -> (partial updates, sink key/values)."""


@torch.no_grad()
def act_step(model: TrialTransformer, tr: Trial, batch, gen: torch.Generator, greedy: bool = False) -> np.ndarray:
    """Act at step tr.t from the whole prefix; records action, log-prob, value and reward; returns rewards."""
    t = tr.t
    logits, values = model(tr.obs[:, : t + 1], tr.prev_a[:, : t + 1], tr.prev_r[:, : t + 1], tr.steps[:, : t + 1])
    dist = torch.distributions.Categorical(logits=logits[:, -1])
    a = logits[:, -1].argmax(-1) if greedy else torch.multinomial(dist.probs, 1, generator=gen)[:, 0]
    o, r = batch.step(a.numpy())
    tr.actions[:, t], tr.logp[:, t], tr.values[:, t], tr.rewards[:, t] = (
        a,
        dist.log_prob(a),
        values[:, -1],
        torch.as_tensor(r),
    )
    if t + 1 < tr.obs.shape[1]:
        tr.obs[:, t + 1], tr.prev_a[:, t + 1], tr.prev_r[:, t + 1] = torch.as_tensor(o), a, torch.as_tensor(r)
    tr.t += 1
    return r


def ppo_update(model, opt, tr: Trial, lo: int, hi: int, horizon: int, p: ReLICParams) -> None:
    """PPO on steps [lo, hi) of the trial, the model run over the whole prefix [0, hi) (a partial update)."""
    with torch.no_grad():
        if hi < tr.obs.shape[1] and hi % horizon:  # mid-episode: bootstrap from V at step hi
            _, v = model(tr.obs[:, : hi + 1], tr.prev_a[:, : hi + 1], tr.prev_r[:, : hi + 1], tr.steps[:, : hi + 1])
            last = v[:, -1].numpy()
        else:
            last = np.zeros(tr.obs.shape[0])
    ends = (np.arange(lo, hi) + 1) % horizon == 0
    adv = gae(tr.rewards[:, lo:hi].numpy(), tr.values[:, lo:hi].numpy(), last, ends, p.gamma, p.gae_lambda)
    adv_t = torch.as_tensor(adv, dtype=torch.float32)
    ret = adv_t + tr.values[:, lo:hi]
    adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8)
    for _ in range(p.epochs):
        logits, values = model(tr.obs[:, :hi], tr.prev_a[:, :hi], tr.prev_r[:, :hi], tr.steps[:, :hi])
        dist = torch.distributions.Categorical(logits=logits[:, lo:hi])
        ratio = torch.exp(dist.log_prob(tr.actions[:, lo:hi]) - tr.logp[:, lo:hi])
        pg = -torch.min(ratio * adv_t, ratio.clamp(1 - p.clip, 1 + p.clip) * adv_t).mean()
        loss = pg + p.value_coef * F.mse_loss(values[:, lo:hi], ret) - p.entropy * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()


def train_relic(p: ReLICParams, family: Family, seed: int, partial: bool, sink: bool) -> TrialTransformer:
    """PPO over trials on the family's training goals; partial updates every `chunk` steps or one per trial."""
    torch.manual_seed(seed)
    grid = int(math.isqrt(family.num_obs))
    model = TrialTransformer(grid, family.num_actions, family.horizon, p.d, p.layers, p.heads, sink)
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    gen = torch.Generator().manual_seed(seed)
    h, length = family.horizon, p.trial_episodes * family.horizon
    chunk = p.chunk if partial else length
    for k in range(p.trials):
        batch = family.batch(family.tasks("train", p.tasks, seed * 10_000 + k), seed * 10_000 + k)
        tr = new_trial(p.tasks, length, h, family.num_actions)
        lo = 0
        while tr.t < length:
            if tr.t % h == 0:
                tr.obs[:, tr.t] = torch.as_tensor(batch.reset())
            act_step(model, tr, batch, gen)
            if tr.t - lo == chunk or tr.t == length:
                ppo_update(model, opt, tr, lo, tr.t, h, p)
                lo = tr.t
    return model


def evaluate_trial(model: TrialTransformer, family: Family, tasks: np.ndarray, episodes: int, seed: int) -> np.ndarray:
    """(N, E) return per in-context episode on `tasks`, actions sampled, weights frozen."""
    h = family.horizon
    batch = family.batch(tasks, seed)
    tr = new_trial(len(tasks), episodes * h, h, family.num_actions)
    gen = torch.Generator().manual_seed(seed)
    out = np.zeros((len(tasks), episodes))
    with torch.inference_mode():
        while tr.t < episodes * h:
            if tr.t % h == 0:
                tr.obs[:, tr.t] = torch.as_tensor(batch.reset())
            out[:, tr.t // h] += act_step(model, tr, batch, gen)
    return out


@META_METHODS.register(
    "relic",
    params=ReLICParams,
    paper=RELIC,
    fidelity="reduced",
    departures=(
        "Dark Room (7 x 7 by default, 72-step trials) instead of 64k-step Habitat ExtObjNav with images",
        "a 2-layer width-32 transformer trained for minutes on a CPU, not a large model for billions of steps",
        "full-batch PPO epochs per update; the paper's DD-PPO engineering and its later-trial context length omitted",
    ),
)
def run_relic(seed: int, params: ReLICParams = ReLICParams()) -> dict:
    """Each arm trained from the same seed for the same environment steps, then evaluated on held-out goals:
    return of the first two and last two in-context episodes and over all of them."""
    p = params
    family = make_family(p.family)
    test = family.tasks("test", p.eval_tasks, 0)
    out: dict = {}
    for arm in p.arms:
        partial, sink = ARMS[arm]
        model = train_relic(p, family, seed, partial, sink)
        ret = evaluate_trial(model, family, test, p.trial_episodes, seed + 1000)
        out[f"first2_{arm}"] = float(ret[:, :2].mean())
        out[f"last2_{arm}"] = float(ret[:, -2:].mean())
        out[f"gain_{arm}"] = out[f"last2_{arm}"] - out[f"first2_{arm}"]
        out[f"mean_{arm}"] = float(ret.mean())
    return out


PAIRS["relic"] = [("mean_relic", "mean_control"), ("gain_relic", "gain_control")]
