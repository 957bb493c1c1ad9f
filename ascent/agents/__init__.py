"""Multi-turn agents: token-exact rollouts over environments (`rollout` -> `Trajectory`), packing into a
`RolloutBatch`, the chat-template pieces they are built from, and the token checker."""

from ascent.agents.chat import CHAR_CHAT_TEMPLATE, ChatFormat, with_chat_template
from ascent.agents.loop import AgentConfig, acontinue, arollout, continue_episodes, cut_turn, rollout
from ascent.agents.scripted import ScriptedEngine
from ascent.agents.token_check import TokenCheck, check_trajectories, check_trajectory
from ascent.agents.trajectory import Trajectory, Turn, pack_trajectories

__all__ = [
    "AgentConfig",
    "CHAR_CHAT_TEMPLATE",
    "ChatFormat",
    "ScriptedEngine",
    "TokenCheck",
    "Trajectory",
    "Turn",
    "acontinue",
    "arollout",
    "check_trajectories",
    "continue_episodes",
    "check_trajectory",
    "cut_turn",
    "pack_trajectories",
    "rollout",
    "with_chat_template",
]
