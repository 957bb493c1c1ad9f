"""Prompt samplers: which training prompts an RL step samples, and how many completions each gets.

ONE construction signature, `SAMPLERS[name](ctx: SamplerContext[, params]) -> PromptSampler`, and one
interface (`PromptSampler`): `next(k)` draws the step's prompts as a `Draw`, `observe(rows, rewards, valid)`
feeds back every scored group (the trainer calls it after each rollout round, before any group filter),
`state_dict()` / `load_state_dict()` make a resumed run draw exactly what the uninterrupted one would have.

A sampler decides *which prompts*; a group filter (`ascent.algorithms.filters`) decides which scored groups
the learner keeps; an explorer (`ascent.rollout.explorers`) decides *how* a group's completions are produced.
"""

from __future__ import annotations

import bisect
import heapq
import random
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ascent import papers
from ascent.data.sampler import RowSampler
from ascent.registry import Registry

SAMPLERS: Registry = Registry("sampler")


@dataclass(frozen=True)
class SamplerContext:
    """What a sampler is built from."""

    rows: list[dict[str, Any]]
    """The training rows (a sampler may read their fields, e.g. a task's `difficulty`)."""
    seed: int
    """The run seed."""
    samples_per_prompt: int
    """rollout.samples_per_prompt: the default group size."""
    total_steps: int = 0
    """train.steps (samplers that stage or schedule by progress read it)."""


@dataclass(frozen=True)
class Draw:
    """One round of prompts for the rollout stage."""

    indices: list[int]
    """Training-row indices, one per group (a row may appear once)."""
    samples: Optional[list[int]] = None
    """Completions per group, aligned with `indices` (None: rollout.samples_per_prompt for every group)."""

    def __post_init__(self) -> None:
        if self.samples is not None:
            if len(self.samples) != len(self.indices):
                raise ValueError(f"Draw: {len(self.samples)} sample counts for {len(self.indices)} prompts")
            if any(s < 1 for s in self.samples):
                raise ValueError(f"Draw: every prompt needs >= 1 sample, got {self.samples}")


class PromptSampler:
    """The sampler interface. `varies_samples`: the sampler may set `Draw.samples` (the collector must then
    sample groups of different sizes; the single-turn collector does, agent collectors do not)."""

    varies_samples = False

    def next(self, k: int) -> Draw:
        """The next `k` prompts."""
        raise NotImplementedError

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        """Feedback from one scored rollout round: `rows` (N,) long training-row index of each sample,
        `rewards` (N,) float, `valid` (N,) bool (False: the reward failed; ignore that sample)."""

    def metrics(self) -> dict[str, float]:
        """sampler/ metrics of the last draw (logged with the step)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


@SAMPLERS.register("uniform", paper=None, fidelity="ascent")
class UniformSampler(PromptSampler):
    """Every training row once per epoch in a fresh seeded permutation (sampling without replacement): the
    default, what every GRPO recipe does. Its state is the epoch and the cursor."""

    def __init__(self, ctx: SamplerContext) -> None:
        self.rows = RowSampler(len(ctx.rows), ctx.seed)

    def next(self, k: int) -> Draw:
        return Draw(self.rows.next(k))

    def state_dict(self) -> dict[str, Any]:
        return self.rows.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows.load_state_dict(state)


def group_rewards(rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> dict[int, list[float]]:
    """The valid rewards of each training row in a scored round: {row: [reward, ...]}.

    >>> group_rewards(torch.tensor([3, 3, 5, 5]), torch.tensor([1.0, 0.0, 1.0, 0.5]),
    ...               torch.tensor([True, True, False, True]))
    {3: [1.0, 0.0], 5: [0.5]}
    """
    out: dict[int, list[float]] = {}
    for r, x, ok in zip(rows.tolist(), rewards.tolist(), valid.tolist()):
        if ok:
            out.setdefault(int(r), []).append(float(x))
    return out


# Adaptive samplers: what they share (per-draw RNG, clipped group means, a scan over the seeded epoch order).


def draw_rng(name: str, seed: int, draws: int) -> random.Random:
    """The RNG of one draw, derived from (sampler, seed, draw count): a resumed run needs only the count."""
    return random.Random(f"{name}:{seed}:{draws}")


def group_means(rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> dict[int, float]:
    """Each row's mean valid reward in a scored round, rewards clipped to [0, 1] (a pass rate for 0/1 rewards)."""
    return {
        r: sum(min(max(x, 0.0), 1.0) for x in xs) / len(xs) for r, xs in group_rewards(rows, rewards, valid).items()
    }


