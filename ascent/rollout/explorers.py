"""Explorers: how a group's completions are produced (plain sampling, parameter noise, prefixes of earlier
successes, replayed trajectories, branching...).

ONE construction signature, `EXPLORERS[name](ctx: ExplorerContext[, params]) -> Explorer`, and one
interface (`Explorer`): `collect(draw, generator) -> RolloutBatch` produces the round's groups for the prompts
a sampler drew; `observe(batch, rewards, valid)` sees every scored round (e.g. to keep successes);
`state_dict()` / `load_state_dict()` travel in the trainer state so a resumed run explores exactly as the
uninterrupted one. An explorer that samples from anything but the current policy must say so in the batch:
`RolloutBatch.sampled_logprobs` are the log-probs of the distribution that really produced each token (the
learner's truncated importance weight, `algorithm.tis_cap`, corrects for the difference), and tokens the
policy did not sample (a forced prefix) get `completion_mask` 0 so they never enter the loss.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

import torch

from ascent import papers
from ascent.algorithms.opd import EDGE_CONDITIONED, EDGE_DISTIL, EDGE_TEACHER
from ascent.data.samplers import Draw, draw_rng
from ascent.policy.model import token_logprobs
from ascent.registry import Registry
from ascent.rollout.batch import concat_batches
from ascent.rollout.types import RolloutBatch, SamplingSettings

EXPLORERS: Registry = Registry("explorer")


@dataclass
class ExplorerContext:
    """What an explorer is built from: the run's rollout stage and what it is made of."""

    collector: Any
    """The run's collector (`ascent.rollout.collector.Collector`): `collect(indices, generator[, samples])`."""
    policy: Any
    """The policy (`ascent.policy.model.Policy`: `.model`, `.tokenizer`)."""
    rows: list[dict[str, Any]]
    """The training rows."""
    encoder: Any
    """Prompt text -> token ids (`ascent.data.prompts.PromptEncoder`)."""
    engine: Any
    """The rollout engine (`generate(model, prompt_ids, n, settings, generator) -> Generation`)."""
    settings: SamplingSettings
    """The run's sampling settings."""
    samples_per_prompt: int
    """rollout.samples_per_prompt."""
    seed: int
    """The run seed."""
    scorer: Any = None
    """The run's rewards, `score(prompts, completions, fields) -> RewardResult` (explorers that search within a
    round, e.g. `mcts`, score their search rollouts with it); None where the caller has none."""


class Explorer:
    """The explorer interface (see the module docstring). `off_policy`: it samples (some) tokens from another
    distribution than the current policy, so a run should set `algorithm.tis_cap` (the config warns)."""

    off_policy = False
    last: dict[str, float] = {}
    """The last round's metrics, without the explore/ prefix (instances assign their own dict)."""

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        raise NotImplementedError

    def amend(
        self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor, components: torch.Tensor
    ) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A scored round, before anything else sees it: the explorer may return a changed round (new objects;
        the inputs stay as they are), e.g. `replay` swapping kept successes into groups that all failed.
        `rewards` (N,), `valid` (N,) bool, `components` (N, K) each reward's value. Default: unchanged."""
        return batch, rewards, valid, components

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        """A scored (and amended) round: `rewards` (N,), `valid` (N,) bool, aligned with `batch`'s rows."""

    def metrics(self) -> dict[str, float]:
        """explore/ metrics of the last round (`last`, prefixed)."""
        return {f"explore/{k}": float(v) for k, v in self.last.items()}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def collect_plain(collector: Any, draw: Draw, generator: torch.Generator) -> RolloutBatch:
    """The collector's batch for `draw` (a per-prompt group size needs a collector that takes `samples`)."""
    if draw.samples is None:
        return collector.collect(draw.indices, generator)
    return collector.collect(draw.indices, generator, draw.samples)


@EXPLORERS.register("plain", paper=None, fidelity="ascent")
class PlainExplorer(Explorer):
    """Sample every completion from the current policy at the run's temperature (the GRPO default)."""

    def __init__(self, ctx: ExplorerContext) -> None:
        self.collector = ctx.collector

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        return collect_plain(self.collector, draw, generator)


# What the explorers below share: bounded per-row trace stores, groups sampled from prompt + forced prefix.


@dataclass
class Trace:
    """A completion kept for later rounds (token ids after the prompt)."""

    tokens: list[int]
    """The completion's token ids."""
    logprobs: Optional[list[float]] = None
    """Sampling-time log-prob of each token (kept by `replay`, whose tokens re-enter the loss)."""
    reward: float = 0.0
    """The reward it earned."""
    finished: bool = True
    """It ended with EOS."""
    priority: float = 0.0
    """How informative its group was (`exit`: the group's reward variance)."""
    components: Optional[list[float]] = None
    """Each reward's value for it (`replay` copies them with the reward)."""


class TraceStore:
    """Traces per training row, bounded: at most `per_row` a row (beyond it the oldest leaves, or with
    `by_priority` the lowest priority, oldest first) and `max_rows` rows (beyond it the row stored to longest
    ago leaves). A token sequence already kept for a row is not added again."""

    def __init__(self, per_row: int, max_rows: int, by_priority: bool = False) -> None:
        self.per_row, self.max_rows, self.by_priority = per_row, max_rows, by_priority
        self.rows: OrderedDict[int, list[Trace]] = OrderedDict()

    def add(self, row: int, trace: Trace) -> bool:
        """Keep `trace` for `row`; False when it was already there."""
        kept = self.rows.get(row, [])
        if any(t.tokens == trace.tokens for t in kept):
            return False
        kept.append(trace)
        if len(kept) > self.per_row:
            drop = min(range(len(kept)), key=lambda i: kept[i].priority) if self.by_priority else 0
            kept.pop(drop)
        self.rows[row] = kept
        self.rows.move_to_end(row)
        while len(self.rows) > self.max_rows:
            self.rows.popitem(last=False)
        return True

    def get(self, row: int) -> list[Trace]:
        return self.rows.get(row, [])

    def __len__(self) -> int:
        return sum(len(ts) for ts in self.rows.values())

    def state_dict(self) -> list[list[Any]]:
        return [[row, [asdict(t) for t in ts]] for row, ts in self.rows.items()]

    def load_state_dict(self, state: list[list[Any]]) -> None:
        self.rows = OrderedDict((int(row), [Trace(**t) for t in ts]) for row, ts in state)


