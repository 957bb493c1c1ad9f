"""What a rollout engine is: given a model, prompt token ids and sampling settings, it returns completion ids,
sampling-time log-probs and lengths (`Generation`). Engines see a model and token ids only: no trainer, no
rewards. The backends (`rollout.backend`) are registered in `ascent.rollout.backends` (`ENGINES`,
`make_engine`); each lives in a module named for it:

- `ascent` (default): `ascent.rollout.ascent_engine.FastEngine`, ascent's functional decoder
  (`ascent.rollout.decoder`): each prompt is prefilled ONCE and its KV cache shared by the group's samples;
  finished sequences leave the active batch, so they stop costing compute.
- `cached`: `ascent.rollout.cached_engine.CachedEngine`, the same scheme through the HF forward (any causal LM).
- `hf`: `ascent.rollout.hf_engine.HFGenerateEngine`, Hugging Face `model.generate`, the baseline.
- `vllm` (optional extra, CUDA only): `ascent.rollout.vllm_engine.VLLMEngine`.
"""

from __future__ import annotations

from typing import Protocol

import torch
from transformers import PreTrainedModel

from ascent.rollout.types import Generation, SamplingSettings


class RolloutEngine(Protocol):
    """Anything that turns prompts into sampled completions."""

    def generate(
        self,
        model: PreTrainedModel,
        prompt_ids: list[list[int]],
        n: int,
        s: SamplingSettings,
        generator: torch.Generator | None,
    ) -> Generation: ...


def check_prompts(prompt_ids: list[list[int]]) -> None:
    if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")


def left_pad(prompt_ids: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts: ids (P, L), attention mask (P, L)."""
    check_prompts(prompt_ids)
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompt_ids):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long, device=device)
        mask[i, width - len(p) :] = 1
    return ids, mask
