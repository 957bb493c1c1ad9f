"""SERL's hindsight teacher (Li et al., 2026, arXiv:2605.19447, "What and When to Distill: Selective Hindsight
Distillation for Multi-Turn Agents"; authors' code github.com/OliverLeeXZ/SERL).

The teacher is the policy itself with the environment's feedback on a step placed in its context. Its
log-probs of the student's own action tokens, against the unconditioned policy's, reweight the GRPO
advantage on those tokens only (thinking tokens keep GRPO's credit), with a bounded weight whose share
fades to 0 over training:

    delta_t = log pi(a_t | h, feedback) - log pi(a_t | h)                    (no grad, both the same weights)
    w_t     = clip(exp(sign(A_i) * delta_t), 1 - c, 1 + c)
    A_t     = A_i * ((1 - lambda_k) + lambda_k * w_t)   on action tokens,   A_t = A_i elsewhere,
    lambda_k = lambda * max(0, 1 - k / decay_steps)                          (k: training steps done)

A_i is the GRPO advantage of the outcome. A feedback that makes the teacher more sure of a good trajectory's
action promotes it; in a failed trajectory, an action the feedback makes less likely is pushed down harder.
The weight, clip and linear decay are the authors' (`compute_serl_action_mask_reweighted_advantages` and
`_serl_effective_lambda` in their verl fork; defaults lambda = 0.5, c = 0.2, 50 decay steps).

Departures (CPU scale, ascent's rows): the feedback of turn t is the immediate feedback only: the tokens the
environment appended after it (its next observation, decoded), and for the last turn the outcome
(`final`); the authors' other sources (future trajectory, a successful sibling, anchor-level grouping, an
LLM judge) are not implemented. The feedback is inserted right before the turn's tokens (inside the
trajectory's token stream, `template`), not rebuilt as a new chat prompt. Action tokens are a turn's tokens
after its last `action_marker` (all of the turn when absent), where the authors parse the environment's
action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ascent import papers
from ascent.algorithms.advantages import ADVANTAGES, _grpo_seq
from ascent.algorithms.state import PieceState
from ascent.algorithms.types import AdvantageInput

DELTA, ACTION, LAMBDA = "serl_delta", "serl_action", "serl_lambda"
"""The extras `SerlState` adds: (N, T) teacher - student log-prob, (N, T) action-token mask, (1,) lambda_k."""


@dataclass(frozen=True)
class SerlParams:
    """SERL's hindsight teacher (Li et al. 2026, arXiv:2605.19447)."""

    strength: float = 0.5
    """lambda: share of the action tokens' advantage the teacher's weight sets at the start (authors'
    mixing_lambda 0.5), in [0, 1] (0: GRPO)."""
    decay_steps: int = 50
    """Training steps over which lambda fades linearly to 0 (authors' lambda_decay_steps 50; 0: never fades).
    Once it is 0 the teacher is not run."""
    weight_clip: float = 0.2
    """c: the weight exp(sign(A) delta) is clipped to [1 - c, 1 + c] (authors' weight_clip 0.2); >= 0."""
    template: str = "\n(Hindsight: after this step the environment replied: {feedback})\n"
    """Text placed before the turn's tokens in the teacher's context; `{feedback}` is the feedback."""
    final: str = "the episode ended with reward {reward:g}"
    """The feedback of the last turn (after its reply, if any); `{reward}` is the environment's episode reward
    (`agent_reward`, the sum of its step rewards), not the run's reward functions."""
    action_marker: str = "</think>"
    """A turn's action tokens are those after the last occurrence of this text (all of the turn without it)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {self.strength}")
        if self.decay_steps < 0:
            raise ValueError(f"decay_steps must be >= 0, got {self.decay_steps}")
        if self.weight_clip < 0:
            raise ValueError(f"weight_clip must be >= 0, got {self.weight_clip}")
        if "{feedback}" not in self.template:
            raise ValueError("template must contain {feedback}")


def faded_strength(params: SerlParams, steps: int) -> float:
    """lambda_k = lambda * max(0, 1 - k / decay_steps) (lambda when decay_steps = 0)."""
    if params.decay_steps == 0:
        return params.strength
    return params.strength * max(0.0, 1.0 - steps / params.decay_steps)


def turn_ranges(turn_index: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Per row, the [start, end) of each turn's tokens (turn_index (N, T): the turn of each sampled token,
    -1 elsewhere)."""
    out = []
    for i in range(turn_index.shape[0]):
        spans = []
        for t in range(int(turn_index[i].max()) + 1):
            pos = (turn_index[i] == t).nonzero().squeeze(-1)
            if pos.numel():
                spans.append((int(pos.min()), int(pos.max()) + 1))
        out.append(spans)
    return out


def action_start(ids: list[int], marker: str, decode: Any) -> int:
    """Offset (into `ids`) of the first action token: just after the token that completes the last
    `marker` in the decoded text; 0 when the marker is absent or empty."""
    if not marker:
        return 0
    text = decode(ids)
    at = text.rfind(marker)
    if at < 0:
        return 0
    need = at + len(marker)
    for k in range(1, len(ids) + 1):
        if len(decode(ids[:k])) >= need:
            return k
    return len(ids)