class TraceExplorer(Explorer):
    """An explorer that keeps traces per training row (`store`) and counts rounds (its RNG seed); both, with the
    last round's metrics, are its checkpointed state."""

    def __init__(self, ctx: ExplorerContext, params: Any, store: TraceStore) -> None:
        self.ctx, self.params, self.store = ctx, params, store
        self.rounds = 0
        self.last: dict[str, float] = {}

    def state_dict(self) -> dict[str, Any]:
        return {"store": self.store.state_dict(), "rounds": self.rounds, "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.store.load_state_dict(state["store"])
            self.rounds, self.last = state["rounds"], dict(state["last"])


def prompt_length(ctx: ExplorerContext, batch: RolloutBatch, i: int) -> int:
    """Prompt tokens of sequence `i` (the encoder memoises prompts)."""
    return len(ctx.encoder(batch.prompts[i]))


def on_policy_traces(
    ctx: ExplorerContext, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor
) -> list[tuple[int, int, Trace]]:
    """(position, row, trace) of every valid sequence the policy sampled whole (no forced token), with its
    completion, sampling log-probs and reward."""
    if batch.row_index is None:
        return []
    out = []
    for i in range(len(batch)):
        start, end = prompt_length(ctx, batch, i), int(batch.attention_mask[i].sum())
        if not bool(valid[i]) or end <= start or not bool((batch.completion_mask[i, start:end] > 0).all()):
            continue
        trace = Trace(
            tokens=batch.input_ids[i, start:end].tolist(),
            logprobs=batch.sampled_logprobs[i, start:end].tolist(),
            reward=float(rewards[i]),
            finished=bool(batch.finished[i]),
        )
        out.append((i, int(batch.row_index[i]), trace))
    return out


def prefix_of(trace: list[int], frac: float, max_new_tokens: int) -> list[int]:
    """The first round(frac · len) tokens of `trace`, at least 1 and at most len − 1 (a prefix never holds
    the trace's last token, its EOS if it ended) and max_new_tokens − 1 (one token is left to sample); [] when no such
    prefix exists.

    >>> prefix_of([5, 6, 7, 8], 0.5, 16), prefix_of([5, 6, 7, 8], 0.99, 16), prefix_of([5], 0.5, 16)
    ([5, 6], [5, 6, 7], [])
    """
    n = min(max(1, round(frac * len(trace))), len(trace) - 1, max_new_tokens - 1)
    return list(trace[:n]) if n >= 1 else []


@dataclass(frozen=True)
class Request:
    """`n` completions of training row `row` for group `group`, each continuing the forced tokens `prefix`."""

    group: int
    row: int
    prefix: list[int]
    n: int
    temperature: Optional[float] = None
    """Sample this request at another temperature (None: the run's); its `sampled_logprobs` are then that
    distribution's log-probs, which the learner's truncated importance weight corrects for."""


Piece = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
"""One request's samples: tokens (n, L), sampling log-probs (n, L), lengths (n,), finished (n,)."""


def sample_with_prefixes(ctx: ExplorerContext, requests: list[Request], generator: torch.Generator) -> RolloutBatch:
    """Sample every request on-policy from prompt + prefix (`sample_pieces`) and pack the batch in request order
    with `assemble_with_prefix`."""
    prompt_ids = [ctx.encoder(ctx.rows[r.row]["prompt"]) for r in requests]
    return assemble_with_prefix(ctx, requests, prompt_ids, sample_pieces(ctx, requests, prompt_ids, generator))


def sample_pieces(
    ctx: ExplorerContext, requests: list[Request], prompt_ids: list[list[int]], generator: torch.Generator
) -> list[Piece]:
    """Each request's samples from prompt + prefix, one engine call per distinct `n` and temperature (in order of
    first appearance). A continuation is cut at max_new_tokens − len(prefix) tokens (then `finished` is False), so
    no completion is longer than a plain one."""
    model, s = ctx.policy.model, ctx.settings
    model.eval()
    pieces: list[Optional[Piece]] = [None] * len(requests)
    for n, temp in dict.fromkeys((r.n, r.temperature) for r in requests):
        which = [i for i, r in enumerate(requests) if (r.n, r.temperature) == (n, temp)]
        settings = s if temp is None else replace(s, temperature=temp)
        gen = ctx.engine.generate(model, [prompt_ids[i] + requests[i].prefix for i in which], n, settings, generator)
        for k, i in enumerate(which):
            rows = slice(k * n, (k + 1) * n)
            budget = s.max_new_tokens - len(requests[i].prefix)
            lengths = gen.lengths[rows].cpu().clamp(max=budget)  # (n,)
            finished = gen.finished[rows].cpu() & (gen.lengths[rows].cpu() <= budget)
            pieces[i] = (gen.tokens[rows].cpu(), gen.logprobs[rows].cpu().float(), lengths, finished)
    return pieces  # type: ignore[return-value]


def assemble_with_prefix(
    ctx: ExplorerContext,
    requests: list[Request],
    prompt_ids: list[list[int]],
    pieces: list[Piece],
) -> RolloutBatch:
    """The right-padded batch of prompt + forced prefix + sampled continuation for each request's samples
    (`pieces[i]`: tokens (n, L), log-probs (n, L), lengths (n,), finished (n,)). Forced tokens: in
    `input_ids` and attention, `completion_mask` 0, `sampled_logprobs` 0; sampled tokens: mask 1 and their
    sampling log-probs. `completions` decode prefix + continuation (what rewards see); `group_index` is the
    request's group. Stats: `rollout/completion_tokens` counts sampled tokens, `completion_len_mean` whole
    completions."""
    tok = ctx.policy.tokenizer
    seqs = []  # (request, prompt ids, completion ids, sampled log-probs, finished)
    for i, (r, (tokens, logprobs, lengths, finished)) in enumerate(zip(requests, pieces)):
        for j in range(r.n):
            c = int(lengths[j])
            seqs.append((i, prompt_ids[i], r.prefix + tokens[j, :c].tolist(), logprobs[j, :c], bool(finished[j])))
    width = max(len(p) + len(c) for _, p, c, _, _ in seqs)
    total = len(seqs)
    input_ids = torch.full((total, width), tok.pad_token_id if tok.pad_token_id is not None else 0, dtype=torch.long)
    attention = torch.zeros((total, width), dtype=torch.long)
    comp_mask = torch.zeros((total, width), dtype=torch.float32)
    sampled = torch.zeros((total, width), dtype=torch.float32)
    for k, (i, p, c, lp, _) in enumerate(seqs):
        start, forced = len(p), len(requests[i].prefix)
        input_ids[k, : start + len(c)] = torch.tensor(p + c, dtype=torch.long)
        attention[k, : start + len(c)] = 1
        comp_mask[k, start + forced : start + len(c)] = 1.0
        sampled[k, start + forced : start + len(c)] = lp
    generated = float(comp_mask.sum())
    lengths = [len(c) for _, _, c, _, _ in seqs]
    finished = torch.tensor([f for *_, f in seqs], dtype=torch.bool)
    rows = [requests[i].row for i, *_ in seqs]
    return RolloutBatch(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=comp_mask,
        sampled_logprobs=sampled,
        group_index=torch.tensor([requests[i].group for i, *_ in seqs], dtype=torch.long),
        finished=finished,
        prompts=[ctx.rows[r]["prompt"] for r in rows],
        completions=tok.batch_decode([c for _, _, c, _, _ in seqs], skip_special_tokens=True),
        fields=[{k: v for k, v in ctx.rows[r].items() if k != "prompt"} for r in rows],
        stats={
            "rollout/completion_tokens": generated,
            "rollout/completion_len_mean": sum(lengths) / max(total, 1),
            "rollout/truncated_frac": float((~finished).float().mean()),
        },
        row_index=torch.tensor(rows, dtype=torch.long),
    )


def group_sizes(draw: Draw, n: int) -> list[int]:
    return list(draw.samples) if draw.samples is not None else [n] * len(draw.indices)


# param_noise: PSN-RLVR.


@dataclass(frozen=True)
class ParamNoiseParams:
    """PSN-RLVR parameter-space noise."""

    sigma: float = 0.01
    """Noise scale: each trainable tensor W gets σ · RMS(W) · ε, ε ~ N(0, I); > 0."""
    share: float = 1.0
    """Fraction of a round's groups sampled by the noisy policy (the rest by the clean one); in (0, 1]."""
    target_diversity: float = 0.0
    """Adaptive σ: after each scored round σ is multiplied by `adapt` when the mean share of distinct
    completions per group is below this, divided by it otherwise (0: fixed σ); in [0, 1]."""
    adapt: float = 1.1
    """Factor of the adaptive σ step; >= 1."""
    sigma_min: float = 1e-4
    """Lower bound of the adaptive σ; > 0."""
    sigma_max: float = 0.1
    """Upper bound of the adaptive σ; >= sigma_min."""

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}")
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {self.share}")
        if not 0.0 <= self.target_diversity <= 1.0:
            raise ValueError(f"target_diversity must be in [0, 1], got {self.target_diversity}")
        if self.adapt < 1.0:
            raise ValueError(f"adapt must be >= 1, got {self.adapt}")
        if not 0.0 < self.sigma_min <= self.sigma_max:
            raise ValueError(f"need 0 < sigma_min <= sigma_max, got {self.sigma_min}, {self.sigma_max}")


