"""JitRL (Liu et al. 2026, arXiv:2601.18510): the memory's returns, neighbours and advantages (reference values),
the candidate pick, and a frozen tiny model that gets better at a one-turn task with the memory and not without."""

from __future__ import annotations

import string

import pytest
import torch

from ascent.agents import AgentConfig, with_chat_template
from ascent.agents.jitrl import AGENT_DECODERS, JitMemory, JitRL, JitRLParams, action_key, choose
from ascent.envs import Env, Observation, StepResult
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rollout import make_engine
from tests.conftest import tiny_qwen


def test_discounted_returns_and_bounded_memory():
    m = JitMemory(JitRLParams(gamma=0.5, capacity=4))
    m.add_episode(["s0", "s1", "s2"], ["call:search", "call:open", "answer"], [0.0, 0.0, 1.0])
    assert m.returns == [0.25, 0.5, 1.0] and m.keys == ["call:search", "call:open", "answer"]
    m.add_episode(["t0", "t1"], ["call:search", "answer"], [0.5, 1.0])
    assert len(m) == 4 and m.returns == [0.5, 1.0, 1.0, 1.0]  # the oldest step left; 0.5 + 0.5 * 1.0 = 1.0
    with pytest.raises(ValueError, match="differ in length"):
        m.add_episode(["s"], [], [1.0])


def test_neighbours_are_the_most_similar_states_above_the_threshold():
    m = JitMemory(JitRLParams(neighbours=2, min_similarity=0.5, normalize=False, bonus=0.0))
    m.add("what is the employer of kalo miran", "answer", 0.0)  # similarity 5/9 to the query
    m.add("what is the employer of fen tamdel", "call:search", 1.0)  # 7/7
    m.add("what is the population of velmor", "answer", 1.0)  # 4/9: below the threshold
    m.add("what is the employer of fen tamdel", "answer", 0.0)  # 7/7, newer
    assert m.neighbours("What is the employer of Fen Tamdel?") == [3, 1]
    # neighbours 3 (answer, 0) and 1 (search, 1): baseline 0.5; "none" was not taken: baseline + 0 bonus
    assert m.advantages("what is the employer of fen tamdel", ["call:search", "answer", "none"]) == [0.5, -0.5, 0.0]
    assert m.advantages("a state nothing resembles", ["answer", "call:search"]) == [0.0, 0.0]


def test_unseen_actions_get_the_bonus_and_advantages_are_normalised():
    m = JitMemory(JitRLParams(min_similarity=0.0, bonus=0.6))
    for key, ret in [("answer", 0.0), ("answer", 0.0), ("call:search", 1.0)]:
        m.add("s", key, ret)
    # baseline 1/3; values: answer 0, search 1, open (unseen) 1/3 + 0.6 / 3 = 0.5333
    adv = m.advantages("s", ["answer", "call:search", "call:open"])
    raw = [-1 / 3, 2 / 3, 0.2]
    assert adv == pytest.approx([r / (2 / 3) for r in raw])
    m2 = JitMemory(JitRLParams(min_similarity=0.0, bonus=0.0))
    m2.add("s", "answer", 0.0)
    m2.add("s", "answer", 0.0)
    assert m2.advantages("s", ["none"]) == [0.0]  # all equal: no scale, no shift


def test_the_pick_follows_the_shifted_logits():
    assert choose([-1.0, -3.0], [0.0, 1.0], 0.4, "greedy", None) == 1  # -3 + 2.5 > -1
    assert choose([-1.0, -3.0], [0.0, 1.0], float("inf"), "greedy", None) == 0  # no shift: most likely
    g = torch.Generator().manual_seed(0)
    picks = [choose([0.0, 0.0], [0.0, 0.25], 0.25, "sample", g) for _ in range(4000)]
    assert sum(picks) / len(picks) == pytest.approx(torch.sigmoid(torch.tensor(1.0)).item(), abs=0.02)  # e^1/(1+e^1)
    assert action_key('<tool_call>{"name": "open", "arguments": {"doc_id": "d1"}}</tool_call>') == "call:open"
    assert action_key("hello") == "none"
    with pytest.raises(ValueError, match="beta must be > 0"):
        JitRLParams(beta=0.0)
    assert AGENT_DECODERS.entry("jitrl").provenance.fidelity == "reduced"


class FirstLetter(Env):
    """One turn; reward 1 when the turn's first character is a lowercase letter."""

    def reset(self, task):
        return Observation(text="Write one letter.")

    def step(self, action):
        ok = bool(action) and action[0] in string.ascii_lowercase
        return StepResult("", float(ok), True, {"correct": ok})


def success(trajs) -> float:
    return sum(t.reward for t in trajs) / len(trajs)


def test_a_frozen_model_improves_with_the_memory_and_not_without():
    tok = with_chat_template(char_tokenizer(string.ascii_letters + string.digits + string.punctuation + " \n"))
    policy = Policy(model=tiny_qwen(tok, seed=3), tokenizer=tok)
    cfg = AgentConfig(max_turns=1, max_turn_tokens=1, max_total_tokens=120)
    params = JitRLParams(candidates=8, neighbours=400, min_similarity=0.0, beta=0.1, action_key="exact")
    weights = [p.detach().clone() for p in policy.model.parameters()]
    runs = {}
    for name, learn in (("jitrl", True), ("static", False)):
        agent = JitRL(make_engine("ascent"), policy, FirstLetter, cfg, params)
        g = torch.Generator().manual_seed(0)
        rounds = [success(agent.play([None] * 32, g, learn=learn)) for _ in range(4)]
        runs[name] = (rounds, len(agent.memory))
    jit, static = runs["jitrl"][0], runs["static"][0]
    assert runs["jitrl"][1] == 128 and runs["static"][1] == 0
    assert jit[0] == static[0]  # the first round: empty memory on both sides, same samples
    assert sum(jit[2:]) / 2 > sum(static[2:]) / 2 + 0.3, (jit, static)
    assert all(torch.equal(a, b) for a, b in zip(weights, policy.model.parameters()))  # no gradient step
