"""Learned step-level credit for multi-turn agents (a step = a model turn): `prm` (a trained process reward
model, Math-Shepherd), `q_evolve` (an IQL critic, Q-Evolve) and `spa` (a learned progress estimator, SPA); the
papers are in docs/references.md. Same ONE signature as every estimator, `fn(inp, cfg[, params]) -> (N, T)`;
each reads the turn extras of agent batches (`turn_index`, see ascent.algorithms.turn_advantages) plus the
per-turn scores its `PieceState` adds (`prm_scores`, `turn_q` / `turn_v`, `turn_contrib`, (N, M), NaN where a
row has no such turn).

Where a step's score is read: a model head on the trunk's hidden state at a position of the trajectory's ids.
For turn t with sampled tokens at positions first_t .. last_t (`turn_spans`):

    after the step (its action included)   last_t         PRM score, Q(s_t, a_t), SPA contribution c_t
    before the step (the state only)       first_t - 1    V(s_t)

so one forward of a trajectory scores all its steps (`head_at`). The PRM is trained by `ascent train-prm`
(ascent/app/train_prm.py: step labels from Monte Carlo completions, `step_bce`); the critics of `q_evolve`
and `spa` train during RL in their states' `begin_update`, on a buffer of recent trajectories.

>>> first, last = turn_spans(torch.tensor([[-1, 0, 0, -1, 1]]), turns=2)
>>> first.tolist(), last.tolist()
([[1, 4]], [[2, 4]])
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, _extra, _grpo_seq, group_moments
from ascent.algorithms.state import PieceState
from ascent.algorithms.turn_advantages import ExploreGroupParams, _to_tokens, _turn_extra, _turn_index
from ascent.algorithms.types import AdvantageInput

PRM_HEAD_FILE = "reward_head.safetensors"
"""The head of a reward-model folder (ascent.rewards.reward_model.HEAD_FILE; a PRM folder has the same layout)."""


# ---------------------------------------------------------------------------------------------------------
# shared: where each turn's tokens are, a head read at chosen positions, trajectory records and their buffer
# ---------------------------------------------------------------------------------------------------------
def turn_spans(turn_index: torch.Tensor, turns: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, last), each (N, M) long: the first and last position of each turn's sampled tokens in
    `turn_index` (N, T) (the turn of each token, -1 elsewhere); -1 where a row has no such turn."""
    n, width = turn_index.shape
    pos = torch.arange(width).expand(n, width)  # (N, T)
    col = torch.where(turn_index >= 0, turn_index, torch.full_like(turn_index, turns))  # (N, T), extra column
    last = torch.full((n, turns + 1), -1, dtype=torch.long).scatter_reduce(1, col, pos, "amax")
    first = torch.full((n, turns + 1), width, dtype=torch.long).scatter_reduce(1, col, pos, "amin")
    first = torch.where(first == width, torch.full_like(first, -1), first)
    return first[:, :turns], last[:, :turns]


