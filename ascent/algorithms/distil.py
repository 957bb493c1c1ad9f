"""DistIL's teacher (Agrawal et al., 2026, arXiv:2606.05152): the `distil` loss's parameters and its state,
a frozen teacher loaded once per run whose full-vocabulary log-probs each micro-batch receives as
`LossInput.teacher_logprobs`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent.algorithms.state import PieceState


@dataclass(frozen=True)
class DistilParams:
    """Distillation from a frozen teacher."""

    teacher: Optional[str] = None
    """Teacher model: a checkpoint folder or a run directory (its latest checkpoint); same tokenizer as the policy."""

    def __post_init__(self) -> None:
        if not self.teacher:
            raise ValueError(
                "needs a teacher: write distil(teacher=PATH), a checkpoint folder or a run directory of a model "
                "with the same tokenizer"
            )


class DistilState(PieceState):
    """The frozen teacher, loaded when the run starts (a bad path or tokenizer fails before any step). Shared by
    every loss whose parameters name a `teacher` (`distil`, `opd`)."""

    def __init__(self, params: Any, services: Any) -> None:
        super().__init__(params, services)
        self.teacher = services.load_frozen(params.teacher)

    @torch.no_grad()
    def token_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        full = self.services.full_logprobs(self.teacher, input_ids, attention_mask)  # (n, T, V)
        token = full.gather(-1, input_ids.unsqueeze(-1)).squeeze(-1)  # (n, T) the sampled tokens' (opd, sampled)
        return {"teacher_logprobs": full, "teacher_token_logprobs": token}
