"""Reward registry, built-in verifiers, user reward loading and the robust runner."""

from ascent.rewards import (  # noqa: F401,E402 - importing registers their rewards
    agentic,  # noqa: F401,E402 - answer_em, answer_f1, trace, source_consistency, citation_rubric, evidence_recall, igpo, round_discount
    alignment,  # noqa: F401,E402 - term_align (TAT-R1 term-alignment rewards, IBM Model 1 aligner)
    constraint_rm,  # noqa: F401,E402 - constraint_rm (label-free constraint-wise classifier reward)
    constraints,
    evidence,  # noqa: F401,E402 - evidence_rm (group-relative evidence reward)
    evidence_lr,  # noqa: F401,E402 - evidence_lr (an online evidence reward model, EAPO's co-evolution)
    firm,  # noqa: F401,E402 - edit_critic (FIRM's execution / consistency critics for base_and_bonus)
    games,  # noqa: F401,E402 - game_won, game_score
    grounding,  # noqa: F401,E402 - source_similarity (reference-free grounding in the source)
    gui_point,  # noqa: F401,E402 - gui_point (SE-GUI / GUI-G² dense click rewards)
    judge,  # noqa: F401,E402 - judge (a generative judge LM with voting)
    lp_solver,
    meta_tags,  # noqa: F401,E402 - meta_tags (RLVMR's meta-reasoning tag scores; per-turn credit)
    milp_solver,  # noqa: F401,E402 - milp_solver (solver-verified MILP models, SDRL)
    online_rm,  # noqa: F401,E402 - rm_online (a reward model updated on the batches it scores)
    peers,  # noqa: F401,E402 - peer_consensus (majority of the group / of peer models, label-free)
    reward_model,  # noqa: F401,E402 - reward_model (rm:PATH)
    rm_ensemble,  # noqa: F401,E402 - rm_ensemble (mean / min / UWO of several reward models)
    sandbox,  # noqa: F401,E402 - code_tests
    self_judge,  # noqa: F401,E402 - self_judge (the policy judges its own completions)
    shaping,
    sql,  # noqa: F401,E402 - sql_exec (Text-to-SQL execution match)
    steerable,  # noqa: F401,E402 - rapo_step (RAPO's steerable step-level reward)
    temporal,  # noqa: F401,E402 - temporal_iou (AudioMap's event-conditioned temporal IoU)
    workflow,  # noqa: F401,E402 - workflow_exec (FlowReasoner's executed query-level workflow)
)
from ascent.rewards.builtin import REWARDS
from ascent.rewards.runner import RewardResult, RewardRunner, RewardSpecError, resolve_reward

__all__ = ["REWARDS", "RewardResult", "RewardRunner", "RewardSpecError", "resolve_reward"]
