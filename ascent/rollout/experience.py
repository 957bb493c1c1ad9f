"""Experience-Augmented Policy Optimization's action-level injection (`eapo_inject`).

EAPO (Lu, Huang, Wu, Yang, Li, Ma, Wei, Wang, Wang & Zhou 2026, "Experience Augmented Policy Optimization for LLM
Reasoning", arXiv:2606.30420) reuses experience not as fixed trajectories (that is `replay`) but as an
action-level prior: a prior RL-optimised policy μ whose actions are injected into the current policy's rollouts
at critical decision points, with an adapted importance-sampling correction. Here, for each drawn prompt with group
size n, k = round(share · n) samples are experience-augmented: they are sampled token by token from the current
policy π_θ, except at a critical decision point, a position whose entropy under π_θ (at the sampling temperature)
is at least `entropy_threshold` nats, where the token is drawn from μ instead (at most `max_injections` per sample).
Each token's `sampled_logprobs` is the log-prob of the distribution that drew it (μ's at injected tokens, π_θ's
elsewhere), so the learner's truncated importance weight min(π_θ / behaviour, C) (`algorithm.tis_cap`, pair them)
is the correction: a ratio π_θ(a) / μ(a) at injected actions, 1 elsewhere. The other n − k samples are the
policy's own; all n share one group and one baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ascent import papers
from ascent.data.samplers import Draw
from ascent.rollout.explorers import (
    EXPLORERS,
    Explorer,
    ExplorerContext,
    Piece,
    Request,
    assemble_with_prefix,
    collect_plain,
    group_sizes,
    sample_pieces,
)
from ascent.rollout.types import RolloutBatch, SamplingSettings


@dataclass(frozen=True)
class EapoInjectParams:
    """EAPO: a prior policy's actions injected at the current policy's high-entropy decisions."""

    prior: str = ""
    """The prior policy: a Hugging Face model folder with the policy's tokenizer (an earlier RL run's checkpoint)."""
    share: float = 0.5
    """Share of each group sampled with injection: k = round(share · n) samples, at least 1; in (0, 1]."""
    entropy_threshold: float = 0.5
    """A position is a critical decision point when π_θ's entropy there is >= this (nats); > 0."""
    max_injections: int = 4
    """Injected actions per sample at most; >= 1."""

    def __post_init__(self) -> None:
        if not self.prior:
            raise ValueError(
                "eapo_inject needs prior=PATH: a Hugging Face model folder of an earlier RL-trained policy"
            )
        if not 0 < self.share <= 1 or not self.entropy_threshold > 0 or self.max_injections < 1:
            raise ValueError(
                f"need share in (0, 1], entropy_threshold > 0 and max_injections >= 1; got {self.share}, "
                f"{self.entropy_threshold}, {self.max_injections}"
            )


