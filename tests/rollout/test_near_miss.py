"""DAVID-GRPO's grounded expansion (`rollout.explorer=near_miss`, ascent/rollout/near_miss.py) and the agent loop's
resumed episodes it is built on (`ascent.agents.loop.acontinue`): the near-miss choice by hand, a resumed episode
replaying its prefix into a fresh environment with the prefix out of the loss, and the explorer turning a round of
near misses into successes within the same budget."""

from __future__ import annotations

import pytest
import torch

from ascent.agents import AgentConfig, ScriptedEngine, continue_episodes, rollout, with_chat_template
from ascent.agents.collector import AgentCollector
from ascent.data.samplers import Draw
from ascent.envs.search_world import OracleAgent, SearchWorld, SearchWorldEnv, WorldConfig
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.runner import RewardRunner
from ascent.rollout.explorers import EXPLORERS, ExplorerContext
from ascent.rollout.near_miss import NearMissParams, near_miss_plan, recall_by_turn
from tests.agents.test_agent_loop import ALPHABET

LOOP = AgentConfig(max_turns=6, max_turn_tokens=200, max_total_tokens=4000)


@pytest.fixture(scope="module")
def tok():
    return with_chat_template(char_tokenizer(ALPHABET))


@pytest.fixture(scope="module")
def world():
    return SearchWorld(WorldConfig(num_people=8, num_companies=3, num_cities=3, num_countries=2, seed=0))


class WrongFirst:
    """The search_world oracle (search, open, per hop, then answer), except that its first `wrong` answers are
    wrong: near misses that gathered all the evidence."""

    def __init__(self, world, questions, wrong: int) -> None:
        self.oracle, self.wrong = OracleAgent(world, questions, p_guess=0.0, p_redundant=0.0), wrong

    def __call__(self, context: str) -> str:
        reply = self.oracle(context)
        if reply.startswith("<answer>") and self.wrong > 0:
            self.wrong -= 1
            return "<answer>nobody</answer>"
        return reply


def test_recall_and_plan_by_hand():
    assert recall_by_turn(["d1", "d2"], ["[d2] a", None, "[d1] [d2]"]) == [0.5, 0.5, 1.0]
    f = lambda obs, ev=("d1", "d2"): {"evidence": list(ev), "agent_observation_texts": obs}  # noqa: E731
    fields = [
        f(["[d1]", "[d2]", None]),  # recall 1.0 after turn 2: cut 2
        f(["[d1]", "x", "y", None]),  # recall 0.5 after turn 1: cut 1
        f(["x", None]),  # recall 0: not a near miss
        f(["[d1]", "[d2]", None]),  # a success
        f(["[d1]", None]),  # invalid (NaN)
        f(["x", "x", "[d1] [d2]", None]),  # recall 1.0 only after turn 3 = max_turns - 1: no turn left, skipped
    ]
    rewards = torch.tensor([0.0, 0.0, 0.0, 1.0, float("nan"), 0.0])
    p = NearMissParams(resample=3)
    assert near_miss_plan(rewards, fields, 6, 3, p) == [[(0, 2), (1, 1), (0, 2)]]
    assert near_miss_plan(rewards, fields, 3, 3, p) == [[(0, 2), (1, 1), (0, 2)], [None, None, None]]
    assert near_miss_plan(rewards, fields, 6, 3, NearMissParams(resample=1, min_recall=0.5)) == [[(0, 2)]]
    assert near_miss_plan(rewards, fields, 6, 3, NearMissParams(resample=1, threshold=0.0)) == [[None]]


