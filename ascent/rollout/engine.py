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
from ascent.rollout.fast import Decoder, supports
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
            tok, lp = sample_tokens(logits, s, generator, rows, total)  # (A,)
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
        if greedy and n > 1:  # generate refuses num_return_sequences > 1 without sampling
            ids, mask, n = ids.repeat_interleave(n, 0), mask.repeat_interleave(n, 0), 1
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=s.max_new_tokens, do_sample=not greedy,
            temperature=None if greedy else s.temperature, top_p=None if greedy else s.top_p, top_k=None if greedy else s.top_k,
            num_return_sequences=n, eos_token_id=s.eos_id, pad_token_id=s.pad_id, min_new_tokens=s.max_new_tokens if s.ignore_eos else None,
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
    is_eos = new == s.eos_id if not s.ignore_eos else torch.zeros_like(new, dtype=torch.bool)
    has_eos = is_eos.any(-1)
    first = torch.where(has_eos, is_eos.float().argmax(-1), torch.full_like(has_eos, steps, dtype=torch.long))
    lengths = torch.where(has_eos, first + 1, first)
    keep = torch.arange(steps)[None, :] < lengths[:, None]  # (N, t)
    tokens = torch.full((total, s.max_new_tokens), s.pad_id, dtype=torch.long)
    logps = torch.zeros((total, s.max_new_tokens), dtype=torch.float32)
    tokens[:, :steps] = torch.where(keep, new, torch.full_like(new, s.pad_id))
    logps[:, :steps] = torch.where(keep, lp, torch.zeros_like(lp))
    return Generation(tokens=tokens, logprobs=logps, lengths=lengths, finished=has_eos)


class FastEngine:
    """ascent's engine: the functional Llama/Qwen2 decoder (`ascent.rollout.fast`) over a KV cache
    preallocated once; each prompt prefilled once and its cache copied to its n samples; finished rows
    compacted out of the batch. Models it does not support go to `CachedEngine`."""

    compact_fraction = 0.25
    """Compact the batch when this share of its rows has finished."""

    def __init__(self) -> None:
        self.fallback = CachedEngine()

    @torch.inference_mode()
    def generate(self, model: PreTrainedModel, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: torch.Generator | None) -> Generation:
        if not supports(model):
            return self.fallback.generate(model, prompt_ids, n, s, generator)
        dec = Decoder(model)
        ids, mask = left_pad(prompt_ids, s.pad_id, next(model.parameters()).device)  # (P, L)
        (p, width), total = ids.shape, len(prompt_ids) * n
        dec.rope_table(width + s.max_new_tokens + 1)
        cache = dec.new_cache(total, width + s.max_new_tokens)
        logits = self.prefill(dec, ids, mask, cache, n)  # (N, V)
        key_valid = torch.zeros((total, width + s.max_new_tokens), dtype=torch.bool)
        key_valid[:, :width] = mask.bool().repeat_interleave(n, 0)
        out = Generation(torch.full((total, s.max_new_tokens), s.pad_id, dtype=torch.long), torch.zeros((total, s.max_new_tokens)), torch.zeros(total, dtype=torch.long), torch.zeros(total, dtype=torch.bool))
        rows = torch.arange(total)  # original index of each batch row
        alive = torch.ones(total, dtype=torch.bool)  # (A,) rows still generating
        next_pos = mask.sum(-1).repeat_interleave(n)  # (A,)
        for t in range(s.max_new_tokens):
            tok, lp = sample_tokens(logits, s, generator, rows, total)  # (A,)
            live = rows[alive]
            out.tokens[live, t], out.logprobs[live, t] = tok[alive], lp[alive]
            out.lengths[live] += 1
            ended = alive & (tok == s.eos_id) if not s.ignore_eos else torch.zeros_like(alive)
            out.finished[rows[ended]] = True
            alive = alive & ~ended
            if t == s.max_new_tokens - 1 or not bool(alive.any()):
                break
            slot = width + t
            if float((~alive).float().mean()) >= self.compact_fraction:
                keep = alive.nonzero().squeeze(-1)
                keys, values = cache
                keys[:, : len(keep), :, :, :slot] = keys[:, keep, :, :, :slot]
                values[:, : len(keep), :, :slot] = values[:, keep, :, :slot]
                rows, tok, next_pos, alive = rows[keep], tok[keep], next_pos[keep], alive[keep]
                key_valid[: len(keep)] = key_valid[keep].clone()
            a = len(rows)
            key_valid[:a, slot] = True
            logits = dec.forward(tok[:, None], next_pos[:, None], cache, slot, key_valid[:a, None, None, : slot + 1])
            next_pos = next_pos + 1
        return out

    @staticmethod
    def prefill(dec: Decoder, ids: torch.Tensor, mask: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor], n: int) -> torch.Tensor:
        """Run the P prompts once, then copy each prompt's keys/values to its n sample rows."""
        p, width = ids.shape
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, L)
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        attn = (causal[None, None] & mask.bool()[:, None, None, :]) | torch.eye(width, dtype=torch.bool)[None, None]  # pads see themselves: no NaN rows
        logits = dec.forward(ids, positions, cache, 0, attn)  # (P, V)
        if n > 1:
            keys, values = cache
            keys[:, : p * n, :, :, :width] = keys[:, :p, :, :, :width].repeat_interleave(n, dim=1)
            values[:, : p * n, :, :width] = values[:, :p, :, :width].repeat_interleave(n, dim=1)
        return logits.repeat_interleave(n, 0)


ENGINES.register("ascent", "ascent's functional decoder: preallocated KV cache, shared prompt prefill, finished rows compacted out (default)")(FastEngine)
ENGINES.register("cached", "HF-forward engine with a DynamicCache, shared prefill and early exit (any HF causal LM)")(CachedEngine)
ENGINES.register("hf", "Hugging Face model.generate (baseline)")(HFGenerateEngine)


def make_engine(name: str) -> RolloutEngine:
    """An engine instance by backend name."""
    return ENGINES.get(name)()