def scan(
    order: RowSampler, k: int, admit: Callable[[int], bool], rank: Callable[[int], float]
) -> tuple[list[int], list[int]]:
    """Walk the seeded epoch order, keeping the rows `admit` accepts, each once, until `k` are kept or every row
    has been met. With fewer than `k` admitted, the skipped rows of lowest `rank` (then scan order) top
    the draw up; with `k` above the row count, the order's next rows repeat (as `uniform` does).
    Returns (drawn rows, rows skipped and not used)."""
    chosen: list[int] = []
    skipped: list[int] = []
    met: set[int] = set()
    while len(chosen) < k and len(met) < order.num_rows:  # ends within two epochs of the order
        i = order.next(1)[0]
        if i in met:  # the scan crossed into a new epoch
            continue
        met.add(i)
        (chosen if admit(i) else skipped).append(i)
    if len(chosen) < k:
        skipped.sort(key=rank)
        chosen, skipped = chosen + skipped[: k - len(chosen)], skipped[k - len(chosen) :]
    if len(chosen) < k:
        chosen += order.next(k - len(chosen))
    return chosen, skipped


class EmaPassRates:
    """Per-row exponential moving average of the clipped group mean reward: est ← (1 − w)·est + w·mean, the
    first observation sets est = mean; None until a row is observed."""

    def __init__(self, num_rows: int, weight: float) -> None:
        self.weight = weight
        self.est: list[Optional[float]] = [None] * num_rows

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        for row, mean in group_means(rows, rewards, valid).items():
            old = self.est[row]
            self.est[row] = mean if old is None else (1.0 - self.weight) * old + self.weight * mean

    def mean(self, rows: Optional[list[int]] = None) -> float:
        """Mean estimate over the observed rows among `rows` (all rows: None); NaN when none is observed."""
        seen = [e for i in (range(len(self.est)) if rows is None else rows) if (e := self.est[i]) is not None]
        return sum(seen) / len(seen) if seen else float("nan")


# pass_rate: online difficulty filtering.