def test_resumed_episode_replays_its_prefix_out_of_the_loss(tok, world):
    questions = world.questions(20, hops=2)[:2]
    make_env = lambda: SearchWorldEnv(world, top_k=1, prompt="Q: {question}")  # noqa: E731
    policy = Policy(model=None, tokenizer=tok)
    first = rollout(
        ScriptedEngine(tok, WrongFirst(world, questions, 2), logprob=-0.5), policy, questions, make_env, LOOP
    )
    assert [t.reward for t in first] == [0.0, 0.0] and [len(t.turns) for t in first] == [5, 5]
    engine = ScriptedEngine(tok, WrongFirst(world, questions, 0), logprob=-0.25)
    starts = [(q, t, 3) for q, t in zip(questions, first)] + [(questions[0], None, 0)]
    again = continue_episodes(engine, policy, starts, make_env, LOOP)
    assert len(engine.contexts) == 2 * 2 + 5  # two new turns per resumed episode, five for the fresh one
    for t, old in zip(again[:2], first):
        end = old.turns[2].observation[1]
        assert t.ids[:end] == old.ids[:end] and t.ids != old.ids
        assert set(t.loss_mask[:end]) == {0} and set(t.sampled_logprobs[:end]) == {0.0}
        new = [lp for lp, m in zip(t.sampled_logprobs, t.loss_mask) if m]
        assert new and set(new) == {-0.25}
        assert t.reward == 1.0 and len(t.turns) == 5 and t.turns[:3] == old.turns[:3]
        # the replayed environment saw the prefix's searches: both gold documents count as retrieved
        assert t.info["correct"] and t.info["evidence_recall"] == 1.0 and t.info["num_tool_calls"] == 4
    assert again[2].reward == 1.0 and set(again[2].loss_mask[: again[2].prompt_len]) == {0}
    with pytest.raises(ValueError, match="no observation followed"):
        continue_episodes(engine, policy, [(questions[0], first[0], 5)], make_env, LOOP)


def test_explorer_resumes_near_misses_within_the_budget(tok, world):
    questions = world.questions(20, hops=2)[:2]
    rows = [
        {"prompt": q.question, "answer": q.answer, "evidence": list(q.evidence), "q": i}
        for i, q in enumerate(questions)
    ]

    class Task:
        make_env = staticmethod(lambda: SearchWorldEnv(world, top_k=1, prompt="Q: {question}"))
        env_task = staticmethod(lambda row: questions[row["q"]])

    n, fresh = 4, 2
    engine = ScriptedEngine(tok, WrongFirst(world, questions, len(rows) * fresh))
    policy = Policy(model=torch.nn.Linear(1, 1), tokenizer=tok)  # the scripted engine never calls the model
    collector = AgentCollector(policy, rows, engine, Task(), LOOP, n)
    runner = RewardRunner(["answer_em"])
    ctx = ExplorerContext(collector, policy, rows, None, engine, None, n, seed=0, scorer=runner.score)
    explorer = EXPLORERS.resolve("near_miss(resample=2)")(ctx)
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    scores = runner.score(batch.prompts, batch.completions, batch.reward_fields())
    assert len(batch) == 8 and batch.group_index.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert scores.rewards.tolist() == [0.0, 0.0, 1.0, 1.0] * 2  # the fresh ones fail, the resumed ones succeed
    explorer.observe(batch, scores.rewards, scores.valid)
    m = explorer.metrics()
    assert m["explore/near_miss_groups"] == 1.0 and m["explore/resumed"] == 4.0
    assert m["explore/resumed_success"] == 1.0 and m["explore/fresh_success"] == 0.0
    # resumed episodes train on their two new turns only (open the second document, answer)
    assert batch.extras["turn_index"][2][batch.completion_mask[2] > 0].unique().tolist() == [3, 4]
    assert batch.extras["turn_index"][0][batch.completion_mask[0] > 0].unique().tolist() == [0, 1, 2, 3, 4]
    # plain sampling of the same round: every episode of the budget fails
    engine.respond = WrongFirst(world, questions, len(rows) * n)
    plain = collector.collect([0, 1], torch.Generator().manual_seed(0))
    assert runner.score(plain.prompts, plain.completions, plain.reward_fields()).rewards.sum() == 0.0


def test_explorer_refuses_what_it_cannot_do(tok):
    ctx = ExplorerContext(object(), None, [], None, None, None, 4, seed=0, scorer=lambda *a: None)
    with pytest.raises(ValueError, match="agent task"):
        EXPLORERS.resolve("near_miss")(ctx)
    with pytest.raises(ValueError, match="resample"):
        NearMissParams(resample=0)
