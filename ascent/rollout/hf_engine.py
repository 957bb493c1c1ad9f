"""The `hf` rollout backend: Hugging Face `model.generate`, the baseline the other engines are measured against."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from ascent.rollout.engine import left_pad
from ascent.rollout.types import Generation, SamplingSettings


class HFGenerateEngine:
    """Hugging Face `model.generate` (the baseline); log-probs from its raw per-step logits."""

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
        ids, mask = left_pad(prompt_ids, s.pad_id, device)
        if generator is not None:  # generate draws from the global RNG: seed it from ours
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        greedy = s.temperature == 0
        if greedy and n > 1:  # generate refuses num_return_sequences > 1 without sampling
            ids, mask, n = ids.repeat_interleave(n, 0), mask.repeat_interleave(n, 0), 1
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=s.max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else s.temperature,
            top_p=None if greedy else s.top_p,
            top_k=None if greedy else s.top_k,
            num_return_sequences=n,
            eos_token_id=s.eos_id,
            pad_token_id=s.pad_id,
            min_new_tokens=s.max_new_tokens if s.ignore_eos else None,
            return_dict_in_generate=True,
            output_logits=True,
        )
        new = out.sequences[:, ids.shape[1] :]  # (N, t)
        logits = torch.stack(out.logits, dim=1).float()  # (N, t, V) raw
        if not greedy and s.temperature != 1.0:
            logits = logits / s.temperature
        lp = torch.log_softmax(logits, -1).gather(-1, new[..., None]).squeeze(-1)  # (N, t)
        return finish_generation(new, lp, s)


def finish_generation(new: torch.Tensor, lp: torch.Tensor, s: SamplingSettings) -> Generation:
    """Cut (N, t) sampled ids at the first EOS and pad to max_new_tokens."""
    new, lp = new.cpu(), lp.cpu()
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
