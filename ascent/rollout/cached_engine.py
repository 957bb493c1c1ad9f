"""The `cached` rollout backend: ascent's engine scheme (shared group prefill, incremental KV cache, finished rows
leave the batch) through the Hugging Face forward with a `DynamicCache`, so it runs any HF causal LM. The
`ascent` backend falls back to it for models its own decoder does not support."""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from ascent.rollout.engine import left_pad
from ascent.rollout.sampling import draw_uniforms, sample_tokens
from ascent.rollout.types import Generation, SamplingSettings


class CachedEngine:
    """ascent's engine over any HF causal LM: shared group prefill, incremental KV cache, early exit."""

    @torch.no_grad()
    def generate(
        self,
        model: PreTrainedModel,
        prompt_ids: list[list[int]],
        n: int,
        s: SamplingSettings,
        generator: torch.Generator | None,
    ) -> Generation:
        device = next(model.parameters()).device
        ids, mask = left_pad(prompt_ids, s.pad_id, device)  # (P, L)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, L)
        cache = DynamicCache()
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
        logits = out.logits[:, -1]  # (P, V): prefill once per prompt
        cache = out.cache
        if n > 1:  # share the prompt's cache among its n samples
            cache.batch_repeat_interleave(n)
            logits, mask = logits.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
        total = len(prompt_ids) * n
        tokens = torch.full((total, s.max_new_tokens), s.pad_id, dtype=torch.long, device=device)
        logps = torch.zeros((total, s.max_new_tokens), dtype=torch.float32, device=device)
        lengths = torch.zeros(total, dtype=torch.long, device=device)
        finished = torch.zeros(total, dtype=torch.bool, device=device)
        rows = torch.arange(total, device=device)  # original index of each active row
        next_pos = mask.sum(-1)  # (A,)
        u = draw_uniforms(generator, s.max_new_tokens, total, s, device)  # (max_new, N): one per (position, sequence)
        for t in range(s.max_new_tokens):
            tok, lp = sample_tokens(logits, s, u=None if u is None else u[t, rows])  # (A,)
            tokens[rows, t], logps[rows, t] = tok, lp
            lengths[rows] += 1
            ended = tok == s.eos_id if not s.ignore_eos else torch.zeros_like(tok, dtype=torch.bool)
            finished[rows] |= ended
            if t == s.max_new_tokens - 1 or bool(ended.all()):
                break
            if bool(ended.any()):  # finished rows leave the batch
                keep = (~ended).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                rows, tok, mask, next_pos = rows[keep], tok[keep], mask[keep], next_pos[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            out = model(
                input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos[:, None], cache=cache, use_cache=True
            )
            logits, next_pos = out.logits[:, -1], next_pos + 1
        return Generation(tokens=tokens.cpu(), logprobs=logps.cpu(), lengths=lengths.cpu(), finished=finished.cpu())