def _last_logits(model: torch.nn.Module, rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, V) float32 next-token logits after each row (left padding, one forward)."""
    dev = next(model.parameters()).device
    w = max(len(r) for r in rows)
    ids = torch.full((len(rows), w), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, w - len(r) :], att[i, w - len(r) :] = torch.tensor(r), 1
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids.to(dev), attention_mask=att.to(dev), position_ids=pos.to(dev)).logits[:, -1]
    return out.float().cpu()


@torch.no_grad()
def inject_sample(
    policy: torch.nn.Module,
    prior: torch.nn.Module,
    prompts: list[list[int]],
    s: SamplingSettings,
    threshold: float,
    max_injections: int,
    generator: torch.Generator,
) -> tuple[Piece, torch.Tensor]:
    """One experience-augmented sample per prompt: token t comes from the prior μ when π_θ's entropy at t is >=
    `threshold` and the sample has had fewer than `max_injections` injections, else from π_θ (temperature
    `s.temperature`, no top-k/top-p: a toy-scale sampler, full forward per step). Returns the piece (tokens,
    behaviour log-probs, lengths with EOS, finished) and an (B, L) bool mask of the injected positions."""
    rows = [list(p) for p in prompts]
    n, width, temp = len(rows), s.max_new_tokens, s.temperature or 1.0
    tokens = torch.full((n, width), s.pad_id, dtype=torch.long)
    logps = torch.zeros((n, width))
    injected = torch.zeros((n, width), dtype=torch.bool)
    lengths = torch.zeros(n, dtype=torch.long)
    finished = torch.zeros(n, dtype=torch.bool)
    used = [0] * n
    for t in range(width):
        live = [b for b in range(n) if not finished[b]]
        if not live:
            break
        lp_pi = torch.log_softmax(_last_logits(policy, [rows[b] for b in live], s.pad_id) / temp, -1)
        entropy = -(lp_pi.exp() * lp_pi.clamp(min=-1e4)).sum(-1)
        lp_mu = torch.log_softmax(_last_logits(prior, [rows[b] for b in live], s.pad_id) / temp, -1)
        for i, b in enumerate(live):
            inject = bool(entropy[i] >= threshold) and used[b] < max_injections
            lp = lp_mu[i] if inject else lp_pi[i]
            tok = int(torch.multinomial(lp.exp(), 1, generator=generator))
            tokens[b, t], logps[b, t], injected[b, t] = tok, float(lp[tok]), inject
            used[b] += int(inject)
            lengths[b] = t + 1
            rows[b].append(tok)
            if tok == s.eos_id and not s.ignore_eos:
                finished[b] = True
    return (tokens, logps, lengths, finished), injected


@EXPLORERS.register(
    "eapo_inject",
    params=EapoInjectParams,
    paper=papers.EAPO_EXPERIENCE,
    fidelity="reduced",
    departures=(
        (
            "critical decision points are the current policy's high-entropy tokens (a threshold in nats); the prior's "
            "action is sampled there, single-turn; the adapted IS is the learner's truncated importance weight "
            "against the recorded behaviour log-probs (pair with algorithm.tis_cap)"
        ),
        "a toy-scale sampler (full forward of both models per token, no top-k/top-p) for the augmented samples",
    ),
)
class EapoInjectExplorer(Explorer):
    """EAPO's experience-augmented rollouts (Lu et al. 2026, arXiv:2606.30420): k = round(share · n) samples of
    every group draw the prior policy's action wherever the current policy's entropy is >= `entropy_threshold`
    (see the module docstring); their tokens' `sampled_logprobs` are the behaviour's (μ at injected actions).
    Logged: `explore/injected` (injected actions this round), `explore/augmented` (augmented samples),
    `explore/injected_per_sample`."""

    off_policy = True

    def __init__(self, ctx: ExplorerContext, params: EapoInjectParams) -> None:
        from ascent.policy.model import load_hf

        self.ctx, self.params = ctx, params
        try:
            self.prior = load_hf(params.prior).model.eval()
        except (OSError, ValueError) as err:
            raise ValueError(f"eapo_inject: cannot load prior={params.prior!r}: {str(err).splitlines()[0]}") from None
        self.prior.to(next(ctx.policy.model.parameters()).device)
        self.last: dict[str, float] = {}
        self.last_injected: torch.Tensor = torch.zeros(0, 0, dtype=torch.bool)

    def collect(self, draw: Draw, generator: torch.Generator) -> RolloutBatch:
        ctx, p = self.ctx, self.params
        sizes = group_sizes(draw, ctx.samples_per_prompt)
        ks = [min(n, max(1, round(p.share * n))) for n in sizes]
        if not any(ks):
            return collect_plain(ctx.collector, draw, generator)
        prompt_ids = [ctx.encoder(ctx.rows[row]["prompt"]) for row in draw.indices]
        own = [Request(g, row, [], n - k) for g, (row, n, k) in enumerate(zip(draw.indices, sizes, ks)) if n > k]
        own_ids = [prompt_ids[r.group] for r in own]
        own_pieces = sample_pieces(ctx, own, own_ids, generator) if own else []
        model = ctx.policy.model
        model.eval()
        flat = [prompt_ids[g] for g, k in enumerate(ks) for _ in range(k)]
        (tokens, logps, lengths, finished), injected = inject_sample(
            model, self.prior, flat, ctx.settings, p.entropy_threshold, p.max_injections, generator
        )
        aug, aug_pieces, start = [], [], 0
        for g, (row, k) in enumerate(zip(draw.indices, ks)):
            rows = slice(start, start + k)
            aug.append(Request(g, row, [], k))
            aug_pieces.append((tokens[rows], logps[rows], lengths[rows], finished[rows]))
            start += k
        requests, ids, pieces = own + aug, own_ids + [prompt_ids[r.group] for r in aug], own_pieces + aug_pieces
        order = sorted(range(len(requests)), key=lambda i: requests[i].group)  # stable: own samples first
        self.last_injected = injected
        count = float(injected.sum())
        self.last = {"injected": count, "augmented": float(len(flat)), "injected_per_sample": count / len(flat)}
        return assemble_with_prefix(
            ctx, [requests[i] for i in order], [ids[i] for i in order], [pieces[i] for i in order]
        )

    def state_dict(self) -> dict[str, Any]:
        return {"last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.last = dict(state["last"])
