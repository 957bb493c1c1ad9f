"""DistIL's teacher (Agrawal et al., 2026, arXiv:2606.05152): the `distil` loss's parameters and its state,
a teacher whose full-vocabulary log-probs each micro-batch receives as `LossInput.teacher_logprobs`: a
frozen checkpoint loaded once per run, or the policy itself (`teacher=self`, no grad) conditioned on
feedback from the row (`feedback`, e.g. the reference answer), which is what makes a self-teacher know
more than the student."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent.algorithms.state import PieceState

SELF = "self"
"""`teacher=self`: the policy being trained, conditioned on the feedback, is the teacher."""


@dataclass(frozen=True)
class DistilParams:
    """Distillation from a teacher (DistIL, Agrawal et al. 2026, arXiv:2606.05152)."""

    teacher: Optional[str] = None
    """Teacher model: a checkpoint folder or a run directory (its latest checkpoint), same tokenizer as the
    policy; or `self`: the policy itself, without grad, conditioned on `feedback`."""
    feedback: str = ""
    """Template over the row's fields (e.g. `Reference answer: {answer}\\n`) placed before the whole sequence
    in the teacher's context (the student does not see it); empty: the teacher sees what the student sees.
    Required with teacher=self."""
    future: bool = True
    """DistIL's sequence-level term: the score-function term that carries later teacher-student disagreement
    back to the tokens that led there; False: tokenwise forward cross-entropy only (GKD with the forward KL)."""
    baseline: bool = True
    """Subtract from each token's future disagreement the mean of the other rows of its group at that
    position (a leave-one-out baseline: lower variance, same expected gradient)."""

    def __post_init__(self) -> None:
        if not self.teacher:
            raise ValueError(
                "needs a teacher: write distil(teacher=PATH), a checkpoint folder or a run directory of a model "
                "with the same tokenizer, or distil(teacher=self, feedback=TEMPLATE)"
            )
        if self.teacher == SELF and not self.feedback:
            raise ValueError("teacher=self needs feedback (a template over the row's fields, e.g. {answer})")


class DistilState(PieceState):
    """The teacher. A frozen one is loaded when the run starts (a bad path or tokenizer fails before any step);
    `teacher=self` uses the policy. Shared by every loss whose parameters name a `teacher` (`distil`, `opd`).
    With a feedback template, `begin_update` records each row's conditioning text and `token_inputs` prefixes
    it to the row before the teacher's forward."""

    def __init__(self, params: Any, services: Any) -> None:
        super().__init__(params, services)
        self.teacher = services.policy_model if params.teacher == SELF else services.load_frozen(params.teacher)
        self.feedback = getattr(params, "feedback", "")
        self.notes: dict[bytes, list[int]] = {}

    def begin_update(self, batch: Any, rewards: torch.Tensor, valid: torch.Tensor, mask: torch.Tensor) -> None:
        if not self.feedback:
            return
        tok = self.services.tokenizer
        self.notes = {}
        for i, f in enumerate(batch.fields):
            try:
                text = self.feedback.format(**f)
            except (KeyError, IndexError) as e:
                raise ValueError(f"distil feedback {self.feedback!r}: the row has no field {e}") from None
            self.notes[row_key(batch.input_ids[i], batch.attention_mask[i])] = list(
                tok(text, add_special_tokens=False)["input_ids"]
            )

    @torch.no_grad()
    def token_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.feedback:
            full = self.conditioned(input_ids, attention_mask)
        else:
            full = self.services.full_logprobs(self.teacher, input_ids, attention_mask)  # (n, T, V)
        token = full.gather(-1, input_ids.unsqueeze(-1)).squeeze(-1)  # (n, T) the sampled tokens' (opd, sampled)
        return {"teacher_logprobs": full, "teacher_token_logprobs": token}

    def conditioned(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(n, T, V) the teacher's log-probs at the rows' positions with each row's note before the row."""
        n, width = input_ids.shape
        notes = [self.notes.get(row_key(input_ids[i], attention_mask[i])) for i in range(n)]
        if any(x is None for x in notes):
            raise ValueError("distil: a micro-batch row was not in the update's batch (begin_update not called)")
        shift = max(len(x) for x in notes)
        ids = torch.zeros((n, shift + width), dtype=input_ids.dtype, device=input_ids.device)
        att = torch.zeros_like(ids)
        for i, note in enumerate(notes):  # right-aligned notes keep every row's sequence at offset `shift`
            ids[i, shift - len(note) : shift] = torch.tensor(note, dtype=ids.dtype)
            att[i, shift - len(note) : shift] = 1
            ids[i, shift:], att[i, shift:] = input_ids[i], attention_mask[i]
        was = self.teacher.training
        self.teacher.eval()
        full = self.services.full_logprobs(self.teacher, ids, att)[:, shift:]  # (n, T, V)
        self.teacher.train(was)
        return full


def row_key(ids: torch.Tensor, mask: torch.Tensor) -> bytes:
    """A row's identity: its unpadded ids (the same in the rollout batch and any trimmed micro-batch)."""
    return ids[mask.bool()].cpu().numpy().tobytes()