@dataclass(frozen=True)
class PassRateParams:
    """Online difficulty filtering by a running per-prompt pass rate."""

    low: float = 0.01
    """Rows whose estimated pass rate is below this are skipped as too hard; in [0, high]."""
    high: float = 0.99
    """Rows whose estimated pass rate is above this are skipped as too easy; in [low, 1]."""
    ema: float = 0.5
    """Weight of the newest group mean in the running estimate (1: the last observation only); in (0, 1]."""
    revisit: float = 0.1
    """Chance that a skipped row is drawn anyway, so its estimate can change as the policy does; in [0, 1]."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got low={self.low}, high={self.high}")
        if not 0.0 < self.ema <= 1.0:
            raise ValueError(f"ema must be in (0, 1], got {self.ema}")
        if not 0.0 <= self.revisit <= 1.0:
            raise ValueError(f"revisit must be in [0, 1], got {self.revisit}")


@SAMPLERS.register(
    "pass_rate",
    params=PassRateParams,
    paper=papers.BALANCED_ONLINE_DIFFICULTY_FILTERING,
    fidelity="reduced",
    departures=("filters before sampling, by an EMA of each row's earlier pass rates, not after sampling the batch",),
)
class PassRateSampler(PromptSampler):
    """Online difficulty filtering: skip rows whose running pass rate lies outside [low, high].

    Balanced online difficulty filtering (Bae et al. 2025, arXiv:2504.03380; the pass-rate filtering of verl /
    Polaris-style recipes): keep each row's running pass rate p̂ (an EMA of its clipped group
    mean reward, `EmaPassRates`) and draw, in the seeded epoch order, only rows with low <= p̂ <= high; unseen rows
    are always eligible, a skipped row is drawn anyway with probability `revisit`.

    Choices the paper leaves open: the paper filters the groups of the current batch after sampling them (as
    DAPO does); here the filter acts before sampling, on the estimate from earlier rounds, so no rollout is spent
    on a filtered row except the revisits. A skipped row waits for the next epoch. When fewer than k rows are
    eligible within one epoch's scan, the draw is topped up with the skipped rows nearest the band. The
    revisit coin of each draw comes from an RNG seeded by (seed, draw count): resume is exact.
    """

    def __init__(self, ctx: SamplerContext, params: PassRateParams = PassRateParams()) -> None:
        self.params, self.seed = params, ctx.seed
        self.order = RowSampler(len(ctx.rows), ctx.seed)
        self.rates = EmaPassRates(len(ctx.rows), params.ema)
        self.draws = 0
        self.last = {"skipped": 0.0, "revisited": 0.0}

    def distance(self, row: int) -> float:
        """How far a row's estimate lies outside [low, high] (0: eligible or unseen)."""
        est = self.rates.est[row]
        return 0.0 if est is None else max(self.params.low - est, est - self.params.high, 0.0)

    def next(self, k: int) -> Draw:
        rng = draw_rng("pass_rate", self.seed, self.draws)
        revisited = []

        def admit(i: int) -> bool:
            if self.distance(i) == 0.0:
                return True
            if rng.random() < self.params.revisit:
                revisited.append(i)
                return True
            return False

        rows, skipped = scan(self.order, k, admit, self.distance)
        self.draws += 1
        self.last = {"skipped": float(len(skipped)), "revisited": float(len(revisited))}
        return Draw(rows)

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        self.rates.observe(rows, rewards, valid)

    def metrics(self) -> dict[str, float]:
        seen = [i for i, e in enumerate(self.rates.est) if e is not None]
        eligible = sum(self.distance(i) == 0.0 for i in range(len(self.rates.est)))
        return {
            "sampler/pool_size": float(eligible),
            "sampler/seen_rows": float(len(seen)),
            "sampler/mean_pass_rate": self.rates.mean(),
            "sampler/skipped": self.last["skipped"],
            "sampler/revisited": self.last["revisited"],
        }

    def state_dict(self) -> dict[str, Any]:
        return {"order": self.order.state_dict(), "est": list(self.rates.est), "draws": self.draws, "last": self.last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        self.rates.est, self.draws, self.last = list(state["est"]), state["draws"], dict(state["last"])


# staged: difficulty-aware staged curriculum.


@dataclass(frozen=True)
class StagedParams:
    """Difficulty-aware staged curriculum."""

    stages: int = 3
    """Number of difficulty bins, trained on from easiest to hardest; >= 1."""
    field: str = "difficulty"
    """Row field holding a numeric difficulty (higher: harder); rows without it are binned by pass rate."""
    advance_at: float = 0.0
    """Also move to the next stage once the current stage's mean estimated pass rate (unseen rows: 0) reaches
    this (0: by step fraction only); in [0, 1]."""
    ema: float = 0.5
    """Weight of the newest group mean in the running pass-rate estimate; in (0, 1]."""

    def __post_init__(self) -> None:
        if self.stages < 1:
            raise ValueError(f"stages must be >= 1, got {self.stages}")
        if not 0.0 <= self.advance_at <= 1.0:
            raise ValueError(f"advance_at must be in [0, 1], got {self.advance_at}")
        if not 0.0 < self.ema <= 1.0:
            raise ValueError(f"ema must be in (0, 1], got {self.ema}")


def field_bins(rows: list[dict[str, Any]], field: str, stages: int) -> Optional[list[int]]:
    """Each row's difficulty bin from its numeric `field`: bin = ⌊stages · #(rows with a smaller value) / N⌋,
    renumbered 0.. over the bins that hold rows (equal values share a bin); None when no row has the field.

    >>> field_bins([{"d": 3}, {"d": 1}, {"d": 2}, {"d": 1}], "d", 2)
    [1, 0, 1, 0]
    """
    missing = sum(field not in r for r in rows)
    if missing == len(rows):
        return None
    if missing:
        raise ValueError(f"staged: {missing} of {len(rows)} rows lack the field {field!r}; give every row one or none")
    try:
        values = [float(r[field]) for r in rows]
    except (TypeError, ValueError) as err:
        raise ValueError(f"staged: the row field {field!r} must be numeric ({err})") from None
    ordered = sorted(values)
    raw = [stages * bisect.bisect_left(ordered, v) // len(rows) for v in values]
    dense = {b: n for n, b in enumerate(sorted(set(raw)))}
    return [dense[b] for b in raw]


@SAMPLERS.register(
    "staged",
    params=StagedParams,
    paper=papers.DIFFICULTY_AWARE_STAGED_RL,
    fidelity="faithful",
    departures=(
        (
            "equal-count quantile bins of a `difficulty` field (else of the EMA pass rate) and stages by draw count "
            "are ascent's choices"
        ),
    ),
)
class StagedSampler(PromptSampler):
    """Staged curriculum: draw from difficulty bins one stage at a time, easiest first.

    Difficulty-aware staged RL (Ji et al. 2025, arXiv:2504.00829): rows are binned by difficulty and
    training runs in stages of increasing difficulty; stage s draws only rows of bin s (in the seeded epoch
    order), topped up from the nearest bins when bin s has fewer than k rows.

    Choices the paper leaves open: bins are equal-count quantiles of the row field `field` (`field_bins`) when
    the rows carry it; otherwise rows are ranked by their running pass rate (EMA, unseen rows at 0.5, ties in a
    seeded order), re-ranked at every draw, and bin s is the s-th quantile from the easiest. Stage at draw d
    (a draw is one `next` call; with a refilling group filter a step makes several, so stages come earlier):
    ⌊stages · d / train.steps⌋, and, with `advance_at` > 0, one stage further whenever the current stage's mean
    pass rate reaches it. Stages never go back.
    """

    def __init__(self, ctx: SamplerContext, params: StagedParams = StagedParams()) -> None:
        self.params, self.total_steps = params, ctx.total_steps
        self.order = RowSampler(len(ctx.rows), ctx.seed)
        self.rates = EmaPassRates(len(ctx.rows), params.ema)
        self.fixed = field_bins(ctx.rows, params.field, params.stages)
        self.num_stages = max(self.fixed) + 1 if self.fixed is not None else min(params.stages, len(ctx.rows))
        ties = list(range(len(ctx.rows)))
        random.Random(f"staged:{ctx.seed}").shuffle(ties)
        self.ties = {row: n for n, row in enumerate(ties)}  # the seeded tie-break among equal pass rates
        self.stage, self.draws, self.stage_rows = 0, 0, 0

    def bins(self) -> list[int]:
        """Each row's bin now: the fixed field bins, or the quantile of its pass rate from the easiest."""
        if self.fixed is not None:
            return self.fixed
        est = self.rates.est
        ranked = sorted(range(len(est)), key=lambda i: (-(0.5 if est[i] is None else est[i]), self.ties[i]))
        out = [0] * len(est)
        for pos, row in enumerate(ranked):
            out[row] = pos * self.num_stages // len(est)
        return out

    def advance(self, bins: list[int]) -> None:
        last = self.num_stages - 1
        if self.total_steps > 0:
            self.stage = max(self.stage, min(last, self.num_stages * self.draws // self.total_steps))
        if self.params.advance_at > 0 and self.stage < last:
            members = [e or 0.0 for e, b in zip(self.rates.est, bins) if b == self.stage]
            if members and sum(members) / len(members) >= self.params.advance_at:
                self.stage += 1

    def next(self, k: int) -> Draw:
        bins = self.bins()
        self.advance(bins)
        stage = self.stage
        rows, _ = scan(self.order, k, lambda i: bins[i] == stage, lambda i: abs(bins[i] - stage))
        self.draws += 1
        self.stage_rows = sum(b == stage for b in bins)
        return Draw(rows)

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        self.rates.observe(rows, rewards, valid)

    def metrics(self) -> dict[str, float]:
        members = [i for i, b in enumerate(self.bins()) if b == self.stage]
        return {
            "sampler/stage": float(self.stage),
            "sampler/stage_rows": float(self.stage_rows),
            "sampler/stage_pass_rate": self.rates.mean(members),
            "sampler/mean_pass_rate": self.rates.mean(),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.state_dict(),
            "est": list(self.rates.est),
            "stage": self.stage,
            "draws": self.draws,
            "stage_rows": self.stage_rows,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        self.rates.est, self.stage, self.draws = list(state["est"]), state["stage"], state["draws"]
        self.stage_rows = state["stage_rows"]


# coba: capability-oriented rollout budget allocation.


def signal_prob(a: float, b: float, n: int) -> float:
    """P(a group of n samples has both a success and a failure) when the pass rate p ~ Beta(a, b):
    1 − E[pⁿ] − E[(1 − p)ⁿ], with E[pⁿ] = Π_{i<n} (a + i) / (a + b + i).

    >>> round(signal_prob(1.0, 1.0, 3), 6)  # uniform p: 1 − 2 / (n + 1)
    0.5
    """
    up = down = 1.0
    for i in range(n):
        up *= (a + i) / (a + b + i)
        down *= (b + i) / (a + b + i)
    return 1.0 - up - down


def allocate(beliefs: list[tuple[float, float]], budget: int, lo: int, hi: int) -> list[int]:
    """Greedy allocation of `budget` samples over prompts with Beta(a, b) pass-rate beliefs: every prompt starts
    at `lo`; a max-heap (heapq on negated gains) then gives one sample at a time to the prompt whose next sample
    raises its `signal_prob` most (ties: earlier prompt), up to `hi` each. The gains fall with n (the objective
    is concave), so the greedy sum is the optimum.

    >>> allocate([(1.0, 1.0), (50.0, 1.0)], budget=8, lo=2, hi=6)
    [6, 2]
    """
    if not lo * len(beliefs) <= budget <= hi * len(beliefs):
        raise ValueError(f"coba: a budget of {budget} samples cannot give {len(beliefs)} prompts {lo}..{hi} each")
    counts = [lo] * len(beliefs)

    def entry(i: int) -> tuple[float, int]:
        a, b = beliefs[i]
        return (signal_prob(a, b, counts[i]) - signal_prob(a, b, counts[i] + 1), i)  # (−gain, position)

    heap = [entry(i) for i in range(len(beliefs)) if counts[i] < hi]
    heapq.heapify(heap)
    for _ in range(budget - lo * len(beliefs)):
        _, i = heapq.heappop(heap)
        counts[i] += 1
        if counts[i] < hi:
            heapq.heappush(heap, entry(i))
    return counts


@dataclass(frozen=True)
class CobaParams:
    """CoBA-RL rollout budget allocation."""

    min_samples: int = 2
    """Fewest samples a drawn prompt gets (capped at rollout.samples_per_prompt so the budget is feasible); >= 1."""
    max_samples: int = 0
    """Most samples a prompt gets (0: 2 × rollout.samples_per_prompt; raised to samples_per_prompt if below)."""
    prior: float = 1.0
    """Beta(prior, prior) belief about an unseen prompt's pass rate; > 0."""
    decay: float = 0.8
    """Factor on a prompt's earlier evidence at each new observation (1: the full posterior); in (0, 1]."""

    def __post_init__(self) -> None:
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {self.min_samples}")
        if self.max_samples != 0 and self.max_samples < self.min_samples:
            raise ValueError(f"max_samples must be 0 or >= min_samples={self.min_samples}, got {self.max_samples}")
        if not self.prior > 0:
            raise ValueError(f"prior must be > 0, got {self.prior}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {self.decay}")


@SAMPLERS.register(
    "coba",
    params=CobaParams,
    paper=papers.COBA_RL,
    fidelity="reduced",
    departures=(
        (
            "the capability-oriented value function is replaced by the probability that a group has signal under a "
            "Beta posterior of the pass rate"
        ),
        "the paper's explore/exploit schedule is not reproduced",
    ),
)
class CobaSampler(PromptSampler):
    """Rollout budget allocation: the drawn prompts share k × samples_per_prompt samples, heap-greedy by value.

    CoBA-RL capability-oriented budget allocation (Yao et al. 2026, arXiv:2602.03048): the k prompts of a
    draw (seeded epoch order) share a fixed budget of k × samples_per_prompt samples, handed out by a heap-based
    greedy allocator (`allocate`) by the value of each prompt's next sample.

    Value used here: the marginal gain in the probability that the prompt's group carries signal (not all
    samples equal), 1 − E[pⁿ] − E[(1 − p)ⁿ] (`signal_prob`), under a Beta posterior on its pass rate p:
    a = prior + s, b = prior + f, with s, f the decayed sums of its clipped rewards r and of 1 − r. The paper's
    Capability-Oriented Value function is a Beta-shaped function of the pass rate whose shape follows the
    model's global failure rate (exploit early, explore later); that schedule is not reproduced — this value
    favours p ≈ 0.5 and unseen prompts throughout. Bounds: min_samples..max_samples per prompt.
    """

    varies_samples = True

    def __init__(self, ctx: SamplerContext, params: CobaParams = CobaParams()) -> None:
        self.params, self.n = params, ctx.samples_per_prompt
        self.lo = min(params.min_samples, self.n)
        self.hi = max(params.max_samples or 2 * self.n, self.n)
        self.order = RowSampler(len(ctx.rows), ctx.seed)
        self.successes = [0.0] * len(ctx.rows)
        self.failures = [0.0] * len(ctx.rows)
        self.last = {"mean_pass_rate": float("nan"), "samples_min": 0.0, "samples_max": 0.0, "signal_prob": 0.0}

    def belief(self, row: int) -> tuple[float, float]:
        return self.params.prior + self.successes[row], self.params.prior + self.failures[row]

    def next(self, k: int) -> Draw:
        rows = self.order.next(k)
        beliefs = [self.belief(i) for i in rows]
        samples = allocate(beliefs, k * self.n, self.lo, self.hi)
        self.last = {
            "mean_pass_rate": sum(a / (a + b) for a, b in beliefs) / k,
            "samples_min": float(min(samples)),
            "samples_max": float(max(samples)),
            "signal_prob": sum(signal_prob(a, b, s) for (a, b), s in zip(beliefs, samples)) / k,
        }
        return Draw(rows, samples)

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        decay = self.params.decay
        for row, xs in group_rewards(rows, rewards, valid).items():
            hits = sum(min(max(x, 0.0), 1.0) for x in xs)
            self.successes[row] = decay * self.successes[row] + hits
            self.failures[row] = decay * self.failures[row] + len(xs) - hits

    def metrics(self) -> dict[str, float]:
        seen = sum(s + f > 0 for s, f in zip(self.successes, self.failures))
        return {**{f"sampler/{k}": v for k, v in self.last.items()}, "sampler/seen_rows": float(seen)}

    def state_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.state_dict(),
            "successes": list(self.successes),
            "failures": list(self.failures),
            "last": dict(self.last),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        self.successes, self.failures = list(state["successes"]), list(state["failures"])
        self.last = dict(state["last"])


# rapo_prune: RAPO's curriculum pruning of saturated prompts.


@dataclass(frozen=True)
class RapoPruneParams:
    """RAPO curriculum pruning."""

    window: int = 2
    """m: a row leaves the pool once its last m observed groups were all solved; >= 1."""
    replay: float = 0.05
    """Chance that a pruned row is drawn anyway (re-admitted if it then fails a sample); in [0, 1]."""
    solved_at: float = 1.0
    """A sample counts as solved when its reward is >= this."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        if not 0.0 <= self.replay <= 1.0:
            raise ValueError(f"replay must be in [0, 1], got {self.replay}")


@SAMPLERS.register(
    "rapo_prune",
    params=RapoPruneParams,
    paper=papers.RAPO,
    fidelity="faithful",
    departures=("the saturation window and the replay probability of pruned rows are ascent's choices",),
)
class RapoPruneSampler(PromptSampler):
    """Curriculum pruning: prompts solved in every sample of their last m groups leave the pool.

    RAPO's curriculum pruning (Fathom-DeepResearch, Singh et al. 2025, arXiv:2509.24107): a prompt whose
    rollouts were all solved (every valid reward >= `solved_at`) in each of its last m = `window` observations
    is saturated and leaves the pool; draws walk the seeded epoch order over the pool.

    Choices the paper leaves open: a pruned row is drawn anyway with probability `replay` (an RNG seeded by
    (seed, draw count)); if that group has an unsolved sample the row's streak resets and it rejoins the pool,
    otherwise it stays pruned. When the pool has fewer than k rows, pruned rows top the draw up. RAPO's other
    parts are elsewhere: the advantage scaling is advantage `rapo`, the per-prompt replay buffer that injects a
    stored successful rollout into all-failed groups is explorer `replay`.
    """

    def __init__(self, ctx: SamplerContext, params: RapoPruneParams = RapoPruneParams()) -> None:
        self.params, self.seed = params, ctx.seed
        self.order = RowSampler(len(ctx.rows), ctx.seed)
        self.streak = [0] * len(ctx.rows)  # consecutive all-solved observations of each row
        self.draws, self.replayed = 0, 0

    def pruned(self, row: int) -> bool:
        return self.streak[row] >= self.params.window

    def next(self, k: int) -> Draw:
        rng = draw_rng("rapo_prune", self.seed, self.draws)
        rows, _ = scan(self.order, k, lambda i: not self.pruned(i) or rng.random() < self.params.replay, lambda i: 0.0)
        self.draws += 1
        self.replayed = sum(self.pruned(i) for i in rows)  # pruned rows drawn: replays and top-ups
        return Draw(rows)

    def observe(self, rows: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        for row, xs in group_rewards(rows, rewards, valid).items():
            solved = all(x >= self.params.solved_at for x in xs)
            self.streak[row] = self.streak[row] + 1 if solved else 0

    def metrics(self) -> dict[str, float]:
        pruned = sum(self.pruned(i) for i in range(len(self.streak)))
        return {
            "sampler/pool_size": float(len(self.streak) - pruned),
            "sampler/pruned": float(pruned),
            "sampler/replayed": float(self.replayed),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.state_dict(),
            "streak": list(self.streak),
            "draws": self.draws,
            "replayed": self.replayed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order.load_state_dict(state["order"])
        self.streak, self.draws, self.replayed = list(state["streak"]), state["draws"], state["replayed"]
