"""SOAR's two tagged streams with per-stream credit: `algorithm.advantage=soar` (SOurce-Aware Reinforcement
learning for search agents; authors and arXiv id not found, docs/references.md).

SOAR's Source-Aware Workflow splits the agent's reasoning into two parallel, tagged streams, external evidence
(E_ext, what the retrieved documents say) and internal knowledge (E_int, what the model knows itself), and its
Source-Consistent Reward scores each against its declared source, so that credit can go to each stream
separately. The paper's formula is not published; this is ascent's reading, on the search world's agent format:

- the agent writes `<external>...</external>` and `<internal>...</internal>` anywhere in its turns (next to its
  `<answer>` and its `<source>` tag, which the sequence reward `source_consistency` scores);
- stream rewards, from the words (SQuAD-normalised) of every block of a stream in the episode and the words of
  every observation the agent was shown (search results and opened documents):
      r_ext = share of E_ext's words that occur in what the agent was shown (retrieved evidence is grounded;
              the rest is fabricated evidence),
      r_int = 1 − share of E_int's words that occur in what it was shown (knowledge that restates the
              retrieved documents is evidence under the wrong tag);
  a sample without a stream has no value for it (its tokens take no stream credit);
- per-stream credit: A_t = A_i + weight · z_s(i) on the tokens inside stream s's blocks, A_t = A_i elsewhere,
  A_i the GRPO advantage of the run's reward and z_s(i) = (r_s(i) − mean_g r_s) / (std_g r_s + eps), the group
  statistics over the samples of group g that have stream s (0 when fewer than two have it, or all are equal).

`stream_rewards` and `stream_token_labels` are the pure parts (tests/algorithms/test_soar.py).
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, _grpo_seq, group_moments
from ascent.algorithms.state import PieceState
from ascent.algorithms.types import AdvantageInput

STREAMS = ("external", "internal")
_BLOCK = {s: re.compile(rf"<{s}>(.*?)</{s}>", re.DOTALL | re.IGNORECASE) for s in STREAMS}
EXT, INT, LABELS = "soar_ext", "soar_int", "soar_stream"
"""The extras `SoarState` adds: (N,) r_ext and r_int (NaN: no such stream), (N, T) stream of each token
(0: none, 1: external, 2: internal)."""


def normalize(text: str) -> str:
    """SQuAD-style word normalisation, the search world's (`ascent.envs.search_world.normalize`; the algorithms
    layer may not import the environments): lower case, punctuation to spaces, articles dropped.

    >>> normalize("  The Silthar-Labs. ")
    'silthar labs'
    """
    text = re.sub(rf"[{re.escape(string.punctuation)}]", " ", text.lower())
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def stream_text(texts: list[str], stream: str) -> Optional[str]:
    """The contents of every `<stream>...</stream>` block in the texts, joined; None when there is none.

    >>> stream_text(["<external>Velmor was born in Kadran</external> x", "<external>1950</external>"], "external")
    'Velmor was born in Kadran 1950'
    """
    found = [m.strip() for t in texts for m in _BLOCK[stream].findall(t or "")]
    return " ".join(found) if found else None


def grounded_share(text: str, shown: str) -> float:
    """Share of the words of `text` (after `normalize`) that occur in `shown`; 0 for a text without words.

    >>> grounded_share("Velmor was born in Kadran", "[doc-3] Velmor. Velmor was born in Kadran in 1950.")
    1.0
    >>> grounded_share("the capital is Zorbia", "Kadran is the capital of Lumia.")
    0.6666666666666666
    """
    words, seen = normalize(text).split(), set(normalize(shown).split())
    return sum(w in seen for w in words) / len(words) if words else 0.0


def stream_rewards(turn_texts: list[str], observations: list[str]) -> tuple[Optional[float], Optional[float]]:
    """(r_ext, r_int) of one episode (module docstring); None for a stream the agent did not write."""
    shown = " ".join(o for o in observations if o)
    ext, inner = stream_text(turn_texts, "external"), stream_text(turn_texts, "internal")
    r_ext = None if ext is None else grounded_share(ext, shown)
    r_int = None if inner is None else 1.0 - grounded_share(inner, shown)
    return r_ext, r_int


def stream_token_labels(ids: list[int], decode: Callable[[list[int]], str]) -> list[int]:
    """The stream of each token of one sampled run (a turn): 1 inside `<external>` blocks, 2 inside
    `<internal>` blocks (the tags' own tokens included), 0 elsewhere; a token belongs to a block when its
    characters overlap the block's."""
    text = decode(ids)
    pieces = [decode([t]) for t in ids]
    if "".join(pieces) != text:  # multi-token characters: exact offsets from prefix decodes
        ends = [len(decode(ids[: k + 1])) for k in range(len(ids))]
    else:
        ends, at = [], 0
        for p in pieces:
            at += len(p)
            ends.append(at)
    starts = [0, *ends[:-1]]
    spans = [(m.start(), m.end(), k + 1) for k, s in enumerate(STREAMS) for m in _BLOCK[s].finditer(text)]
    out = [0] * len(ids)
    for j, (a, b) in enumerate(zip(starts, ends)):
        for s, e, label in spans:
            if a < e and b > s:
                out[j] = label
    return out


def runs(mask_row: torch.Tensor) -> list[tuple[int, int]]:
    """[start, end) of each contiguous run of sampled tokens (mask 1) in a row.

    >>> runs(torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0]))
    [(1, 3), (4, 5)]
    """
    out, start = [], None
    for t, v in enumerate(mask_row.tolist() + [0.0]):
        if v > 0 and start is None:
            start = t
        elif v <= 0 and start is not None:
            out.append((start, t))
            start = None
    return out


@dataclass(frozen=True)
class SoarParams:
    """SOAR's per-stream credit."""

    weight: float = 1.0
    """Scale of each stream's group-standardised reward added to its tokens' advantage; >= 0 (0: GRPO)."""

    def __post_init__(self) -> None:
        if not self.weight >= 0:
            raise ValueError(f"weight must be >= 0, got {self.weight}")


class SoarState(PieceState):
    """Computes each rollout batch's stream rewards and token labels (from the episode fields and the ids)."""

    def decode(self, ids: list[int]) -> str:
        return self.services.tokenizer.decode(ids, skip_special_tokens=True)

    @torch.no_grad()
    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        n = batch.input_ids.shape[0]
        r_ext, r_int = torch.full((n,), math.nan), torch.full((n,), math.nan)
        labels = torch.zeros(batch.input_ids.shape, dtype=torch.long)
        for i in range(n):
            f = batch.fields[i] if batch.fields else {}
            texts = list(f.get("agent_turn_texts") or [batch.completions[i]])
            e, k = stream_rewards(texts, [str(o) for o in (f.get("agent_observation_texts") or []) if o is not None])
            r_ext[i], r_int[i] = (math.nan if e is None else e), (math.nan if k is None else k)
            row = batch.input_ids[i].tolist()
            for s, t in runs(batch.completion_mask[i]):
                labels[i, s:t] = torch.tensor(stream_token_labels(row[s:t], self.decode), dtype=torch.long)
        return {EXT: r_ext, INT: r_int, LABELS: labels}


def stream_z(values: torch.Tensor, inp: AdvantageInput, eps: float) -> torch.Tensor:
    """(N,) group-standardised stream reward over the group's samples that have it (NaN: no stream -> 0)."""
    have = inp.valid & ~torch.isnan(values)
    _, mean, std = group_moments(torch.nan_to_num(values), inp.group_index, have)
    z = (torch.nan_to_num(values) - mean) / (std + eps)
    return torch.where(have & (std > 0), z, torch.zeros_like(z))


@ADVANTAGES.register(
    "soar",
    params=SoarParams,
    state=SoarState,
    paper=papers.SOAR,
    fidelity="reduced",
    departures=(
        "SOAR's formula is not published: the stream rewards (grounded word share of the external stream, "
        "ungrounded share of the internal one) and the additive per-stream credit are ascent's reading",
        "the streams are tagged blocks in the agent's own turns, not two separately generated reasoning passes",
    ),
)
def soar(inp: AdvantageInput, cfg, params: SoarParams = SoarParams()) -> torch.Tensor:
    """SOAR per-stream credit (module docstring): A_t = A_i + weight · z_s(i) on stream s's tokens, A_i = GRPO."""
    for key in (EXT, INT, LABELS):
        if key not in inp.extras:
            raise ValueError(f"soar needs extras[{key!r}] (its state computes them from the rollout batch)")
    adv = _grpo_seq(inp, cfg)[:, None] * inp.mask  # (N, T)
    labels = inp.extras[LABELS][:, : inp.mask.shape[1]].to(inp.mask.device)
    for code, key in ((1, EXT), (2, INT)):
        z = stream_z(inp.extras[key].to(inp.rewards.dtype), inp, cfg.std_eps)  # (N,)
        adv = adv + params.weight * z[:, None] * (labels == code).to(adv.dtype) * inp.mask
    return adv