def trainable_tensors(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters the learner updates: the LoRA adapters under LoRA, else every float parameter
    (`requires_grad`; a tied embedding counts once)."""
    return [p for p in model.parameters() if p.requires_grad and p.is_floating_point()]


def noise_tensors(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The weights parameter noise perturbs: the policy's effective weights where it learns. Without LoRA, the
    trainable tensors; under LoRA (peft layers with `lora_A` and a `base_layer`), the base weights of the
    adapted layers: W + BA is perturbed through W, since noise on the adapters does nothing while B = 0 (at the
    start of a run) and later only reaches the low-rank span, far below σ · RMS(W)."""
    out, seen = [], set()
    for module in model.modules():
        base = getattr(module, "base_layer", None)
        if hasattr(module, "lora_A") and isinstance(getattr(base, "weight", None), torch.Tensor):
            if id(base.weight) not in seen and base.weight.is_floating_point():
                seen.add(id(base.weight))
                out.append(base.weight)
    return out or trainable_tensors(model)


@torch.no_grad()
def perturb(params: list[torch.nn.Parameter], sigma: float, seed: int) -> list[torch.Tensor]:
    """Add σ · RMS(W) · ε to each tensor W in place (ε from a generator seeded with `seed`, drawn in float32
    on the tensor's device, in parameter order); returns exact copies of the weights before."""
    saved = [p.detach().clone() for p in params]
    for k, p in enumerate(params):
        g = torch.Generator(device=p.device).manual_seed(seed * 100_003 + k)
        rms = p.float().pow(2).mean().sqrt()
        eps = torch.randn(p.shape, generator=g, device=p.device, dtype=torch.float32)
        p.add_((sigma * rms * eps).to(p.dtype))
    return saved


@torch.no_grad()
def restore(params: list[torch.nn.Parameter], saved: list[torch.Tensor]) -> None:
    """Put back the weights `perturb` saved, bit for bit."""
    for p, s in zip(params, saved):
        p.copy_(s)


def distinct_share(batch: RolloutBatch) -> float:
    """Mean over groups of (distinct completion texts / group size)."""
    groups: dict[int, list[str]] = {}
    for g, c in zip(batch.group_index.tolist(), batch.completions):
        groups.setdefault(g, []).append(c)
    return sum(len(set(cs)) / len(cs) for cs in groups.values()) / max(len(groups), 1)


@EXPLORERS.register(
    "param_noise",
    params=ParamNoiseParams,
    paper=papers.PSN_RLVR,
    fidelity="reduced",
    departures=(
        (
            "sigma adapts on the share of distinct completions, not the paper's semantic-diversity and self-certainty "
            "scheduler; sigma is relative to each tensor's RMS"
        ),
        (
            "under LoRA the base weights of the adapted layers are perturbed (the effective weights W + BA), not "
            "the whole model; the TIS pairing (`algorithm.tis_cap`) is warned about, not enforced"
        ),
    ),
)
class ParamNoiseExplorer(Explorer):
    """Parameter-space noise (PSN-RLVR, Bai et al. 2026, arXiv:2602.02555): before a round, every trainable
    tensor W (under LoRA: the base weights of the adapted layers, so the effective weights W + BA move even
    while B = 0; else all float weights) becomes W + σ · RMS(W) · ε, ε ~ N(0, I); the
    round's groups are sampled by this perturbed policy, then the exact weights are put back (a saved copy,
    bit for bit). The noise is fixed for the whole round, so a trajectory is explored consistently rather than
    token by token. The batch's `sampled_logprobs` are the noisy policy's: pair with truncated importance
    sampling, `algorithm.tis_cap` (the paper does), which weights each token by min(π_learner/π_noisy, C).
    The explorer cannot see the algorithm config; it documents the pairing and does not enforce it.

    Choices the paper leaves open or that differ: the per-tensor RMS scale (σ is relative); the noise seed is
    (run seed, round count), so a resumed run draws the same noise; `share` < 1 samples a seeded random
    subset of groups noisy and the rest clean (noisy groups first in the batch). The paper's adaptive scheduler
    (a surrogate of semantic diversity and normalised self-certainty) is replaced by a simple rule: with
    `target_diversity` > 0, σ ← σ · adapt when the share of distinct completions per group is below the
    target, σ ← σ / adapt otherwise, within [sigma_min, sigma_max]. An all-zero tensor gets no noise.
    Memory: one copy of the perturbed weights while sampling.
    Logged: `explore/noise_sigma`, `explore/noisy_groups`, `explore/diversity`.
    """

    off_policy = True

    def __init__(self, ctx: ExplorerContext, params: ParamNoiseParams = ParamNoiseParams()) -> None:
        self.ctx, self.params = ctx, params
        self.sigma, self.rounds = params.sigma, 0
        self.last = {"noise_sigma": params.sigma, "noisy_groups": 0.0, "diversity": float("nan")}

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        rng = draw_rng("param_noise", self.ctx.seed, self.rounds)
        noise_seed = rng.randrange(2**31)
        self.rounds += 1
        groups = len(draw.indices)
        k = groups if self.params.share >= 1.0 else round(self.params.share * groups)
        noisy = sorted(rng.sample(range(groups), k))
        self.last.update(noise_sigma=self.sigma, noisy_groups=float(k))
        params = noise_tensors(self.ctx.policy.model)
        saved = perturb(params, self.sigma, noise_seed)
        try:
            batch = collect_plain(self.ctx.collector, subdraw(draw, noisy), generator) if k else None
        finally:
            restore(params, saved)
        clean = [g for g in range(groups) if g not in set(noisy)]
        rest = collect_plain(self.ctx.collector, subdraw(draw, clean), generator) if clean else None
        parts = [b for b in (batch, rest) if b is not None]
        return parts[0] if len(parts) == 1 else concat_batches(parts)

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        self.last["diversity"] = distinct_share(batch)
        p = self.params
        if p.target_diversity > 0:
            step = p.adapt if self.last["diversity"] < p.target_diversity else 1.0 / p.adapt
            self.sigma = min(max(self.sigma * step, p.sigma_min), p.sigma_max)

    def state_dict(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "rounds": self.rounds, "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.sigma, self.rounds, self.last = state["sigma"], state["rounds"], dict(state["last"])


def subdraw(draw: Draw, groups: list[int]) -> Draw:
    """The draw restricted to positions `groups`."""
    samples = None if draw.samples is None else [draw.samples[g] for g in groups]
    return Draw([draw.indices[g] for g in groups], samples)


# prefix: PrefixRL.


def check_store(per_row: int, max_rows: int) -> None:
    if per_row < 1:
        raise ValueError(f"max_per_row must be >= 1, got {per_row}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")


def check_fracs(lo: float, hi: float) -> None:
    if not 0.0 < lo <= hi < 1.0:
        raise ValueError(f"need 0 < min_frac <= max_frac < 1, got {lo}, {hi}")


@dataclass(frozen=True)
class PrefixParams:
    """PrefixRL: condition part of a group on a prefix of a successful trace."""

    share: float = 0.5
    """Fraction of a group's samples that continue a prefix (at least one when > 0); in [0, 1]."""
    min_frac: float = 0.25
    """Shortest prefix, as a fraction of the trace's tokens; in (0, max_frac]."""
    max_frac: float = 0.75
    """Longest prefix, as a fraction of the trace's tokens; in [min_frac, 1)."""
    threshold: float = 1.0
    """A sample is a success (its completion is kept) when its reward is >= this."""
    field: str = "solution"
    """Row field holding a reference solution text, also used as a trace (rows without it: none; "": off)."""
    max_per_row: int = 4
    """Successful completions kept per row (the oldest leaves first); >= 1."""
    max_rows: int = 10_000
    """Rows with kept completions (the row stored to longest ago leaves first); >= 1."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {self.share}")
        check_fracs(self.min_frac, self.max_frac)
        check_store(self.max_per_row, self.max_rows)


@EXPLORERS.register(
    "prefix",
    params=PrefixParams,
    paper=papers.PREFIXRL,
    fidelity="reduced",
    departures=(
        (
            "prefixes come from the row's reference solution and the policy's own earlier successes (online), not "
            "from offline rejection-sampled traces"
        ),
        "prefixed and plain samples share one group baseline",
    ),
)
class PrefixExplorer(TraceExplorer):
    """PrefixRL (Setlur et al. 2026, arXiv:2601.18795, "Reuse your FLOPs: Scaling RL on Hard Problems by
    Conditioning on Very Off-Policy Prefixes"): rollouts are conditioned on a prefix of a successful
    off-policy trace and completed on-policy; the loss sees only the on-policy continuation. For a drawn row
    with a trace (its reference solution, row field `field`, or a completion of its that earned reward >=
    `threshold` in an earlier round), k = max(1, round(share · n)) of its n samples continue the first
    round(f · len) tokens of one trace, f ~ U[min_frac, max_frac]; the other n − k are sampled from the prompt.
    Forced tokens have `completion_mask` 0 and `sampled_logprobs` 0; rewards see prefix + continuation.
    Prefixed and plain samples of a prompt share one group (the GRPO baseline mixes them).

    Choices the paper leaves open or that differ: the paper builds prefixed problems offline from rejection
    sampling with the base model; here the traces are the policy's own earlier successes, collected online
    (only samples without forced tokens are kept, so a prefix never feeds on itself), plus reference solutions.
    One trace and one f per group (the k prefixed samples share them, and the prompt + prefix prefill); the
    trace uniformly among the row's, f and the trace from an RNG seeded by (run seed, round count), so resume
    is exact. A continuation is cut at max_new_tokens − len(prefix) tokens. A round where no drawn row has a
    trace is exactly the `plain` explorer's. Logged: `explore/prefixed_groups`, `explore/prefixed_samples`,
    `explore/forced_frac` (forced share of the prefixed completions' tokens), `explore/stored`.
    """

    def __init__(self, ctx: ExplorerContext, params: PrefixParams = PrefixParams()) -> None:
        super().__init__(ctx, params, TraceStore(params.max_per_row, params.max_rows))

    def traces(self, row: int) -> list[list[int]]:
        """The row's reference solution (tokenised) then its kept successes."""
        out = []
        text = self.ctx.rows[row].get(self.params.field) if self.params.field else None
        if isinstance(text, str) and text:
            out.append(list(self.ctx.policy.tokenizer(text, add_special_tokens=False)["input_ids"]))
        return out + [t.tokens for t in self.store.get(row)]

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        rng = draw_rng("prefix", self.ctx.seed, self.rounds)
        self.rounds += 1
        p, requests = self.params, []
        for g, (row, n) in enumerate(zip(draw.indices, group_sizes(draw, self.ctx.samples_per_prompt))):
            traces = self.traces(row)
            k = min(n, max(1, round(p.share * n))) if traces and p.share > 0 else 0
            prefix = []
            if k:
                trace = traces[rng.randrange(len(traces))]
                prefix = prefix_of(trace, rng.uniform(p.min_frac, p.max_frac), self.ctx.settings.max_new_tokens)
            k = k if prefix else 0
            requests += [Request(g, row, [], n - k)] if n > k else []
            requests += [Request(g, row, prefix, k)] if k else []
        return self.finish(requests, draw, generator)

    def finish(self, requests: list[Request], draw: Draw, generator: torch.Generator) -> RolloutBatch:
        """The round's batch (the plain collector's when no request has a prefix) and its metrics."""
        forced = [r for r in requests if r.prefix]
        self.last = {"prefixed_groups": float(len({r.group for r in forced})), "stored": float(len(self.store))}
        self.last["prefixed_samples"] = float(sum(r.n for r in forced))
        if not forced:
            self.last["forced_frac"] = 0.0
            return collect_plain(self.ctx.collector, draw, generator)
        batch = sample_with_prefixes(self.ctx, requests, generator)
        lengths = batch.attention_mask.sum(-1) - torch.tensor([len(self.ctx.encoder(q)) for q in batch.prompts])
        prefixed = lengths > batch.completion_mask.sum(-1)  # (N,) rows with forced tokens
        sampled = batch.completion_mask.sum(-1)[prefixed].sum()
        self.last["forced_frac"] = float(1.0 - sampled / lengths[prefixed].sum().clamp(min=1))
        return batch

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        for _, row, trace in on_policy_traces(self.ctx, batch, rewards, valid):
            if trace.reward >= self.params.threshold:
                self.store.add(row, Trace(trace.tokens, reward=trace.reward, finished=trace.finished))


# exit: ExIt exploratory iteration.


@dataclass(frozen=True)
class ExitParams:
    """ExIt: restart groups from partial histories of informative earlier groups."""

    share: float = 0.25
    """Chance that a drawn row with kept histories gets a group restarted from one; in [0, 1]."""
    min_frac: float = 0.25
    """Shortest partial history, as a fraction of the completion's tokens; in (0, max_frac]."""
    max_frac: float = 0.75
    """Longest partial history, as a fraction of the completion's tokens; in [min_frac, 1)."""
    max_per_row: int = 8
    """Completions kept per row (the lowest return variance leaves first); >= 1."""
    max_rows: int = 10_000
    """Rows with kept completions (the row stored to longest ago leaves first); >= 1."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {self.share}")
        check_fracs(self.min_frac, self.max_frac)
        check_store(self.max_per_row, self.max_rows)


def group_variances(batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> dict[int, float]:
    """Population variance of each group's valid rewards, {group: variance} (groups with a valid sample)."""
    out = {}
    for g in batch.group_index.unique().tolist():
        xs = rewards[(batch.group_index == g) & valid]
        if len(xs):
            out[int(g)] = float(xs.double().var(unbiased=False))
    return out


@EXPLORERS.register(
    "exit",
    params=ExitParams,
    paper=papers.EXIT,
    fidelity="reduced",
    departures=(
        (
            "single-turn: groups restart mid-completion from a partial completion; ExIt's self-iteration task (revise "
            "the previous attempt) is not reproduced, only the variance-prioritised buffer"
        ),
    ),
)
class ExitExplorer(TraceExplorer):
    """Exploratory Iteration (ExIt, Jiang, Lupu & Bachrach 2025, arXiv:2509.04575, "Bootstrapping Task Spaces
    for Self-Improvement"): the most informative partial histories the policy produced become new tasks to
    continue from, chosen by the return variance of the group they came from. Here: after each round, every
    fully sampled, valid completion of a group whose valid rewards vary (variance > 0: mixed outcomes) is kept
    for its row with priority = that variance. At collection, a drawn row with kept completions gets, with
    probability `share`, a whole group that starts from prompt + the first round(f · len) tokens of one of them
    (f ~ U[min_frac, max_frac], forced: `completion_mask` 0) and is continued on-policy (loss on the
    continuation only), through the same machinery as `prefix`. ExIt's self-improvement task (revise the
    previous attempt) is absent, so in effect this is `prefix` fed by mixed-outcome groups.

    Choices the paper leaves open or that differ: ExIt's tasks are multi-turn self-improvement steps (revise
    the previous answer); this single-turn form restarts mid-completion instead. The completion is chosen with
    probability proportional to its priority (ExIt prioritises by variance); priorities are not re-scored by
    the groups later started from them; the store keeps the `max_per_row` highest. RNG seeded by (run seed,
    round count). Logged: `explore/restarted_groups`, `explore/stored`.
    """

    def __init__(self, ctx: ExplorerContext, params: ExitParams = ExitParams()) -> None:
        super().__init__(ctx, params, TraceStore(params.max_per_row, params.max_rows, by_priority=True))

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        rng = draw_rng("exit", self.ctx.seed, self.rounds)
        self.rounds += 1
        p, requests = self.params, []
        for g, (row, n) in enumerate(zip(draw.indices, group_sizes(draw, self.ctx.samples_per_prompt))):
            kept, prefix = self.store.get(row), []
            if kept and rng.random() < p.share:
                trace = rng.choices(kept, weights=[t.priority for t in kept])[0]
                prefix = prefix_of(trace.tokens, rng.uniform(p.min_frac, p.max_frac), self.ctx.settings.max_new_tokens)
            requests.append(Request(g, row, prefix, n))
        restarted = [r for r in requests if r.prefix]
        self.last = {"restarted_groups": float(len(restarted)), "stored": float(len(self.store))}
        if not restarted:
            return collect_plain(self.ctx.collector, draw, generator)
        return sample_with_prefixes(self.ctx, requests, generator)

    def observe(self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor) -> None:
        variance = group_variances(batch, rewards, valid)
        for i, row, trace in on_policy_traces(self.ctx, batch, rewards, valid):
            v = variance.get(int(batch.group_index[i]), 0.0)
            if v > 0:
                self.store.add(row, Trace(trace.tokens, reward=trace.reward, finished=trace.finished, priority=v))


# replay: a per-row buffer of successes swapped into all-failed groups.


@dataclass(frozen=True)
class ReplayParams:
    """Success replay into all-failed groups."""

    threshold: float = 1.0
    """A sample is a success when its reward is >= this; a group without one is all-failed."""
    max_per_row: int = 2
    """Successes kept per row (the oldest leaves first); >= 1."""
    max_rows: int = 10_000
    """Rows with kept successes (the row stored to longest ago leaves first); >= 1."""

    def __post_init__(self) -> None:
        check_store(self.max_per_row, self.max_rows)


def widen(batch: RolloutBatch, width: int, pad_id: int) -> None:
    """Right-pad the batch's token tensors to `width` columns, in place (no token-aligned extras allowed)."""
    extra = width - batch.input_ids.shape[1]
    if extra <= 0:
        return
    if batch.extras:
        raise ValueError(f"replay: cannot widen a batch that carries extras ({sorted(batch.extras)})")
    pad = torch.nn.functional.pad
    batch.input_ids = pad(batch.input_ids, (0, extra), value=pad_id)
    batch.attention_mask = pad(batch.attention_mask, (0, extra))
    batch.completion_mask = pad(batch.completion_mask, (0, extra))
    batch.sampled_logprobs = pad(batch.sampled_logprobs, (0, extra))


def components_row(components: torch.Tensor, i: int) -> Optional[list[float]]:
    """Row `i` of the (N, K) reward components, None when there are none."""
    return components[i].tolist() if components.dim() == 2 and components.shape[1] > 0 else None


def put_trace(ctx: ExplorerContext, batch: RolloutBatch, i: int, trace: Trace) -> None:
    """Sequence `i` of `batch` becomes prompt + `trace`, in place: its tokens count as sampled (mask 1) with the
    log-probs recorded when they were sampled."""
    tok = ctx.policy.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    start, c = prompt_length(ctx, batch, i), len(trace.tokens)
    widen(batch, start + c, pad_id)
    batch.input_ids[i, start:] = pad_id
    batch.input_ids[i, start : start + c] = torch.tensor(trace.tokens, dtype=torch.long)
    batch.attention_mask[i] = 0
    batch.attention_mask[i, : start + c] = 1
    batch.completion_mask[i] = 0.0
    batch.completion_mask[i, start : start + c] = 1.0
    batch.sampled_logprobs[i] = 0.0
    batch.sampled_logprobs[i, start : start + c] = torch.tensor(trace.logprobs or [0.0] * c, dtype=torch.float32)
    batch.finished = batch.finished.clone()  # the engine's may be an inference tensor
    batch.finished[i] = trace.finished
    batch.completions[i] = tok.decode(trace.tokens, skip_special_tokens=True)


@EXPLORERS.register(
    "replay",
    params=ReplayParams,
    paper=(papers.RAPO, papers.EAPO_EXPERIENCE),
    fidelity="reduced",
    departures=(
        (
            "RAPO's replay of a stored success into all-failed groups, single-turn, drawing one of the row's latest "
            "successes at random"
        ),
        (
            "EAPO's action-level injection from a prior policy at critical decision points is the `eapo_inject` "
            "explorer (ascent/rollout/experience.py); `replay` replays whole trajectories"
        ),
    ),
)
class ReplayExplorer(TraceExplorer):
    """Success replay (RAPO's replay buffer, Fathom-DeepResearch, Singh et al. 2025, arXiv:2509.24107; experience
    reuse with an importance correction as in Experience-Augmented Policy Optimization, "EAPO-experience", Lu et
    al. 2026, arXiv:2606.30420): keep each row's most recent successful trajectories (reward >= `threshold`)
    with the log-probs recorded when they were sampled; when a drawn prompt's fresh group has no success, one
    of its samples (seeded random pick) is replaced by one of the row's kept successes (seeded random pick),
    its reward copied with it. The replayed tokens enter the loss as sampled tokens (`completion_mask` 1) with
    their recorded log-probs as `sampled_logprobs`, so truncated importance sampling (`algorithm.tis_cap`, pair
    them) corrects for the policy having moved since.

    How it is wired, and what differs: whether a fresh group failed is known only once it is scored, so the swap
    happens in `amend` (the trainer calls it right after scoring, before the prompt sampler, the group filter and
    the advantages see the round) and returns a new batch with new `rewards` / `valid` / `components` (the
    replayed sample's reward components are the ones recorded with it). EAPO-experience injects a
    prior policy's actions at critical decision points within a rollout: that is `eapo_inject`
    (ascent/rollout/experience.py); this explorer replays whole trajectories. RNG seeded by (run seed, round
    count). Logged: `explore/replayed`, `explore/stored`.
    """

    off_policy = True

    def __init__(self, ctx: ExplorerContext, params: ReplayParams = ReplayParams()) -> None:
        super().__init__(ctx, params, TraceStore(params.max_per_row, params.max_rows))
        self.last = {"replayed": 0.0, "stored": 0.0}

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        return collect_plain(self.ctx.collector, draw, generator)

    def amend(
        self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor, components: torch.Tensor
    ) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keep the round's fresh successes, then swap a kept success into each all-failed group (on copies)."""
        fresh = on_policy_traces(self.ctx, batch, rewards, valid)
        if batch.row_index is not None:
            batch, rewards, valid, components = self.replay(batch, rewards, valid, components)
        for i, row, trace in fresh:
            if trace.reward >= self.params.threshold:
                trace.components = components_row(components, i)
                self.store.add(row, trace)
        self.last["stored"] = float(len(self.store))
        return batch, rewards, valid, components

    def replay(
        self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor, components: torch.Tensor
    ) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The round with a kept success swapped into each all-failed group (copies; the inputs untouched)."""
        rng = draw_rng("replay", self.ctx.seed, self.rounds)
        self.rounds += 1
        success = valid & (rewards >= self.params.threshold)  # (N,)
        swaps = []
        for g in batch.group_index.unique().tolist():
            members = (batch.group_index == g).nonzero().squeeze(-1).tolist()
            kept = self.store.get(int(batch.row_index[members[0]]))  # type: ignore[index]
            if kept and not bool(success[members].any()):
                swaps.append((members[rng.randrange(len(members))], kept[rng.randrange(len(kept))]))
        self.last = {"replayed": float(len(swaps))}
        if not swaps:
            return batch, rewards, valid, components
        batch = batch.select(torch.arange(len(batch)))  # a copy: every tensor and list is new
        rewards, valid, components = rewards.clone(), valid.clone(), components.clone()
        for i, trace in swaps:
            put_trace(self.ctx, batch, i, trace)
            rewards[i], valid[i] = trace.reward, True
            if trace.components is not None and components.dim() == 2 and components.shape[1] == len(trace.components):
                components[i] = torch.tensor(trace.components, dtype=components.dtype)
        return batch, rewards, valid, components


# probe: REX-RAG's exploratory probe sampling with a policy correction.


@dataclass(frozen=True)
class ProbeParams:
    """REX-RAG probe rollouts."""

    share: float = 0.25
    """Share of each group sampled by the probe distribution: k = max(1, round(share · n)) samples (0: off)."""
    temperature: float = 1.5
    """The probe's sampling temperature (> the run's: flatter, more exploratory)."""

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"share must be in [0, 1], got {self.share}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


@EXPLORERS.register(
    "probe",
    params=ProbeParams,
    paper=papers.REX_RAG,
    fidelity="reduced",
    departures=(
        (
            "probe samples use a higher temperature instead of exploratory re-prompting, for every group (no dead-end "
            "detection)"
        ),
    ),
)
class ProbeExplorer(Explorer):
    """REX-RAG mixed sampling (Jiang et al. 2025, arXiv:2508.08149): part of each group comes from an
    exploratory probe distribution, the rest from the policy, and an importance weight removes the probe's
    distribution-shift bias. Here the probe is the policy at a higher temperature T_probe (`temperature`): k of
    the n samples of every group are drawn from softmax(z / T_probe), and their `sampled_logprobs` are that
    distribution's, so the learner's truncated importance weight min(pi_theta / pi_probe, C)
    (`algorithm.tis_cap`, pair them) is the policy correction. Probe and policy samples share one group and
    one baseline.

    Choices the abstract leaves open: REX-RAG's probes are rollouts re-prompted with an exploratory hint after
    a dead end in retrieval; on single-turn tasks there is no dead end to detect, so every group gets its k
    probe samples, and the probe changes the temperature rather than the prompt (the importance weight then
    needs no second forward). Logged: `explore/probe_samples`.
    """

    off_policy = True

    def __init__(self, ctx: ExplorerContext, params: ProbeParams = ProbeParams()) -> None:
        self.ctx, self.params = ctx, params
        self.last: dict[str, float] = {}

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        p, requests = self.params, []
        for g, (row, n) in enumerate(zip(draw.indices, group_sizes(draw, self.ctx.samples_per_prompt))):
            k = min(n, max(1, round(p.share * n))) if p.share > 0 else 0
            requests += [Request(g, row, [], n - k)] if n > k else []
            requests += [Request(g, row, [], k, temperature=p.temperature)] if k else []
        self.last = {"probe_samples": float(sum(r.n for r in requests if r.temperature is not None))}
        if not self.last["probe_samples"]:
            return collect_plain(self.ctx.collector, draw, generator)
        return sample_with_prefixes(self.ctx, requests, generator)


# branch: Spark's strategic branching at critical states.


@dataclass(frozen=True)
class BranchParams:
    """Spark branching: roots, then branches from each root's least certain token."""

    root_share: float = 0.5
    """Share of each group sampled as roots: r = max(1, round(root_share · n)); the other n − r branch; in [0, 1]."""
    min_prefix: int = 1
    """Shortest shared prefix: a critical position earlier than this is moved to it (never past a root's last
    token); >= 0."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.root_share <= 1.0:
            raise ValueError(f"root_share must be in [0, 1], got {self.root_share}")
        if self.min_prefix < 0:
            raise ValueError(f"min_prefix must be >= 0, got {self.min_prefix}")


def branch_point(logprobs: torch.Tensor, length: int, min_prefix: int) -> int:
    """Where a root of `length` sampled tokens with sampling log-probs `logprobs` (L,) branches: the position of
    its lowest log-prob token, its last token excluded (the first such on ties), moved up to `min_prefix` and
    never past length − 1; 0 for a one-token root. The branch's forced prefix is the root's tokens before it.

    >>> lp = torch.tensor([-0.1, -2.0, -0.5, -9.0])
    >>> branch_point(lp, 4, 1), branch_point(lp, 4, 3), branch_point(lp, 4, 9), branch_point(lp, 1, 1)
    (1, 3, 3, 0)
    """
    if length < 2:
        return 0
    return min(max(int(torch.argmin(logprobs[: length - 1])), min_prefix), length - 1)


def round_robin(branches: int, roots: int) -> list[int]:
    """Branches per root when branch b goes to root b mod `roots`.

    >>> round_robin(5, 2), round_robin(0, 3)
    ([3, 2], [0, 0, 0])
    """
    return [branches // roots + (j < branches % roots) for j in range(roots)]


@EXPLORERS.register(
    "branch",
    params=BranchParams,
    paper=papers.SPARK,
    fidelity="reduced",
    departures=(
        (
            "single-turn: the critical state is each root's lowest-log-prob token, not the paper's `<explore>`-tagged "
            "states"
        ),
        "one branching level; one group baseline instead of a tree objective",
    ),
)
class BranchExplorer(Explorer):
    """Spark (Wu et al. 2026, arXiv:2601.20209, "Spark: Strategic Policy-Aware Exploration via Dynamic Branching
    for Long-Horizon Agentic Learning"): instead of n independent rollouts, sample a few roots and branch them only
    at critical decision states, found from the agent's own signals, so the budget buys samples at the decisions
    that matter. Here, for a drawn prompt with group size n: r = max(1, round(root_share · n)) roots are sampled
    from the prompt (one engine call per distinct r); in each root the critical position c is its sampled token
    with the lowest sampling log-prob (last token excluded; c ← min(max(c, min_prefix), len − 1)); the n − r
    branches are spread round-robin over the roots and each continues its root's tokens before c (forced:
    `completion_mask` 0, `sampled_logprobs` 0, since they are already in the loss through the root), resampling
    from the critical token on-policy (mask 1, its sampling log-probs). Roots and branches share one group and one
    baseline; rewards see prefix + continuation.

    Choices that differ from the paper (multi-turn agentic; this is the single-turn reading): Spark branches at
    states the agent marks with an `<explore>` tag in its reasoning, grows a tree of turns under a budget and
    trains with a tree-based policy optimisation; here the uncertainty signal is each token's sampling log-prob
    (the only per-token signal the engine returns; entropy would need an extra forward pass), there is one
    branching level, the budget is the group size, and the learner sees a plain group (branches are correlated
    with their root; the group baseline treats them as independent samples). The branch starts before the least
    likely token, so it redraws that very decision. Branches of one root share its prompt + prefix prefill; a
    branch is cut at max_new_tokens − len(prefix) tokens. A round with no branch (n = 1, root_share = 1) is
    exactly `plain`'s. No random choice of its own: deterministic given the generator; the state is a round count.
    Related: IIB-LPO (Deng et al. 2026, arXiv:2601.05870) also branches at high-entropy states, diversifying the
    branches with injected latent codes (explorer `iib`, ascent/rollout/info_branch.py, through `branch_points`).
    Logged: `explore/branches` (branch samples), `explore/branch_point_mean` (their mean forced prefix length).
    """

    def __init__(self, ctx: ExplorerContext, params: BranchParams = BranchParams()) -> None:
        self.ctx, self.params = ctx, params
        self.rounds = 0
        self.last: dict[str, float] = {}

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        self.rounds += 1
        ctx, p, sizes = self.ctx, self.params, group_sizes(draw, self.ctx.samples_per_prompt)
        roots = [
            Request(g, row, [], max(1, round(p.root_share * n))) for g, (row, n) in enumerate(zip(draw.indices, sizes))
        ]
        self.last = {"branches": 0.0, "branch_point_mean": 0.0}
        if all(r.n == n for r, n in zip(roots, sizes)):
            return collect_plain(ctx.collector, draw, generator)
        prompt_ids = [ctx.encoder(ctx.rows[row]["prompt"]) for row in draw.indices]  # one per group
        root_pieces = sample_pieces(ctx, roots, prompt_ids, generator)
        branches = []
        points = self.branch_points(prompt_ids, root_pieces)
        for root, n, (tokens, _, _, _), cs in zip(roots, sizes, root_pieces, points):
            for j, k in enumerate(round_robin(n - root.n, root.n)):
                if k:
                    branches.append(Request(root.group, root.row, tokens[j, : cs[j]].tolist(), k))
        branch_ids = [prompt_ids[b.group] for b in branches]
        requests, ids = roots + branches, prompt_ids + branch_ids
        pieces = root_pieces + self.sample_branches(branches, branch_ids, generator)
        order = sorted(range(len(requests)), key=lambda i: requests[i].group)  # stable: a root, then its branches
        sampled = sum(b.n for b in branches)
        self.last.update(
            {
                "branches": float(sampled),
                "branch_point_mean": sum(b.n * len(b.prefix) for b in branches) / sampled,
            }
        )
        return assemble_with_prefix(
            ctx, [requests[i] for i in order], [ids[i] for i in order], [pieces[i] for i in order]
        )

    def sample_branches(
        self, branches: list[Request], branch_ids: list[list[int]], generator: torch.Generator
    ) -> list[Piece]:
        """The branches' samples (`sample_pieces`); subclasses may sample them from another distribution."""
        return sample_pieces(self.ctx, branches, branch_ids, generator)

    def branch_points(self, prompt_ids: list[list[int]], root_pieces: list[Piece]) -> list[list[int]]:
        """Per group (prompt ids, its roots' samples), each root's forced prefix length (`branch_point`);
        subclasses choose another critical position."""
        m = self.params.min_prefix
        return [[branch_point(lp[j], int(n[j]), m) for j in range(len(n))] for _, lp, n, _ in root_pieces]

    def state_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.rounds, self.last = state["rounds"], dict(state["last"])


# edge: EDGE's experience-conditioned half-groups.


@dataclass(frozen=True)
class EdgeExplorerParams:
    """EDGE: half of each group sees an experience from a co-evolving bank; the marginal gain decides."""

    share: float = 0.5
    """Share of a group sampled with the experience in the prompt: k = max(1, round(share · n)), at most n − 1."""
    threshold: float = 1.0
    """A sample is a success when its reward is >= this (new bank entries come from successes)."""
    experiences: str = ""
    """A text file of seed experiences, one per line (guidance written by hand); "": the bank starts empty."""
    template: str = "{experience} {prompt}"
    """How an experience enters the prompt; must contain {experience} and {prompt}."""
    bank_size: int = 64
    """Experiences kept; beyond it the one with the lowest mean gain (the oldest on ties) leaves; >= 1."""
    learn: bool = True
    """Grow the bank from the policy's own successes on rows it also failed (worked examples of failure modes)."""
    min_uses: int = 4
    """An experience is pruned once used this many times with a mean marginal gain <= `prune_below`; >= 1."""
    prune_below: float = 0.0
    """Mean marginal gain at or below which a used experience is pruned."""

    def __post_init__(self) -> None:
        if not 0.0 < self.share < 1.0:
            raise ValueError(f"share must be in (0, 1), got {self.share}")
        if "{experience}" not in self.template or "{prompt}" not in self.template:
            raise ValueError(f"template must contain {{experience}} and {{prompt}}, got {self.template!r}")
        if self.bank_size < 1 or self.min_uses < 1:
            raise ValueError(f"bank_size and min_uses must be >= 1, got {self.bank_size}, {self.min_uses}")


@dataclass
class Experience:
    """A bank entry: guidance text, the row it came from (-1: a seed), and its record of marginal gains."""

    text: str
    row: int = -1
    uses: int = 0
    gain_sum: float = 0.0
    born: int = 0
    """The round it entered the bank (ties in eviction: the oldest leaves)."""

    @property
    def gain(self) -> float:
        return self.gain_sum / self.uses if self.uses else 0.0


def marginal_gains(
    rewards: torch.Tensor, valid: torch.Tensor, group_index: torch.Tensor, conditioned: torch.Tensor
) -> dict[int, float]:
    """Per group with valid samples in both halves: mean reward of its experience-conditioned samples minus
    mean reward of its experience-free ones (EDGE's marginal gain, from the group's own samples).

    >>> r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]); v = torch.ones(6, dtype=torch.bool)
    >>> g = torch.tensor([0, 0, 0, 1, 1, 1]); c = torch.tensor([False, False, True, False, True, True])
    >>> marginal_gains(r, v, g, c)
    {0: 0.5, 1: -0.5}
    """
    out = {}
    for g in group_index.unique().tolist():
        cond = (group_index == g) & valid & conditioned
        free = (group_index == g) & valid & ~conditioned
        if cond.any() and free.any():
            out[g] = float(rewards[cond].mean() - rewards[free].mean())
    return out


@EXPLORERS.register(
    "edge",
    params=EdgeExplorerParams,
    paper=papers.EDGE,
    fidelity="reduced",
    departures=(
        "the experience bank grows from worked examples of the policy's own successes instead of an LLM reflector",
        (
            "admitted conditioned samples stay in the RL group as off-policy samples (corrected only by "
            "`algorithm.tis_cap`)"
        ),
    ),
)
class EdgeExplorer(Explorer):
    """EDGE: part of each group sees an experience in its prompt, kept where its marginal gain is positive.

    EDGE (Experience-Distillation for Guided Exploration; arXiv id not found, code github.com/xvolcano02/EDGE;
    docs/references.md): each group is
    split into an experience-conditioned part (k = max(1, round(share · n)) samples whose prompt carries an
    experience e from the bank, `template`) and an experience-free part (n − k samples of the plain prompt).
    Once scored (`amend`), the group's marginal gain Δ = mean r(conditioned) − mean r(free) is estimated from
    these same samples (no extra sampling). Δ > 0: the experience is admitted, and for each free sample y the
    policy's log-probs with the experience in context, log π(y_t | e, x), are computed without grad and
    recorded (`RolloutBatch.extras`) as the target of the `edge` loss's reverse KL on the policy's own samples;
    the conditioned samples stay in the group with the experience cut out of their prompt (their
    `sampled_logprobs` are the conditioned distribution's: pair with `algorithm.tis_cap`). Δ <= 0: the
    conditioned samples leave the loss (`valid` False) and nothing is distilled.

    The experience bank co-evolves: seed entries from `experiences` (a file, one per line); with `learn`, a
    success on a row whose group also failed becomes a worked example "prompt + completion" (the small-scale
    reading of EDGE's reflector, which writes guidance from failure modes with an LLM; none here), never shown
    for its own row (that would be the answer); an entry used `min_uses` times with mean Δ <= `prune_below` is
    pruned, and a full bank drops its lowest-gain entry. Choices: one experience per group, a seeded random
    pick (run seed, round count); groups of size 1, or with no usable entry, are sampled plain. Use with
    `algorithm.loss=edge`. Logged: `explore/edge_conditioned`, `edge_admitted`, `edge_gain_mean`, `edge_bank`.
    """

    off_policy = True

    def __init__(self, ctx: ExplorerContext, params: EdgeExplorerParams = EdgeExplorerParams()) -> None:
        self.ctx, self.params = ctx, params
        self.rounds = 0
        self.bank: list[Experience] = []
        if params.experiences:
            with open(params.experiences, encoding="utf-8") as f:
                self.bank = [Experience(line.strip()) for line in f if line.strip()][: params.bank_size]
        self.used: dict[int, Experience] = {}  # group -> the experience its conditioned samples saw (last round)
        self.last: dict[str, float] = {}

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        rng = draw_rng("edge", self.ctx.seed, self.rounds)
        self.rounds += 1
        ctx, p = self.ctx, self.params
        requests, ids, conditioned, self.used = [], [], [], {}
        for g, (row, n) in enumerate(zip(draw.indices, group_sizes(draw, ctx.samples_per_prompt))):
            prompt = ctx.rows[row]["prompt"]
            options = [e for e in self.bank if e.row != row]
            if n < 2 or not options:
                requests, ids, conditioned = (
                    requests + [Request(g, row, [], n)],
                    ids + [ctx.encoder(prompt)],
                    [*conditioned, False],
                )
                continue
            k = min(n - 1, max(1, round(p.share * n)))
            e = self.used[g] = options[rng.randrange(len(options))]
            requests += [Request(g, row, [], n - k), Request(g, row, [], k)]
            ids += [ctx.encoder(prompt), ctx.encoder(p.template.format(experience=e.text, prompt=prompt))]
            conditioned += [False, True]
        pieces = sample_pieces(ctx, requests, ids, generator)
        plain = [ctx.encoder(ctx.rows[r.row]["prompt"]) for r in requests]
        batch = assemble_with_prefix(ctx, requests, plain, pieces)  # the experience is cut out of every prompt
        flags = torch.tensor([c for c, r in zip(conditioned, requests) for _ in range(r.n)], dtype=torch.bool)  # (N,)
        batch.extras.update({EDGE_CONDITIONED: flags, EDGE_DISTIL: torch.zeros(len(batch))})
        batch.extras[EDGE_TEACHER] = torch.zeros_like(batch.sampled_logprobs)  # (N, T), filled in `amend`
        self.last = {"edge_conditioned": float(flags.sum()), "edge_bank": float(len(self.bank))}
        return batch

    def amend(
        self, batch: RolloutBatch, rewards: torch.Tensor, valid: torch.Tensor, components: torch.Tensor
    ) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Estimate each group's marginal gain; admitted groups get their free samples' distillation targets,
        the others lose their conditioned samples; the bank records the gains and learns (on copies)."""
        cond = batch.extras[EDGE_CONDITIONED]
        gains = marginal_gains(rewards, valid, batch.group_index, cond)
        batch, valid = batch.select(torch.arange(len(batch))), valid.clone()
        admitted = [g for g, d in gains.items() if d > 0 and g in self.used]
        for g in self.used:
            rows = batch.group_index == g
            if g not in admitted:
                valid[rows & cond] = False  # a conditioned sample whose experience did not help leaves the loss
        distil = torch.isin(batch.group_index, torch.tensor(admitted, dtype=torch.long)) & ~cond & valid  # (N,)
        batch.extras[EDGE_DISTIL] = distil.float()
        batch.extras[EDGE_TEACHER] = self.conditioned_logprobs(batch, distil)
        self.update_bank(batch, rewards, valid, cond, gains)
        d = [gains[g] for g in self.used if g in gains]
        self.last.update(edge_admitted=float(len(admitted)), edge_gain_mean=sum(d) / len(d) if d else 0.0)
        self.last["edge_bank"] = float(len(self.bank))
        return batch, rewards, valid, components

    @torch.no_grad()
    def conditioned_logprobs(self, batch: RolloutBatch, distil: torch.Tensor) -> torch.Tensor:
        """(N, T) log π(y_t | e, x) of the sampled tokens of the rows in `distil`, at the batch's positions
        (the policy's forward on experience + prompt + completion, at the sampling temperature); 0 elsewhere."""
        ctx, out = self.ctx, torch.zeros_like(batch.sampled_logprobs)
        rows = distil.nonzero().squeeze(-1).tolist()
        if not rows:
            return out
        seqs, starts = [], []
        for i in rows:
            row, start, end = int(batch.row_index[i]), prompt_length(ctx, batch, i), int(batch.attention_mask[i].sum())
            text = self.params.template.format(
                experience=self.used[int(batch.group_index[i])].text, prompt=ctx.rows[row]["prompt"]
            )
            prefix = ctx.encoder(text)
            seqs.append(prefix + batch.input_ids[i, start:end].tolist())
            starts.append((len(prefix), start, end - start))
        width = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        for j, s in enumerate(seqs):
            ids[j, : len(s)], att[j, : len(s)] = torch.tensor(s), 1
        model = ctx.policy.model
        model.eval()
        dev = next(model.parameters()).device
        lp = token_logprobs(model, ids.to(dev), att.to(dev), ctx.settings.temperature or 1.0).float().cpu()  # (n, W)
        for j, (i, (cs, bs, c)) in enumerate(zip(rows, starts)):
            out[i, bs : bs + c] = lp[j, cs : cs + c]
        return out

    def update_bank(
        self,
        batch: RolloutBatch,
        rewards: torch.Tensor,
        valid: torch.Tensor,
        cond: torch.Tensor,
        gains: dict[int, float],
    ) -> None:
        """Record each used experience's gain, prune the unhelpful ones, and (`learn`) add worked examples."""
        p = self.params
        for g, e in self.used.items():
            if g in gains:
                e.uses, e.gain_sum = e.uses + 1, e.gain_sum + gains[g]
        self.bank = [e for e in self.bank if not (e.uses >= p.min_uses and e.gain <= p.prune_below)]
        if not p.learn or batch.row_index is None:
            return
        success = valid & (rewards >= p.threshold)
        for g in batch.group_index.unique().tolist():
            members = (batch.group_index == g).nonzero().squeeze(-1)
            free_failed = bool((valid[members] & ~success[members] & ~cond[members]).any())
            wins = [int(i) for i in members if bool(success[i])]
            if free_failed and wins:
                i, row = wins[0], int(batch.row_index[wins[0]])
                text = batch.prompts[i] + batch.completions[i]
                if all(e.text != text for e in self.bank):
                    self.bank.append(Experience(text, row=row, born=self.rounds))
        while len(self.bank) > p.bank_size:
            self.bank.remove(min(self.bank, key=lambda e: (e.gain, e.born)))

    def state_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "bank": [asdict(e) for e in self.bank], "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.rounds, self.last = state["rounds"], dict(state["last"])
            self.bank = [Experience(**e) for e in state["bank"]]
