"""GUI-Libra's action-aware supervision (Yang et al. 2026, arXiv:2602.22190), the token-reweighting half: in the
warm start's NLL, imitated tokens inside an action span weigh `warmstart.action_weight` times as much as the
reasoning tokens around them, so a long rationale does not drown the few tokens that act:

    L = ( sum_{reasoning t} -log pi(t) + w sum_{action t} -log pi(t) ) / (imitated tokens),

w = `warmstart.action_weight` (1: plain SFT). An action span is a `<tool_call>...</tool_call>` or `<answer>...</answer>`
block, tags included (`ACTION_TAGS`); a token counts as action when any of its characters lies in one. The other
half of the paper's action-aware SFT, mixing reasoning-then-action with direct-action demonstrations, is the task's
data (search_world: `oracle_quote` makes the oracle quote its evidence before the answer).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ascent.rollout.types import RolloutBatch

ACTION_TAGS = (("<tool_call>", "</tool_call>"), ("<answer>", "</answer>"))
"""(open, close) of the spans that act."""

_SPAN = re.compile("|".join(f"{re.escape(a)}.*?(?:{re.escape(b)}|$)" for a, b in ACTION_TAGS), re.DOTALL)


def action_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) character spans of the action blocks of `text` (an unclosed block runs to the end).

    >>> action_spans("I read it. <answer>Velmor</answer> done"), action_spans("<tool_call>{}")
    ([(11, 34)], [(0, 13)])
    """
    return [m.span() for m in _SPAN.finditer(text)]


def action_token_flags(tokenizer: Any, ids: list[int]) -> list[bool]:
    """Whether each of `ids` (one contiguous run of imitated tokens) has a character inside an action span of their
    decoded text (each token's characters: the growth of the decoded prefix)."""
    ends, text = [], ""
    for i in range(len(ids)):
        text = tokenizer.decode(ids[: i + 1], skip_special_tokens=False)
        ends.append(len(text))
    spans = action_spans(text)
    flags, start = [], 0
    for end in ends:
        flags.append(any(a < end and start < b for a, b in spans) if end > start else False)
        start = end
    return flags


def action_weights(batch: RolloutBatch, tokenizer: Any, weight: float) -> torch.Tensor:
    """(N, T) per-token NLL weights: 0 off the imitated tokens (`completion_mask`), `weight` on imitated action
    tokens, 1 on the other imitated tokens; each contiguous run of imitated tokens (an agent turn) is decoded alone."""
    mask = batch.completion_mask
    out = mask.clone().float()
    if weight == 1.0:
        return out
    for i in range(mask.shape[0]):
        pos = torch.nonzero(mask[i] > 0).flatten().tolist()
        runs: list[list[int]] = []
        for p in pos:
            if runs and p == runs[-1][-1] + 1:
                runs[-1].append(p)
            else:
                runs.append([p])
        for run in runs:
            flags = action_token_flags(tokenizer, batch.input_ids[i, run].tolist())
            for p, f in zip(run, flags):
                if f:
                    out[i, p] = weight
    return out