class SerlState(PieceState):
    """Runs the hindsight teacher before each batch's advantages and counts training steps (for the decay)."""

    def __init__(self, params: SerlParams, services: Any) -> None:
        super().__init__(params, services)
        self.steps = 0

    def decode(self, ids: list[int]) -> str:
        return self.services.tokenizer.decode(ids, skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return list(self.services.tokenizer(text, add_special_tokens=False)["input_ids"])

    @torch.no_grad()
    def advantage_extras(self, batch: Any) -> dict[str, torch.Tensor]:
        lam = faded_strength(self.params, self.steps)
        self.steps += 1
        ids, att = batch.input_ids, batch.attention_mask
        delta, action = torch.zeros(ids.shape), torch.zeros(ids.shape)  # (N, T)
        out = {DELTA: delta, ACTION: action, LAMBDA: torch.tensor([lam])}
        if lam == 0.0:
            return out  # faded out: GRPO, no teacher forwards
        turn_index = batch.extras.get("turn_index")
        if turn_index is None or not batch.fields or "agent_observation_texts" not in batch.fields[0]:
            raise ValueError("serl's hindsight teacher needs an agent task (turns and their observations)")
        probes: list[tuple[int, int, int, list[int], int]] = []  # (row, action start, end, teacher ids, offset)
        for i, spans in enumerate(turn_ranges(turn_index)):
            row, f = ids[i, : int(att[i].sum())].tolist(), batch.fields[i]
            observations = list(f["agent_observation_texts"]) + [None] * len(spans)
            for t, (s, e) in enumerate(spans):
                obs = "" if observations[t] is None else str(observations[t]).strip()
                if t == len(spans) - 1:  # the last turn: its reply (if any) and the outcome
                    obs = " ".join(x for x in (obs, self.params.final.format(reward=float(f["agent_reward"]))) if x)
                feedback = obs or "nothing"
                a = s + action_start(row[s:e], self.params.action_marker, self.decode)
                if a >= e:
                    continue
                note = self.encode(self.params.template.format(feedback=feedback))
                probes.append((i, a, e, row[:s] + note + row[s:e], len(note)))
                action[i, a:e] = 1.0
        student = self.logprobs([ids[i, : int(att[i].sum())].tolist() for i in range(len(ids))])
        conditioned = self.logprobs([p[3] for p in probes])
        for (i, a, e, _, off), lp in zip(probes, conditioned):
            delta[i, a:e] = lp[a + off : e + off] - student[i][a:e]
        return out

    def logprobs(self, seqs: list[list[int]]) -> list[torch.Tensor]:
        """Teacher-forced log-probs (position t: log p(x_t | x_<t)) of each sequence, micro-batched."""
        model, out, size = self.services.policy_model, [], max(1, self.services.micro_batch_size)
        was = model.training
        model.eval()
        dev = next(model.parameters()).device
        for s in range(0, len(seqs), size):
            chunk = seqs[s : s + size]
            width = max(len(q) for q in chunk)
            x = torch.zeros((len(chunk), width), dtype=torch.long)
            m = torch.zeros_like(x)
            for j, q in enumerate(chunk):
                x[j, : len(q)], m[j, : len(q)] = torch.tensor(q), 1
            lp = self.services.token_logprobs(model, x.to(dev), m.to(dev)).float().cpu()  # (B, W)
            out.extend(lp[j, : len(q)] for j, q in enumerate(chunk))
        model.train(was)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.steps = int(state["steps"])


@ADVANTAGES.register(
    "serl",
    params=SerlParams,
    state=SerlState,
    paper=papers.SERL,
    fidelity="reduced",
    departures=(
        "immediate feedback only (the turn's next observation; the last turn: its reply and the outcome); the "
        "paper's future-trajectory, successful-sibling and anchor-level feedback and its LLM judge are not built",
        "the feedback is inserted into the trajectory's token stream before the turn (`template`), not rebuilt "
        "as a new chat prompt: one no-grad forward per turn on CPU-sized models",
        "action tokens = the turn's tokens after the last `action_marker`, where the authors parse the "
        "environment's action",
    ),
)
def serl(inp: AdvantageInput, cfg, params: SerlParams = SerlParams()) -> torch.Tensor:
    """SERL (Li et al., 2026, arXiv:2605.19447): the policy conditioned on each step's feedback is a hindsight
    teacher whose log-prob gap to the unconditioned policy reweights the GRPO advantage on action tokens.

    A_t = A_i ((1 - lambda_k) + lambda_k clip(exp(sign(A_i) delta_t), 1 - c, 1 + c)) on action tokens
    (extras serl_action), A_i (GRPO's outcome advantage) on the other completion tokens; delta_t =
    extras serl_delta = log pi(a_t | h, feedback) - log pi(a_t | h), lambda_k = extras serl_lambda (the
    strength faded over training), all from `SerlState` (see ascent.algorithms.hindsight for the feedback
    used and the departures from the paper). delta = 0 or lambda_k = 0 gives GRPO.
    """
    for key in (DELTA, ACTION, LAMBDA):
        if key not in inp.extras:
            raise ValueError(f"serl needs extras[{key!r}] (its SerlState computes it before the advantages)")
    base = _grpo_seq(inp, cfg).double()  # (N,)
    lam = float(inp.extras[LAMBDA].reshape(-1)[0])
    signed = (torch.sign(base)[:, None] * inp.extras[DELTA].double()).clamp(-20.0, 20.0)  # (N, T)
    w = torch.exp(signed).clamp(1.0 - params.weight_clip, 1.0 + params.weight_clip)
    on = (inp.extras[ACTION] > 0) & (inp.mask > 0)
    blended = torch.where(on, (1.0 - lam) + lam * w, torch.ones_like(w))
    return (base[:, None] * blended * inp.mask.double()).to(torch.float32)


serl.requires = frozenset({DELTA, ACTION, LAMBDA})
