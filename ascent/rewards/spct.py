"""SPCT's parts around the generative judge (`reward=judge`): the correctness rule for one judgement, the
rejective-fine-tuning filter, the meta RM (a pointwise scalar RM over judgements, trained with binary
cross-entropy) and the meta-RM-guided vote (`judge(meta_rm=PATH, meta_k=N)`).

After Liu et al. 2025, "Inference-Time Scaling for Generalist Reward Modeling" (DeepSeek-GRM / Self-Principled
Critique Tuning, arXiv:2504.02495). For one question x, one candidate y with a known label l ∈ {0, 1} (the verifier's
verdict) and k sampled judgements with scores s_j ∈ [1, 10]:

    correct_j = (s_j > τ) if l = 1 else (s_j < τ)          τ = `CORRECT_THRESHOLD` = 5.5        (`judgement_correct`)

the paper's agreement of a pointwise reward with the ground truth, for a single response (its Eq. 4 picks the best
of n ≥ 2 responses; with one response and a binary label "the rating is on the label's side" is the same test).

* Rejective fine-tuning (`rft_select`): keep the judgements that are correct, drop the rest, and drop every sample
  whose k judgements are all correct ("too easy"); the kept (judge prompt, judgement) rows are the SFT data of the
  cold-start stage. The paper's hinted sampling and its rule-based online RL stage (GRPO on the judge with reward
  ±1 from `judgement_correct`) are not here.
* Meta RM: a scalar head on a causal LM trunk (the `RewardModel` of `ascent train-rm`) scoring
  (judge prompt, judgement) with label correct_j, loss BCE(σ(m_j), correct_j). `fit_meta_head` trains the head on
  frozen trunk features (the paper fine-tunes the whole meta RM; here the trunk stays frozen so it fits a CPU);
  `save_meta_rm` writes it as a reward-model folder, which `judge(meta_rm=...)` loads.
* Meta-RM-guided vote (`guided_vote`): the meta RM scores each of the k judgements; the `meta_k` valid ones with
  the highest meta score vote (the mean of their scores rescaled to [0, 1], as `vote`); the rest are discarded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

CORRECT_THRESHOLD = 5.5
"""A judgement of a right answer is correct above it, of a wrong answer below it (the midpoint of [1, 10])."""

META_KIND = "spct-meta"
"""`kind` of a meta RM's reward_model.json."""


def judgement_correct(score: Optional[float], label: int, threshold: float = CORRECT_THRESHOLD) -> Optional[bool]:
    """Whether a judgement's score agrees with the label (None: the judgement has no score).

    >>> judgement_correct(8.0, 1), judgement_correct(8.0, 0), judgement_correct(3.0, 0), judgement_correct(None, 1)
    (True, False, True, None)
    """
    if score is None:
        return None
    return score > threshold if label else score < threshold


def rft_select(
    scores: Sequence[Sequence[Optional[float]]], labels: Sequence[int], threshold: float = CORRECT_THRESHOLD
) -> list[tuple[int, int]]:
    """SPCT's rejective sampling: (sample, judgement) indices of the judgements kept for fine-tuning: correct ones
    of samples that are not "too easy" (not all k judgements correct). Unscored judgements are rejected.

    >>> rft_select([[8.0, 3.0, None], [9.0, 7.0, 6.0], [2.0, 9.0, 1.0]], [1, 1, 0])
    [(0, 0), (2, 0), (2, 2)]
    """
    kept: list[tuple[int, int]] = []
    for i, (row, label) in enumerate(zip(scores, labels)):
        ok = [judgement_correct(s, label, threshold) is True for s in row]
        if all(ok):
            continue  # too easy: nothing to learn from it
        kept += [(i, j) for j, good in enumerate(ok) if good]
    return kept