def head_at(module: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(N, M) float32: `module.head` applied to `module.trunk`'s last hidden state at `positions` (N, M) of
    each row; 0 where a position is -1. `module` is any model with a transformer `trunk` and a scalar `head`
    (a reward model, a value model)."""
    hidden = module.trunk(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state  # (N, T, H)
    at = positions.clamp(min=0)[..., None].expand(-1, -1, hidden.shape[-1])  # (N, M, H)
    out = module.head(hidden.gather(1, at).to(module.head.weight.dtype)).squeeze(-1).float()  # (N, M)
    return torch.where(positions >= 0, out, torch.zeros_like(out))


@torch.no_grad()
def scores_at(
    module: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, micro_batch: int
) -> torch.Tensor:
    """`head_at` without grad in micro-batches of rows, NaN where a position is -1, on the CPU."""
    was_training = module.training
    module.eval()
    device = module.head.weight.device
    out = []
    for i in range(0, ids.shape[0], micro_batch):
        sub = slice(i, i + micro_batch)
        width = max(1, int(mask[sub].sum(-1).max()))
        pos = positions[sub]
        out.append(head_at(module, ids[sub, :width].to(device), mask[sub, :width].to(device), pos.to(device)).cpu())
    module.train(was_training)
    scores = torch.cat(out) if out else torch.zeros(positions.shape)
    return torch.where(positions >= 0, scores, torch.full_like(scores, float("nan")))


@dataclass(frozen=True)
class TurnRecord:
    """One trajectory as a critic trains on it: its ids, each turn's first and last sampled position, its
    outcome, and its weight in the critic's loss."""

    ids: tuple[int, ...]
    first: tuple[int, ...]
    last: tuple[int, ...]
    outcome: float
    weight: float = 1.0


def records_of(batch: Any, rewards: torch.Tensor, valid: torch.Tensor, weight: float = 1.0) -> list[TurnRecord]:
    """The valid trajectories of an agent batch (with at least one turn) as records."""
    idx = batch.extras["turn_index"]
    first, last = turn_spans(idx, int(idx.max()) + 1 if idx.numel() and int(idx.max()) >= 0 else 1)
    out = []
    for i in range(len(rewards)):
        k = int((last[i] >= 0).sum())
        if bool(valid[i]) and k:
            n = int(batch.attention_mask[i].sum())
            ids = tuple(int(x) for x in batch.input_ids[i, :n])
            out.append(
                TurnRecord(ids, tuple(first[i, :k].tolist()), tuple(last[i, :k].tolist()), float(rewards[i]), weight)
            )
    return out


def pack(records: list[TurnRecord], pad: int = 0) -> dict[str, torch.Tensor]:
    """Right-padded tensors of records: ids, mask (B, T); first, last (B, M), -1 past a row's turns; outcome,
    weight (B,)."""
    width, turns = max(len(r.ids) for r in records), max(len(r.last) for r in records)
    ids = torch.full((len(records), width), pad, dtype=torch.long)
    mask = torch.zeros((len(records), width), dtype=torch.long)
    first = torch.full((len(records), turns), -1, dtype=torch.long)
    last = torch.full((len(records), turns), -1, dtype=torch.long)
    for i, r in enumerate(records):
        ids[i, : len(r.ids)], mask[i, : len(r.ids)] = torch.tensor(r.ids), 1
        first[i, : len(r.first)], last[i, : len(r.last)] = torch.tensor(r.first), torch.tensor(r.last)
    outcome = torch.tensor([r.outcome for r in records], dtype=torch.float32)
    weight = torch.tensor([r.weight for r in records], dtype=torch.float32)
    return {"ids": ids, "mask": mask, "first": first, "last": last, "outcome": outcome, "weight": weight}


def read_records(path: str | Path, weight: float) -> list[TurnRecord]:
    """Trajectories of a step-data JSONL file (`ascent train-prm`'s steps.*.jsonl: `ids`, `starts`, `ends`
    (exclusive), `outcome` per line), with `weight`; ValueError naming the file and line when malformed."""
    import json

    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ids, starts, ends = list(row["ids"]), list(row["starts"]), list(row["ends"])
            outcome = float(row["outcome"])
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{n}: a step record needs ids, starts, ends and outcome ({err})") from None
        if not starts or len(starts) != len(ends) or any(not 1 <= s < e <= len(ids) for s, e in zip(starts, ends)):
            raise ValueError(f"{path}:{n}: starts/ends must be matching spans inside ids (1 <= start < end <= len)")
        out.append(TurnRecord(tuple(ids), tuple(starts), tuple(e - 1 for e in ends), outcome, weight))
    if not out:
        raise ValueError(f"{path} holds no step records")
    return out


class _BufferState(PieceState):
    """A piece state that keeps the last `params.buffer` trajectories (plus fixed extra records) and trains
    its models on batches drawn from them with a seeded generator; models and buffer travel in resumes."""

    models: dict[str, torch.nn.Module]

    def __init__(self, params: Any, services: Any) -> None:
        super().__init__(params, services)
        self.buffer: deque[TurnRecord] = deque(maxlen=params.buffer)
        self.fixed: list[TurnRecord] = []
        self.generator = torch.Generator().manual_seed(int(services.seed) + 7919)
        self.optimizers: dict[str, tuple[Any, Any]] = {}

    def _setup(self, names: tuple[str, ...]) -> None:
        self.models = {k: self.services.value_model() for k in names}
        self.optimizers = {k: self.services.optimizer(m, self.params.lr) for k, m in self.models.items()}

    def draw(self) -> Optional[dict[str, torch.Tensor]]:
        """A packed batch of `params.batch_size` records drawn uniformly from buffer + fixed (None if empty)."""
        pool = list(self.buffer) + self.fixed
        if not pool:
            return None
        picks = torch.randint(len(pool), (min(self.params.batch_size, len(pool)),), generator=self.generator)
        device = next(iter(self.models.values())).head.weight.device
        return {k: v.to(device) for k, v in pack([pool[int(i)] for i in picks]).items()}

    def train_steps(self, steps: int) -> dict[str, float]:
        """`steps` optimizer steps of `loss` on drawn batches; the last step's metrics."""
        metrics: dict[str, float] = {}
        for _ in range(steps):
            data = self.draw()
            if data is None:
                break
            for m in self.models.values():
                m.train()
            loss, metrics = self.loss(data)
            if not torch.isfinite(loss):
                for opt, _ in self.optimizers.values():
                    opt.zero_grad(set_to_none=True)
                return {**metrics, f"{self.prefix}/skipped": 1.0}
            loss.backward()
            for k, m in self.models.items():
                self.services.clip_and_step(m, *self.optimizers[k])
        return metrics

    def loss(self, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

    prefix = "critic"

    def begin_update(
        self, batch: Any, rewards: Optional[torch.Tensor], valid: torch.Tensor, mask: torch.Tensor
    ) -> None:
        if rewards is None:
            raise ValueError(f"{type(self).__name__} trains on the outcomes: pass rewards= to Learner.update")
        self.buffer.extend(records_of(batch, rewards, valid))
        self.last_metrics = self.train_steps(self.params.train_steps)

    def after_optimizer_step(self, batch: Any, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        out, self.last_metrics = getattr(self, "last_metrics", {}), {}
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "models": {k: m.state_dict() for k, m in self.models.items()},
            "optimizers": {k: (o.state_dict(), s.state_dict()) for k, (o, s) in self.optimizers.items()},
            "buffer": [r.__dict__ for r in self.buffer],
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "models" not in state:
            raise ValueError(
                f"the checkpoint has no {type(self).__name__}; resume with the advantage it was trained with"
            )
        for k, m in self.models.items():
            m.load_state_dict(state["models"][k])
            self.optimizers[k][0].load_state_dict(state["optimizers"][k][0])
            self.optimizers[k][1].load_state_dict(state["optimizers"][k][1])
        self.buffer.clear()
        self.buffer.extend(TurnRecord(**r) for r in state["buffer"])
        self.generator.set_state(state["generator"])


def _group_scale(inp: AdvantageInput, cfg) -> torch.Tensor:
    """(N, 1) float64 divisor: the group's outcome std + std_eps, 1 for groups whose outcomes are all equal."""
    _, _, std = group_moments(inp.rewards.double(), inp.group_index, inp.valid)
    return torch.where(std > 0, std + cfg.std_eps, torch.ones_like(std))[:, None]


def _live(inp: AdvantageInput, scores: torch.Tensor) -> torch.Tensor:
    """(N, M) bool: turns with a finite score in valid rows."""
    return torch.isfinite(scores) & inp.valid[:, None]


# ---------------------------------------------------------------------------------------------------------
# prm (Math-Shepherd process reward model as step credit)
# ---------------------------------------------------------------------------------------------------------
def step_bce(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """A process reward model's loss over (S,) step logits and (S,) labels in [0, 1] (hard 0/1 or soft MC
    shares): mean binary cross-entropy, -[y log σ(z) + (1 - y) log(1 - σ(z))] (Math-Shepherd, Wang et al.
    2024, arXiv:2312.08935); metrics prm/loss, prm/accuracy ((σ(z) > 0.5) == (y > 0.5)), prm/score_mean.

    >>> loss, m = step_bce(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 1.0]))
    >>> round(float(loss), 4), m["prm/accuracy"]
    (0.41, 0.5)
    """
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    prob = torch.sigmoid(logits.detach())
    metrics = {
        "prm/loss": float(loss.detach()),
        "prm/accuracy": float(((prob > 0.5) == (labels > 0.5)).float().mean()),
        "prm/score_mean": float(prob.mean()),
    }
    return loss, metrics


def auroc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """Area under the ROC curve of `scores` for the `positive` (bool) class: the chance a random positive
    scores above a random negative, ties counting half (Mann-Whitney U / (P N)); NaN without both classes.

    >>> auroc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([False, False, True, True]))
    0.75
    """
    p, n = int(positive.sum()), int((~positive).sum())
    if p == 0 or n == 0:
        return float("nan")
    s = scores.double()
    greater = (s[positive][:, None] > s[~positive][None, :]).double().sum()
    ties = (s[positive][:, None] == s[~positive][None, :]).double().sum()
    return float((greater + 0.5 * ties) / (p * n))


def process_advantages(inp: AdvantageInput, cfg, rewards: torch.Tensor) -> torch.Tensor:
    """(N, M) float64 step advantages from per-step rewards (N, M) (NaN: no step): each reward normalised
    over all steps of its group's valid rows, r~ = (r - mean_g) / (std_g + std_eps), and a step's advantage
    is the sum of the normalised rewards from it to the trajectory's end, A_t = sum_{j >= t} r~_j
    (process supervision of Shao et al. 2024, arXiv:2402.03300, Sec. 4.1.3); 0 where there is no step."""
    live = _live(inp, rewards)  # (N, M)
    rows, cols = live.nonzero(as_tuple=True)
    r = rewards.double()
    norm = torch.zeros_like(r)
    if rows.numel():
        vals = r[rows, cols]
        _, mean, std = group_moments(vals, inp.group_index[rows], torch.ones_like(vals, dtype=torch.bool))
        norm[rows, cols] = (vals - mean) / (std + cfg.std_eps)
    return torch.flip(torch.cumsum(torch.flip(norm, [1]), 1), [1]) * live


@dataclass(frozen=True)
class PrmParams:
    """A process reward model as step credit (Math-Shepherd, Wang et al. 2024, arXiv:2312.08935)."""

    path: str = ""
    """The PRM folder written by `ascent train-prm` (Math-Shepherd, Wang et al. 2024, arXiv:2312.08935); it
    must share the policy's tokenizer."""
    into: str = "process"
    """How the per-step PRM scores become advantages: `process` (group-normalised step rewards summed to the
    end, Shao et al. 2024), or the name of a turn estimator that reads extras['turn_rewards'] (`turn_feedback`,
    `explore_group`), which then gets the PRM scores as its turn rewards (with its default parameters, except
    explore_group's step_coef, which is `into_coef`)."""
    into_coef: float = 1.0
    """With into=explore_group: its step_coef, the weight of the PRM score in each turn's return
    R_t = r + into_coef * s_t (explore_group's own default, 0, would ignore the scores); > 0."""
    process_coef: float = 1.0
    """Weight of the step advantages (with into=process); >= 0."""
    outcome_coef: float = 1.0
    """Weight of the GRPO outcome advantage added to every step (with into=process; 0: PRM credit alone); >= 0."""
    micro_batch_size: int = 32
    """Trajectories per PRM forward; >= 1."""

    def __post_init__(self) -> None:
        if not self.path:
            raise ValueError("path is required: the folder of a PRM trained with `ascent train-prm`")
        if self.process_coef < 0 or self.outcome_coef < 0 or self.process_coef + self.outcome_coef == 0:
            raise ValueError(
                "process_coef and outcome_coef must be >= 0 and not both 0, "
                f"got {self.process_coef}, {self.outcome_coef}"
            )
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {self.micro_batch_size}")
        if not self.into_coef > 0:
            raise ValueError(f"into_coef must be > 0, got {self.into_coef}")
        if self.into != "process":
            entry = ADVANTAGES.get(self.into)  # unknown names: the registry's error lists the valid ones
            reads = getattr(entry, "requires", frozenset()) | getattr(entry, "reads", frozenset())
            if "turn_rewards" not in reads:
                raise ValueError(
                    f"into={self.into!r} does not read extras['turn_rewards']; "
                    "use process, turn_feedback or explore_group"
                )


class _Scorer(torch.nn.Module):
    """A frozen PRM: the loaded causal LM's trunk and the saved head."""

    def __init__(self, lm: torch.nn.Module, head: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.trunk = lm.base_model
        self.head = torch.nn.Linear(head["weight"].shape[1], 1)
        self.head.load_state_dict(head)
        self.head.to(next(lm.parameters()).device).requires_grad_(False)


class PrmState(PieceState):
    """The frozen process reward model of `prm`: loaded once (trunk through `Services.load_frozen`, which
    checks the tokenizer; head from reward_head.safetensors), scoring each batch's turns without grad."""

    def __init__(self, params: PrmParams, services: Any) -> None:
        super().__init__(params, services)
        from safetensors.torch import load_file

        head = Path(params.path) / PRM_HEAD_FILE
        if not head.exists():
            raise ValueError(
                f"prm: {params.path!r} is not a reward-model folder (no {PRM_HEAD_FILE}); run `ascent train-prm`"
            )
        self.model = _Scorer(services.load_frozen(params.path), load_file(str(head)))

    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        idx = batch.extras.get("turn_index")
        if idx is None:
            raise ValueError("prm scores model turns: it needs an agent task (batches with extras['turn_index'])")
        _, last = turn_spans(idx, max(1, int(idx.max()) + 1))
        logits = scores_at(self.model, batch.input_ids, batch.attention_mask, last, self.params.micro_batch_size)
        return {"prm_scores": torch.sigmoid(logits)}


@ADVANTAGES.register(
    "prm",
    params=PrmParams,
    state=PrmState,
    paper=(papers.MATH_SHEPHERD, papers.GRPO),
    fidelity="reduced",
    departures=(
        (
            "a frozen PRM's turn scores enter as DeepSeekMath's group-normalised process supervision, not "
            "Math-Shepherd's step-by-step PPO with a critic"
        ),
        "a turn is a step: the PRM scores each turn's last token",
    ),
)
def prm(inp: AdvantageInput, cfg, params: PrmParams = PrmParams(path="-")) -> torch.Tensor:
    """A process reward model as step-level credit (Math-Shepherd, Wang et al. 2024, arXiv:2312.08935):
    A_t = outcome_coef * A_GRPO + process_coef * sum_{j >= t} (s_j - mean_g s) / (std_g s + std_eps).

    s_t = σ(PRM logit at the last token of turn t) (extras['prm_scores'], (N, M), from `PrmState`): the PRM's
    estimate that the trajectory still reaches a right answer after step t, trained on Math-Shepherd's
    Monte Carlo step labels (`ascent train-prm`). Step rewards are normalised over all steps of the group's
    valid trajectories and summed from the step to the end (process supervision in GRPO, Shao et al. 2024,
    arXiv:2402.03300), and the GRPO advantage of the outcome is added (outcome_coef; 0: the PRM credit alone,
    group-normalised as in GRPO's process supervision, not Math-Shepherd's step-by-step PPO with a critic).
    Or (`into=turn_feedback` / `explore_group`) the scores replace extras['turn_rewards'] and that estimator computes
    the advantages (explore_group with step_coef = into_coef). Needs extras turn_index.
    """
    name = "prm"
    scores = _turn_extra(inp, "prm_scores", name).double()
    if params.into != "process":
        piece = ADVANTAGES.get(params.into)
        target = AdvantageInput(
            inp.rewards, inp.valid, inp.group_index, inp.mask, {**inp.extras, "turn_rewards": scores}
        )
        if params.into == "explore_group":
            return piece(target, cfg, ExploreGroupParams(step_coef=params.into_coef))
        return piece(target, cfg)
    idx = _turn_index(inp, name, scores.shape[1])
    turn_adv = params.process_coef * process_advantages(inp, cfg, scores)  # (N, M)
    turn_adv = turn_adv + params.outcome_coef * _grpo_seq(inp, cfg).double()[:, None]
    return _to_tokens(torch.where(_live(inp, scores), turn_adv, torch.zeros_like(turn_adv)), idx, inp)


prm.requires = frozenset({"turn_index", "prm_scores"})


# ---------------------------------------------------------------------------------------------------------
# q_evolve (Q-Evolve: weighted IQL critic, A = Q - V)
# ---------------------------------------------------------------------------------------------------------
def expectile_loss(diff: torch.Tensor, tau: float) -> torch.Tensor:
    """Elementwise expectile regression loss L_tau(u) = |tau - 1(u < 0)| u^2 of u = Q - V (IQL, Kostrikov et
    al. 2021, arXiv:2110.06169): tau > 0.5 weighs under-estimates of Q more, so V tends to an upper
    expectile of Q over the data's actions.

    >>> [round(x, 4) for x in expectile_loss(torch.tensor([2.0, -2.0]), 0.7).tolist()]
    [2.8, 1.2]
    """
    weight = torch.where(diff < 0, torch.full_like(diff, 1.0 - tau), torch.full_like(diff, tau))
    return weight * diff.pow(2)


def iql_targets(v: torch.Tensor, outcome: torch.Tensor, live: torch.Tensor, gamma: float) -> torch.Tensor:
    """(B, M) TD targets of Q for each turn: gamma V(s_{t+1}) for a turn followed by another, the outcome for a
    trajectory's last turn (terminal: the reward comes at the end, nothing after it); 0 off `live`.

    >>> iql_targets(torch.tensor([[0.2, 0.6, 0.0]]), torch.tensor([1.0]), torch.tensor([[True, True, False]]), 0.9)
    tensor([[0.5400, 1.0000, 0.0000]])
    """
    next_live = torch.cat([live[:, 1:], torch.zeros_like(live[:, :1])], dim=1)  # (B, M)
    next_v = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)
    target = torch.where(next_live, gamma * next_v, outcome[:, None].to(v.dtype).expand_as(v))
    return torch.where(live, target, torch.zeros_like(target))


def transition_weights(
    weight: torch.Tensor, outcome: torch.Tensor, live: torch.Tensor, success_weight: float
) -> torch.Tensor:
    """(B, M) IQL weights: the record's weight, times 1 + success_weight * 0.5^(K-1-t) on the turns of
    trajectories with outcome > 0 (near-terminal steps of successes weigh most); 0 off `live`.

    >>> transition_weights(torch.ones(2), torch.tensor([1.0, 0.0]), torch.tensor([[True, True], [True, False]]), 2.0)
    tensor([[2., 3.],
            [1., 0.]])
    """
    k = live.sum(1, keepdim=True)  # (B, 1)
    to_end = (k - 1 - torch.arange(live.shape[1])[None, :]).clamp(min=0).float()  # (B, M) turns after t
    boost = 1.0 + success_weight * (outcome[:, None] > 0).float() * 0.5**to_end
    return weight[:, None] * boost * live


def iql_losses(
    q: torch.Tensor,
    v: torch.Tensor,
    outcome: torch.Tensor,
    w: torch.Tensor,
    live: torch.Tensor,
    tau: float,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q loss, V loss): means over live turns, weighted by `w` (B, M), of (Q(s,a) - (gamma V(s') | R))^2 and
    L_tau(Q(s,a) - V(s)), Q and the TD target's V detached where the other model is trained (weighted IQL)."""
    w = w * live  # (B, M)
    total = w.sum().clamp(min=1e-12)
    target = iql_targets(v.detach(), outcome, live, gamma)
    q_loss = (w * (q - target).pow(2)).sum() / total
    v_loss = (w * expectile_loss(q.detach() - v, tau)).sum() / total
    return q_loss, v_loss


@dataclass(frozen=True)
class QEvolveParams:
    """Q-Evolve's in-distribution critic (Q-Evolve, Zhang et al. 2026, arXiv:2606.07367; IQL of Kostrikov et
    al. 2021, arXiv:2110.06169)."""

    tau: float = 0.7
    """Expectile of V's regression on Q (IQL, Kostrikov et al. 2021, arXiv:2110.06169), in (0, 1); 0.5: V = E[Q]."""
    gamma: float = 1.0
    """Discount per turn, in (0, 1]."""
    demos: Optional[str] = None
    """Expert trajectories (a step-data JSONL of `ascent train-prm`, e.g. made with prm.policy=demonstrator)
    mixed into the critic's data with weight `expert_weight`; None: agent trajectories only."""
    expert_weight: float = 1.0
    """Weight of expert transitions in the IQL losses (agent transitions: 1); > 0."""
    warmup_steps: int = 0
    """Critic steps on the expert data alone before RL (with demos); >= 0."""
    buffer: int = 256
    """Agent trajectories kept for the critic (the latest ones; older batches are dropped); >= 1."""
    batch_size: int = 32
    """Trajectories per critic step; >= 1."""
    train_steps: int = 2
    """Critic steps after each rollout batch (before the policy's update); >= 0."""
    lr: Optional[float] = None
    """Critic learning rate (None: train.optim.lr); > 0."""
    outcome_coef: float = 1.0
    """Weight of the GRPO outcome advantage added to every turn (0: the process rewards alone); >= 0."""
    process_coef: float = 1.0
    """Weight of the process reward Q - V (in outcome units, divided by the group's outcome std like GRPO's
    advantage); >= 0."""
    success_weight: float = 1.0
    """Up-weighting of successful trajectories' near-terminal transitions in the IQL losses (Q-Evolve's weighted
    IQL): a transition t of a K-turn trajectory with outcome > 0 weighs (1 + success_weight * 0.5^(K-1-t));
    0: unweighted; >= 0."""

    def __post_init__(self) -> None:
        if self.success_weight < 0:
            raise ValueError(f"success_weight must be >= 0, got {self.success_weight}")
        if not 0.0 < self.tau < 1.0:
            raise ValueError(f"tau must be in (0, 1), got {self.tau}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if not self.expert_weight > 0:
            raise ValueError(f"expert_weight must be > 0, got {self.expert_weight}")
        if self.warmup_steps < 0 or self.train_steps < 0 or self.buffer < 1 or self.batch_size < 1:
            raise ValueError("warmup_steps and train_steps must be >= 0, buffer and batch_size >= 1")
        if self.warmup_steps and self.demos is None:
            raise ValueError("warmup_steps trains on the expert data: set demos too (or warmup_steps=0)")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr must be > 0 (or None), got {self.lr}")
        if self.process_coef < 0 or self.outcome_coef < 0 or self.process_coef + self.outcome_coef == 0:
            raise ValueError("process_coef and outcome_coef must be >= 0 and not both 0")


class QEvolveState(_BufferState):
    """Q-Evolve's critic: Q and V, each a copy of the policy's trunk with a scalar head (`Services.value_model`),
    trained by weighted IQL on the latest agent trajectories plus the expert ones (`demos`)."""

    prefix = "critic"

    def __init__(self, params: QEvolveParams, services: Any) -> None:
        super().__init__(params, services)
        self._setup(("q", "v"))
        if params.demos is not None:
            self.fixed = read_records(params.demos, params.expert_weight)

    def prepare(self) -> None:
        self.train_steps(self.params.warmup_steps)

    def loss(self, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        live = data["last"] >= 0
        before = torch.where(live, data["first"] - 1, torch.full_like(data["first"], -1))
        q = head_at(self.models["q"], data["ids"], data["mask"], data["last"])  # (B, M)
        v = head_at(self.models["v"], data["ids"], data["mask"], before)  # (B, M)
        w = transition_weights(data["weight"], data["outcome"], live, self.params.success_weight)
        q_loss, v_loss = iql_losses(q, v, data["outcome"], w, live, self.params.tau, self.params.gamma)
        return q_loss + v_loss, {"critic/q_loss": float(q_loss.detach()), "critic/v_loss": float(v_loss.detach())}

    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        idx = batch.extras.get("turn_index")
        if idx is None:
            raise ValueError("q_evolve scores model turns: it needs an agent task (batches with extras['turn_index'])")
        first, last = turn_spans(idx, max(1, int(idx.max()) + 1))
        before = torch.where(last >= 0, first - 1, torch.full_like(first, -1))
        mb = self.services.micro_batch_size
        q = scores_at(self.models["q"], batch.input_ids, batch.attention_mask, last, mb)
        v = scores_at(self.models["v"], batch.input_ids, batch.attention_mask, before, mb)
        return {"turn_q": q, "turn_v": v}


@ADVANTAGES.register(
    "q_evolve",
    params=QEvolveParams,
    state=QEvolveState,
    paper=(papers.Q_EVOLVE, papers.IQL),
    fidelity="reduced",
    departures=(
        "an online critic trained during RL replaces the offline iterate-then-BPPO loop",
        "the success weight 1 + w 0.5^(K-1-t) is a reading of 'up-weights successful, near-terminal steps'",
        "one-step A = Q - V, not GAE over the critic",
    ),
)
def q_evolve(inp: AdvantageInput, cfg, params: QEvolveParams = QEvolveParams()) -> torch.Tensor:
    """Q-Evolve (Zhang et al. 2026, arXiv:2606.07367): step-wise process rewards from an in-distribution
    critic, A_t = outcome_coef * A_GRPO + process_coef * (Q(s_t, a_t) - V(s_t)) / (std_g r + std_eps).

    The critic (`QEvolveState`) is trained by weighted Implicit Q-Learning (Kostrikov et al. 2021,
    arXiv:2110.06169) on a hybrid off-policy dataset, the latest agent trajectories plus expert
    demonstrations weighted `expert_weight`, the near-terminal turns of successful trajectories up-weighted
    (`success_weight`, `transition_weights`): with s_t the history before turn t (V read at the token before
    it) and a_t the turn (Q read at its last token),
        L_Q = E_w[(Q(s_t, a_t) - y_t)^2],  y_t = gamma V(s_{t+1}) (y = the outcome for the last turn),
        L_V = E_w[L_tau(Q(s_t, a_t) - V(s_t))],  L_tau(u) = |tau - 1(u < 0)| u^2,
    in-sample only (no max over unseen actions), which is what keeps the backups stable with sparse
    terminal rewards. The process reward of a turn is its advantage Q - V, in outcome units, divided by the
    group's outcome std as GRPO's advantage is (1 for groups with equal outcomes; not by the std of Q - V,
    which blows an untrained critic's near-zero noise up to the outcome's scale); the outcome's GRPO
    advantage is added (outcome_coef; 0: Q-Evolve's process rewards
    alone). Each batch is scored by the critic as it stood before the batch; the batch then joins the
    buffer and the critic takes `train_steps` steps. The policy update is the run's loss (ppo_clip: its
    clipped ratio is the behaviour-proximal part; Q-Evolve's offline BPPO iterations are not reproduced).
    Needs extras turn_index.
    """
    name = "q_evolve"
    q, v = _turn_extra(inp, "turn_q", name).double(), _turn_extra(inp, "turn_v", name).double()
    idx = _turn_index(inp, name, q.shape[1])
    live = _live(inp, q) & torch.isfinite(v)
    reward = torch.where(live, q - v, torch.zeros_like(q))  # (N, M) process rewards
    turn_adv = params.process_coef * reward / _group_scale(inp, cfg)
    turn_adv = turn_adv + params.outcome_coef * _grpo_seq(inp, cfg).double()[:, None]
    return _to_tokens(torch.where(live, turn_adv, torch.zeros_like(turn_adv)), idx, inp)


q_evolve.requires = frozenset({"turn_index", "turn_q", "turn_v"})


# ---------------------------------------------------------------------------------------------------------
# spa (SPA: a learned progress estimator whose contributions sum to the outcome)
# ---------------------------------------------------------------------------------------------------------
def spa_decomposition(contrib: torch.Tensor, outcome: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """(N, M) contributions that sum to each row's outcome exactly: c_t + (R - sum_j c_j) / K (the estimator's
    error spread evenly over the row's K live turns); 0 off `live`.

    >>> spa_decomposition(torch.tensor([[0.2, 0.3, 0.0]]), torch.tensor([1.0]), torch.tensor([[True, True, False]]))
    tensor([[0.4500, 0.5500, 0.0000]])
    """
    c = torch.where(live, contrib, torch.zeros_like(contrib))
    k = live.sum(1, keepdim=True).clamp(min=1).to(c.dtype)  # (N, 1)
    residual = (outcome[:, None].to(c.dtype) - c.sum(1, keepdim=True)) / k
    return torch.where(live, c + residual, torch.zeros_like(c))


@dataclass(frozen=True)
class SpaParams:
    """Stepwise Progress Attribution (SPA, Wang et al. 2025, arXiv:2505.20732)."""

    grounding_coef: float = 0.0
    """Weight of the grounding signal added to each turn's reward: the environment's step reward,
    extras['turn_rewards'] (SPA, Wang et al. 2025, arXiv:2505.20732: whether the action executed; NaN as 0)."""
    normalize: bool = True
    """Divide by the group's outcome std (+ std_eps) where it is > 0."""
    flat_groups: bool = False
    """Keep the redistribution in groups whose outcomes are all equal (it sums to 0 per trajectory; divided by 1);
    false: those groups get 0, as in GRPO and `progress` (measured: keeping it let the estimator's credit for
    extra search turns in all-success groups collapse a run, docs/results.md §4f)."""
    buffer: int = 256
    """Trajectories kept for the estimator (the latest ones); >= 1."""
    batch_size: int = 32
    """Trajectories per estimator step; >= 1."""
    train_steps: int = 2
    """Estimator steps after each rollout batch; >= 0."""
    lr: Optional[float] = None
    """Estimator learning rate (None: train.optim.lr); > 0."""

    def __post_init__(self) -> None:
        if self.train_steps < 0 or self.buffer < 1 or self.batch_size < 1:
            raise ValueError("train_steps must be >= 0, buffer and batch_size >= 1")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr must be > 0 (or None), got {self.lr}")


def spa_loss(contrib: torch.Tensor, outcome: torch.Tensor, live: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """SPA's progress-estimator loss: weighted mean over trajectories of (sum_t c_t - R)^2.

    >>> float(spa_loss(torch.tensor([[0.2, 0.3]]), torch.tensor([1.0]), torch.tensor([[True, True]]), torch.ones(1)))
    0.25
    """
    total = torch.where(live, contrib, torch.zeros_like(contrib)).sum(1)  # (B,)
    return (weight * (total - outcome).pow(2)).sum() / weight.sum().clamp(min=1e-12)


class SpaState(_BufferState):
    """SPA's progress estimator: a copy of the policy's trunk with a scalar head read at each turn's last token
    (the turn's contribution c_t), trained so that a trajectory's contributions sum to its outcome."""

    prefix = "progress"

    def __init__(self, params: SpaParams, services: Any) -> None:
        super().__init__(params, services)
        self._setup(("progress",))

    def loss(self, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        c = head_at(self.models["progress"], data["ids"], data["mask"], data["last"])  # (B, M)
        loss = spa_loss(c, data["outcome"], data["last"] >= 0, data["weight"])
        return loss, {"progress/loss": float(loss.detach())}

    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        idx = batch.extras.get("turn_index")
        if idx is None:
            raise ValueError("spa scores model turns: it needs an agent task (batches with extras['turn_index'])")
        _, last = turn_spans(idx, max(1, int(idx.max()) + 1))
        c = scores_at(
            self.models["progress"], batch.input_ids, batch.attention_mask, last, self.services.micro_batch_size
        )
        return {"turn_contrib": c}


@ADVANTAGES.register(
    "spa",
    params=SpaParams,
    state=SpaState,
    paper=papers.SPA,
    fidelity="reduced",
    departures=(
        "the progress estimator trains online on recent trajectories, not before RL on the SFT agent's rollouts",
        (
            "a GRPO-style group baseline and std instead of PPO; a residual correction makes the contributions sum "
            "exactly to the outcome"
        ),
        "the grounding term is off by default (`grounding_coef=0`)",
    ),
)
def spa(inp: AdvantageInput, cfg, params: SpaParams = SpaParams()) -> torch.Tensor:
    """Stepwise Progress Attribution with a learned estimator (SPA, Wang et al. 2025, arXiv:2505.20732):
    A_t = (c^_t - mean_g r / K + grounding_coef g_t) / (std_g r + std_eps), sum_t c^_t = r.

    A progress estimator (`SpaState`: the policy's trunk with a scalar head at each turn's last token) gives
    each turn a contribution c_t and is trained so that a trajectory's contributions add up to its outcome,
    min E[(sum_t c_t - R)^2], on the latest trajectories. For the batch, the estimator's error on each
    trajectory is spread evenly over its K turns (c^_t = c_t + (r - sum_j c_j) / K, `spa_decomposition`), so
    the contributions sum to r exactly, and the group's mean outcome is taken off evenly as the baseline: a
    trajectory's turn advantages sum to (r - mean_g r) / std, GRPO's total, and the estimator only moves
    credit between its turns. g_t is the grounding signal (the environment's step reward, extras
    turn_rewards, NaN as 0; SPA: whether the action executed validly). Groups with equal outcomes get 0
    (params.flat_groups: keep the redistribution, which sums to 0, divided by 1). With an untrained
    estimator (a zero head) every turn gets 1/K of the GRPO advantage.

    Unlike `progress` (our learning-free reading of SPA), whose progress after a turn is the mean outcome of
    the group's trajectories sharing that history, so credit moves only where the group's samples branch
    and a unique history gets a fixed shrinkage rule, the estimator here is learned from every recent
    trajectory and judges a turn by its content (tokens), also in histories no other sample shares. Needs
    extras turn_index (and turn_rewards with grounding_coef).
    """
    name = "spa"
    contrib = _turn_extra(inp, "turn_contrib", name).double()
    idx = _turn_index(inp, name, contrib.shape[1])
    live = _live(inp, contrib)
    r = torch.where(inp.valid, inp.rewards.double(), torch.zeros_like(inp.rewards.double()))
    c = spa_decomposition(contrib, r, live)  # (N, M), rows sum to r
    _, mean, _ = group_moments(inp.rewards.double(), inp.group_index, inp.valid)
    k = live.sum(1, keepdim=True).clamp(min=1).double()
    turn_adv = c - mean[:, None] / k
    if params.grounding_coef:
        ground = torch.nan_to_num(_extra(inp, "turn_rewards", name).double(), nan=0.0)
        turn_adv = turn_adv + params.grounding_coef * ground
    if params.normalize:
        turn_adv = turn_adv / _group_scale(inp, cfg)
    if not params.flat_groups:
        _, _, std = group_moments(inp.rewards.double(), inp.group_index, inp.valid)
        turn_adv = torch.where(std[:, None] > 0, turn_adv, torch.zeros_like(turn_adv))
    return _to_tokens(torch.where(live, turn_adv, torch.zeros_like(turn_adv)), idx, inp)


spa.requires = frozenset({"turn_index", "turn_contrib"})
