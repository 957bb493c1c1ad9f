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
judgement elsewhere: URPO's mix of verifiable and open-ended data. Not implemented: URPO's training of the referee
role itself (preference pairs recast as judging tasks inside the GRPO batch); here the referee improves only as
the policy does.

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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model != POLICY:
            raise ValueError("the judge is the policy (model=policy); for another model use judge(model=...)")


@REWARDS.register(
    "self_judge",
    params=SelfJudgeParams,
    paper=papers.URPO,
    fidelity="reduced",
    departures=(
        (
            "the policy judges its own completions but the referee role is not trained (URPO recasts preference data "
            "as judging tasks)"
        ),
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
        try:
            judged = super().__call__([prompts[i] for i in todo], [completions[i] for i in todo]) if todo else []
        finally:
            self.model.train(was_training)
        if not todo:
            self._metrics = {}
        out: list[Optional[float]] = [None] * len(prompts)
        for i, r in zip(todo, judged):
            out[i] = r
        self._metrics["judge/deferred_frac"] = 1.0 - len(todo) / max(len(prompts), 1)
        return out