def guided_vote(
    scores: Sequence[Optional[float]],
    meta: Sequence[Optional[float]],
    meta_k: int,
    min_votes: int = 1,
    score_range: tuple[float, float] = (1.0, 10.0),
) -> Optional[float]:
    """The meta-RM-guided vote: the `meta_k` valid judgements with the highest meta score (ties: the earlier one)
    vote; reward = the mean of their scores mapped from [1, 10] to [0, 1]; None with fewer than `min_votes` valid.
    `meta_k` >= the number of valid judgements is the plain vote.

    >>> round(guided_vote([9.0, 2.0, None, 4.0], [0.1, 2.0, 5.0, 1.5], meta_k=2), 6)
    0.222222
    """
    valid = [
        (m if m is not None else float("-inf"), -j, s) for j, (s, m) in enumerate(zip(scores, meta)) if s is not None
    ]
    if len(valid) < max(min_votes, 1):
        return None
    top = sorted(valid, reverse=True)[: max(meta_k, 1)]
    lo, hi = score_range
    return (sum(s for _, _, s in top) / len(top) - lo) / (hi - lo)


def meta_prompt(template: str, prefill: str, question: str, answer: str) -> str:
    """The prompt half of what a meta RM scores: the judge's user message and the start of its reply; the
    judgement the judge wrote is the completion half.

    >>> meta_prompt("Q: {question} A: {answer}", "Principles:", " 2+2? ", "4")
    'Q: 2+2? A: 4\\nPrinciples:'
    """
    return template.format(question=question.strip(), answer=answer.strip()) + "\n" + prefill


@torch.no_grad()
def trunk_features(
    rm: Any, tokenizer: Any, prompts: list[str], texts: list[str], micro_batch_size: int = 8, max_length: int = 1024
) -> torch.Tensor:
    """(N, H) float32 hidden states of a reward model's trunk at the last real token of prompt + text + EOS
    (the layout `ascent.rewards.reward_model.encode` scores on): the meta RM head's inputs."""
    from ascent.rewards.reward_model import encode

    rows = []
    device = rm.head.weight.device
    for i in range(0, len(prompts), micro_batch_size):
        ids, mask = encode(tokenizer, prompts[i : i + micro_batch_size], texts[i : i + micro_batch_size], max_length)
        ids, mask = ids.to(device), mask.to(device)
        hidden = rm.trunk(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        last = mask.long().cumsum(-1).argmax(-1)
        rows.append(hidden[torch.arange(len(last), device=device), last].float().cpu())
    return torch.cat(rows) if rows else torch.zeros(0, int(rm.lm.config.hidden_size))


def fit_meta_head(
    features: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 300,
    lr: float = 0.05,
    weight_decay: float = 1e-3,
    seed: int = 0,
) -> torch.nn.Linear:
    """A linear head m = w·h + b on frozen trunk features, trained full-batch with Adam on the meta RM's loss
    BCE(σ(m), correct) (classes weighted to balance). Features are standardised into the head's weights, so the
    head applies to raw trunk features."""
    if features.ndim != 2 or len(features) != len(labels) or len(labels) == 0:
        raise ValueError(
            f"features (N, H) and labels (N,) must match and be non-empty; got {features.shape}, {labels.shape}"
        )
    gen = torch.Generator().manual_seed(seed)
    x = features.float()
    mu, sd = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mu) / sd
    y = labels.float()
    pos = float(y.mean())
    weight = torch.where(y > 0.5, 0.5 / max(pos, 1e-6), 0.5 / max(1 - pos, 1e-6))
    w = (torch.randn(x.shape[1], generator=gen) * 0.01).requires_grad_(True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(z @ w + b, y, reduction="none") * weight).mean()
        loss.backward()
        opt.step()
    head = torch.nn.Linear(x.shape[1], 1)
    with torch.no_grad():
        head.weight.copy_((w / sd).unsqueeze(0))
        head.bias.copy_(b - (w * mu / sd).sum())
    return head


def save_meta_rm(out: Path, rm: Any, tokenizer: Any, head: torch.nn.Linear, info: dict[str, Any]) -> Path:
    """Write a meta RM as a reward-model folder (trunk LM, tokenizer, head, reward_model.json with kind
    `spct-meta`), loadable with `load_reward_model` and by `judge(meta_rm=...)`."""
    from safetensors.torch import save_file

    from ascent.rewards.reward_model import FORMAT, HEAD_FILE, META_FILE, VERSION

    out.mkdir(parents=True, exist_ok=True)
    rm.lm.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}, str(out / HEAD_FILE))
    meta = {"format": FORMAT, "version": VERSION, "kind": META_KIND, "hidden_size": int(rm.lm.config.hidden_size)}
    (out / META_FILE).write_text(json.dumps({**meta, **info}, indent=2) + "\n")
    return out
