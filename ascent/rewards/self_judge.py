"""The policy as its own referee: `reward=self_judge(k=4)` is the generative `judge` with the policy being trained as
the judge model.

URPO (Lu et al. 2025, "URPO: A Unified Reward & Policy Optimization Framework for Large Language Models",
arXiv:2507.17515) makes one model both player and referee: in a single GRPO loop it answers the prompts and scores
its own open-ended answers, while prompts with a ground truth keep their verifiable reward. Here: the live policy
judges each completion k times with the `judge` reward's prompt, parser and vote (`ascent/rewards/judge.py`,
DeepSeek-GRM style: principles, critique, `Score: N` in [1, 10]),

    r_i = (mean of the valid scores s_ij the current policy π_θ writes for (x_i, y_i) − 1) / 9,   None if too few,

so the referee changes with every policy update (the judgement cache is emptied at each call). With
`unless_field=answer` the reward abstains (None) on rows that carry that field, so `reward=[exact_answer,
'self_judge(unless_field=answer)']` gives the verifier's reward where there is a ground truth and the policy's own
judgement elsewhere: URPO's mix of verifiable and open-ended data.

The referee role's own training (URPO's preference data recast as judging tasks in the same GRPO batch) is a
property of the data, not of this reward: give the batch judging rows whose prompt is a candidate to judge and
whose `answer` is the verdict, so a verifier trains the referee while `self_judge(unless_field=answer)` scores the
open-ended rows with it (`data.task=addition(referee_rows=0.5, open_ended=true)` and
`reward=[exact_answer, 'self_judge(format=verdict,unless_field=answer)']`; docs/results.md §4h). `format=verdict`
is the compact referee such a toy policy can learn: the judge prompt is `verdict_template` (the question and the
answer, then `?`), the policy's next token is sampled k times, `1` votes correct, `0` wrong, anything else is a
failure (no vote), and r_i = the share of `1` among the valid votes:

    r_i = mean_j [t_ij = 1] over the k sampled verdict tokens t_ij ∈ {0, 1} of π_θ(· | template(x_i, y_i)),
          None if fewer than min_votes are 0 or 1.

The trainer hands the policy to the reward when RL starts (`RewardRunner.attach_policy`); where there is none (the
held-out evaluation's own reward runner, Ray reward workers) the reward fails with a message saying so, which the
reward runner records: give `eval.reward` a verifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.rewards.judge import GenerativeJudge, JudgementCache, JudgeParams
from ascent.typed import ConfigError, build

POLICY = "policy"
"""The `model` a self-judge reports: the policy being trained."""


@dataclass(frozen=True)
class SelfJudgeParams(JudgeParams):
    """The `judge` knobs (k, max_new_tokens, temperature, min_votes, force_score, ...) with the policy as the
    model, and `unless_field`."""

    model: str = POLICY
    """Always `policy`: the model being trained judges (for another model use `judge(model=...)`)."""
    unless_field: str = ""
    """Abstain (None) on rows that carry this field (e.g. `answer`: leave them to a verifier); empty: judge all."""
    format: str = "judge"
    """`judge`: the `judge` reward's prompt (principles, critique, `Score: N`); `verdict`: `verdict_template` and one
    sampled verdict token per judgement, `1` correct / `0` wrong (a referee a small policy can be trained to be)."""
    verdict_template: str = "{question}{answer}?"
    """The `verdict` judge prompt: `{question}` the task prompt, `{answer}` the completion (stripped)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model != POLICY:
            raise ValueError("the judge is the policy (model=policy); for another model use judge(model=...)")
        if self.meta_rm:
            raise ValueError("self_judge has no meta-RM-guided vote (meta_rm): the referee is the policy alone")
        if self.format not in ("judge", "verdict"):
            raise ValueError(f"format must be judge or verdict, got {self.format!r}")


