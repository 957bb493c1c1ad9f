"""Rollout engines: given prompt token ids and sampling settings, return completion ids, sampling-time
log-probs and lengths (`Generation`). They see a model and token ids only: no trainer, no rewards.

- `ascent` (default): each prompt is prefilled ONCE and its KV cache shared by the group's samples;
  finished sequences leave the active batch, so they stop costing compute.
- `hf`: Hugging Face `model.generate`, the baseline.
"""

from __future__ import annotations

from typing import Protocol

import torch
from transformers import DynamicCache, PreTrainedModel

from ascent.registry import Registry
from ascent.rollout.sampling import sample_tokens
from ascent.rollout.types import Generation, SamplingSettings

ENGINES: Registry = Registry("rollout backend")


class RolloutEngine(Protocol):
    """Anything that turns prompts into sampled completions."""

    def generate(self, model: PreTrainedModel, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: torch.Generator | None) -> Generation: ...


def left_pad(prompt_ids: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts: ids (P, L), attention mask (P, L)."""
    if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompt_ids):
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long, device=device)
        mask[i, width - len(p):] = 1
    return ids, mask


class CachedEngine:
    """ascent's engine over any HF causal LM: shared group prefill, incremental KV cache, early exit."""

    @torch.no_grad()
    def generate(self, model: PreTrainedModel, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: torch.Generator | None) -> Generation:
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
        for t in range(s.max_new_tokens):
            tok, lp = sample_tokens(logits, s, generator)  # (A,)
            tokens[rows, t], logps[rows, t] = tok, lp
            lengths[rows] += 1
            ended = tok == s.eos_id
            finished[rows] |= ended
            if t == s.max_new_tokens - 1 or bool(ended.all()):
                break
            if bool(ended.any()):  # finished rows leave the batch
                keep = (~ended).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                rows, tok, mask, next_pos = rows[keep], tok[keep], mask[keep], next_pos[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos[:, None], cache=cache, use_cache=True)
            logits, next_pos = out.logits[:, -1], next_pos + 1
        return Generation(tokens=tokens, logprobs=logps, lengths=lengths, finished=finished)


class HFGenerateEngine:
    """Hugging Face `model.generate` (the baseline); log-probs from its raw per-step logits."""

    @torch.no_grad()
    def generate(self, model: PreTrainedModel, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: torch.Generator | None) -> Generation:
        device = next(model.parameters()).device
        ids, mask = left_pad(prompt_ids, s.pad_id, device)
        if generator is not None:  # generate draws from the global RNG: seed it from ours
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        greedy = s.temperature == 0
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=s.max_new_tokens, do_sample=not greedy,
            temperature=None if greedy else s.temperature, top_p=None if greedy else s.top_p, top_k=None if greedy else s.top_k,
            num_return_sequences=n, eos_token_id=s.eos_id, pad_token_id=s.pad_id,
            return_dict_in_generate=True, output_logits=True,
        )
        new = out.sequences[:, ids.shape[1]:]  # (N, t)
        logits = torch.stack(out.logits, dim=1).float()  # (N, t, V) raw
        if not greedy and s.temperature != 1.0:
            logits = logits / s.temperature
        lp = torch.log_softmax(logits, -1).gather(-1, new[..., None]).squeeze(-1)  # (N, t)
        return finish_generation(new, lp, s)


def finish_generation(new: torch.Tensor, lp: torch.Tensor, s: SamplingSettings) -> Generation:
    """Cut (N, t) sampled ids at the first EOS and pad to max_new_tokens."""
    total, steps = new.shape
    is_eos = new == s.eos_id
    has_eos = is_eos.any(-1)
    first = torch.where(has_eos, is_eos.float().argmax(-1), torch.full_like(has_eos, steps, dtype=torch.long))
    lengths = torch.where(has_eos, first + 1, first)
    keep = torch.arange(steps)[None, :] < lengths[:, None]  # (N, t)
    tokens = torch.full((total, s.max_new_tokens), s.pad_id, dtype=torch.long)
    logps = torch.zeros((total, s.max_new_tokens), dtype=torch.float32)
    tokens[:, :steps] = torch.where(keep, new, torch.full_like(new, s.pad_id))
    logps[:, :steps] = torch.where(keep, lp, torch.zeros_like(lp))
    return Generation(tokens=tokens, logprobs=logps, lengths=lengths, finished=has_eos)


ENGINES.register("ascent", "shared-prefill KV-cache engine with early exit (default)")(CachedEngine)
ENGINES.register("hf", "Hugging Face model.generate (baseline)")(HFGenerateEngine)


def make_engine(name: str) -> RolloutEngine:
    """An engine instance by backend name."""
    return ENGINES.get(name)()
