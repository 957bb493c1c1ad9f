"""Turn prompts + an engine's `Generation` into a right-padded `RolloutBatch`."""

from __future__ import annotations

from typing import Any

import torch

from ascent.rollout.types import Generation, RolloutBatch, extra_pad


def assemble(
    prompts: list[str],
    prompt_ids: list[list[int]],
    fields: list[dict[str, Any]],
    gen: Generation,
    n: int,
    tokenizer,
    policy_version: int = 0,
    row_indices: list[int] | None = None,
) -> RolloutBatch:
    """Concatenate each prompt with each of its n completions; masks mark the sampled tokens.
    `row_indices` (one per prompt): the prompts' training-row indices, repeated into `row_index`."""
    total = len(prompt_ids) * n
    lengths = gen.lengths.tolist()
    widths = [len(prompt_ids[i // n]) + lengths[i] for i in range(total)]
    width = max(widths)
    input_ids = torch.full(
        (total, width), tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0, dtype=torch.long
    )
    attention = torch.zeros((total, width), dtype=torch.long)
    comp_mask = torch.zeros((total, width), dtype=torch.float32)
    sampled = torch.zeros((total, width), dtype=torch.float32)
    for i in range(total):
        p, c = prompt_ids[i // n], lengths[i]
        input_ids[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        input_ids[i, len(p) : len(p) + c] = gen.tokens[i, :c]
        attention[i, : len(p) + c] = 1
        comp_mask[i, len(p) : len(p) + c] = 1.0
        sampled[i, len(p) : len(p) + c] = gen.logprobs[i, :c]
    texts = tokenizer.batch_decode(
        [gen.tokens[i, : lengths[i]].tolist() for i in range(total)], skip_special_tokens=True
    )
    return RolloutBatch(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=comp_mask,
        sampled_logprobs=sampled,
        group_index=torch.arange(len(prompt_ids)).repeat_interleave(n),
        finished=gen.finished.cpu(),
        prompts=[prompts[i // n] for i in range(total)],
        completions=texts,
        fields=[fields[i // n] for i in range(total)],
        policy_version=policy_version,
        stats={
            "rollout/completion_tokens": float(sum(lengths)),
            "rollout/completion_len_mean": sum(lengths) / max(total, 1),
            "rollout/truncated_frac": float((~gen.finished).float().mean()),
        },
        row_index=None if row_indices is None else torch.tensor(row_indices, dtype=torch.long).repeat_interleave(n),
    )


def concat_batches(batches: list[RolloutBatch]) -> RolloutBatch:
    """Stack rollout batches (right-padding to the widest); group indices are renumbered so groups stay distinct."""
    width = max(b.input_ids.shape[1] for b in batches)
    pad = lambda x, v=0: torch.nn.functional.pad(x, (0, width - x.shape[1]), value=v)  # noqa: E731
    offsets, start = [], 0
    for b in batches:
        offsets.append(start)
        start += int(b.group_index.max()) + 1 if len(b) else 0
    tokens = sum(b.stats.get("rollout/completion_tokens", 0.0) for b in batches)
    total = sum(len(b) for b in batches)
    return RolloutBatch(
        input_ids=torch.cat([pad(b.input_ids) for b in batches]),
        attention_mask=torch.cat([pad(b.attention_mask) for b in batches]),
        completion_mask=torch.cat([pad(b.completion_mask) for b in batches]),
        sampled_logprobs=torch.cat([pad(b.sampled_logprobs) for b in batches]),
        group_index=torch.cat([b.group_index + o for b, o in zip(batches, offsets)]),
        finished=torch.cat([b.finished for b in batches]),
        prompts=[p for b in batches for p in b.prompts],
        completions=[c for b in batches for c in b.completions],
        fields=[f for b in batches for f in b.fields],
        policy_version=batches[0].policy_version,
        stats={
            **mean_stats(batches),
            "rollout/completion_tokens": tokens,
            "rollout/completion_len_mean": tokens / max(total, 1),
            "rollout/truncated_frac": float((~torch.cat([b.finished for b in batches])).float().mean()),
        },
        row_index=torch.cat([b.row_index for b in batches]) if all(b.row_index is not None for b in batches) else None,
        extras=concat_extras(batches),
    )


def mean_stats(batches: list[RolloutBatch]) -> dict[str, float]:
    """The batches' stats averaged, weighted by their sizes (e.g. agent/ episode means)."""
    total = max(sum(len(b) for b in batches), 1)
    keys = {k for b in batches for k in b.stats}
    return {k: sum(b.stats.get(k, 0.0) * len(b) for b in batches) / total for k in sorted(keys)}


def concat_extras(batches: list[RolloutBatch]) -> dict[str, torch.Tensor]:
    """Stack the batches' extras (every batch must have the same keys); a dimension that differs between
    batches (T for token-aligned extras, M turns for per-turn ones) is right-padded with `extra_pad`."""
    keys = sorted(batches[0].extras)
    if any(sorted(b.extras) != keys for b in batches):
        raise ValueError(f"concat_batches: the batches carry different extras ({[sorted(b.extras) for b in batches]})")
    out = {}
    for k in keys:
        parts = [b.extras[k] for b in batches]
        shape = [max(p.shape[d] for p in parts) for d in range(parts[0].dim())]
        padded = []
        for p in parts:
            full = torch.full([p.shape[0], *shape[1:]], extra_pad(p), dtype=p.dtype)
            full[tuple(slice(0, s) for s in p.shape)] = p
            padded.append(full)
        out[k] = torch.cat(padded)
    return out