@REWARDS.register(
    "self_judge",
    params=SelfJudgeParams,
    paper=papers.URPO,
    fidelity="reduced",
    departures=(
        (
            "the referee role is trained only where the task supplies judging rows (addition(referee_rows=...), a "
            "synthetic preference set built from the task's own labels, pointwise verdicts instead of URPO's N-way "
            "rankings of preference triples); other tasks' referee improves only as the policy does"
        ),
        "format=verdict (one sampled verdict token, 1 or 0) is ascent's compact referee for scratch policies",
    ),
)
class SelfJudge(GenerativeJudge):
    """The policy judges its own completions: r = (mean_j s_j − 1) / 9 over the valid `Score: N` of k judgements the
    current policy writes (the `judge` reward with model = the policy; URPO's player as referee, Lu et al. 2025,
    arXiv:2507.17515). `unless_field=F`: None on rows with a field F (leave them to a verifier)."""

    def __init__(self, **params: Any) -> None:
        from ascent.rollout.backends import make_engine

        self.params = p = build(SelfJudgeParams, params, "self_judge")
        self.unless_field = p.unless_field
        self.model: Optional[torch.nn.Module] = None
        self.tokenizer: Any = None
        try:
            self.engine = make_engine(p.backend)
        except (ValueError, KeyError) as err:
            raise ConfigError(f"self_judge: backend={p.backend!r}: {err}") from None
        self.generator = torch.Generator().manual_seed(p.seed)
        self.meta_rm = None  # GenerativeJudge's meta-RM-guided vote: not for a self-judge
        self.cache = JudgementCache(0)  # the referee changes with every update: nothing is reused
        self.config_key = "self_judge"
        self.engine_calls = 0
        self.last_votes = []
        self._metrics = {}
        self.__name__ = "self_judge"

    def attach_policy(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """The live policy (called by `RewardRunner.attach_policy` when RL starts)."""
        self.model, self.tokenizer = model, tokenizer

    def place(self, device: str) -> None:
        """The policy is on the learner's device already."""

    def state_dict(self) -> dict[str, Any]:
        """The judgements' sampling generator (the policy's weights are the trainer's)."""
        return {"generator": self.generator.get_state(), "engine_calls": self.engine_calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.engine_calls = int(state.get("engine_calls", 0))

    def __call__(self, prompts: list[str], completions: list[str], **fields: Any) -> list[Optional[float]]:
        if self.model is None:
            raise RuntimeError(
                "self_judge has no policy to judge with: it works inside RL training only (the held-out "
                "evaluation and Ray reward workers have none); set eval.reward to a verifier"
            )
        skip = fields.get(self.unless_field) if self.unless_field else None
        todo = [i for i in range(len(prompts)) if skip is None or skip[i] is None]
        was_training = self.model.training
        self.model.eval()
        judge = self._verdicts if self.params.format == "verdict" else super().__call__
        try:
            judged = judge([prompts[i] for i in todo], [completions[i] for i in todo]) if todo else []
        finally:
            self.model.train(was_training)
        if not todo:
            self._metrics = {}
        out: list[Optional[float]] = [None] * len(prompts)
        for i, r in zip(todo, judged):
            out[i] = r
        self._metrics["judge/deferred_frac"] = 1.0 - len(todo) / max(len(prompts), 1)
        return out

    @torch.no_grad()
    def _verdicts(self, prompts: list[str], completions: list[str]) -> list[Optional[float]]:
        """`format=verdict`: k verdict tokens sampled from π_θ(· | verdict_template(x, y)) per sample; the share
        of `1` among the valid (`0` / `1`) ones, None below min_votes."""
        p, tok = self.params, self.tokenizer
        accept, reject = tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("0")
        device = next(self.model.parameters()).device
        out: list[Optional[float]] = []
        n_valid = n_accept = 0
        for s in range(0, len(prompts), p.micro_batch_size):
            texts = [
                p.verdict_template.format(question=q, answer=a.strip())
                for q, a in zip(prompts[s : s + p.micro_batch_size], completions[s : s + p.micro_batch_size])
            ]
            ids = [tok(t)["input_ids"] for t in texts]
            width = max(len(x) for x in ids)
            batch = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)  # (B, T), right-padded
            mask = torch.zeros((len(ids), width), dtype=torch.long)
            for i, x in enumerate(ids):
                batch[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
            logits = self.model(input_ids=batch.to(device), attention_mask=mask.to(device)).logits  # (B, T, V)
            last = logits[torch.arange(len(ids)), mask.sum(1).to(device) - 1].float().cpu()  # (B, V)
            if p.temperature == 0:
                draws = last.argmax(-1, keepdim=True).expand(-1, p.k)  # (B, k)
            else:
                probs = torch.softmax(last / p.temperature, -1)
                draws = torch.multinomial(probs, p.k, replacement=True, generator=self.generator)  # (B, k)
            ones, zeros = (draws == accept).sum(1), (draws == reject).sum(1)  # (B,)
            for o, z in zip(ones.tolist(), zeros.tolist()):
                n_valid, n_accept = n_valid + o + z, n_accept + o
                out.append(o / (o + z) if o + z >= p.min_votes else None)
        self.engine_calls += 1
        judged = len(prompts) * p.k
        self._metrics = {
            "judge/judgements": float(judged),
            "judge/failed_frac": 1.0 - n_valid / max(judged, 1),
            "judge/accept_frac": n_accept / max(n_valid, 1),
        }
        return out
