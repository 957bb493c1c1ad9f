"""search_world: deterministic, BM25 finds named entities, questions are right by construction, info
records support and evidence."""

from __future__ import annotations

import json

import pytest

from ascent.envs import check_env
from ascent.envs.search_world import SearchWorld, SearchWorldEnv, WorldConfig, normalize

SMALL = WorldConfig(num_people=12, num_companies=5, num_cities=5, num_countries=2, seed=3)


@pytest.fixture(scope="module")
def world() -> SearchWorld:
    return SearchWorld(SMALL)


def call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_deterministic_given_seed(world):
    again = SearchWorld(SMALL)
    assert again.docs == world.docs
    assert again.questions(10, hops=2, seed=4) == world.questions(10, hops=2, seed=4)
    other = SearchWorld(WorldConfig(**{**SMALL.__dict__, "seed": 4}))
    assert other.docs != world.docs
    assert len({d.title for d in world.docs.values()}) == len(world.docs), "names must be unique"


def test_bm25_finds_the_gold_doc_of_one_hop_questions_by_name(world):
    questions = world.questions(20, hops=1, seed=0)
    for q in questions:
        name = world.entities[q.subject].name
        hits = [d for d, _ in world.search(name, k=3)]
        assert hits[0] == q.evidence[0], (q, hits)
    assert world.search("zzzz qqqq") == [] and world.search("") == []


def follow(world: SearchWorld, subject: str, path: tuple[str, ...]) -> str:
    """The answer by walking the entities (independent of the question generator)."""
    e = world.entities[subject]
    for step in path[:-1]:
        e = world.entities[e.relations[step]]
    last = path[-1]
    return world.entities[e.relations[last]].name if last in e.relations else e.attributes[last]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_questions_are_right_by_construction(world, hops):
    for q in world.questions(15, hops=hops, seed=1):
        assert q.hops == hops == len(q.path) == len(q.evidence) == len(set(q.evidence))
        assert q.answer == follow(world, q.subject, q.path)
        assert q.evidence[0] == q.subject and world.entities[q.subject].name in q.question
        assert q.answer in world.docs[q.evidence[-1]].text  # the last evidence doc states the answer
        for doc, nxt in zip(q.evidence, q.evidence[1:]):  # each evidence doc names the next entity
            assert world.entities[nxt].name in world.docs[doc].text
        assert normalize(q.answer) not in normalize(q.question)
    with pytest.raises(ValueError, match="hops must be 1, 2 or 3"):
        world.questions(1, hops=4)


def test_scales_by_parameters():
    big = SearchWorld(WorldConfig(num_people=600, num_companies=120, num_cities=80, num_countries=10, seed=0))
    assert len(big.docs) == 810 and len(big.questions(100, hops=3)) == 100
    with pytest.raises(ValueError, match="num_cities"):
        WorldConfig(num_cities=2, num_countries=3)


def test_episode_info_records_calls_docs_and_support(world):
    q = world.questions(1, hops=2, seed=2)[0]
    env = SearchWorldEnv(world, top_k=2)
    check_env(env, q)
    env.reset(q)
    name = world.entities[q.subject].name
    r = env.step(call("search", query=name) + call("open", doc_id=q.evidence[1]) + call("open", doc_id="doc-999"))
    assert not r.done and r.info == {"tool_calls": 3, "tool_errors": 1}
    assert (
        f"[{q.subject}] {name}:" in r.observation
        and "Error: tool 'open' raised ValueError: no document 'doc-999'" in r.observation
    )
    end = env.step(f"<answer>{q.answer.upper()}</answer>")
    assert end.done and end.reward == 1.0
    i = end.info
    assert i["correct"] and i["supported"] and i["evidence_recall"] == 1.0
    assert i["num_tool_calls"] == 3 and i["num_tool_errors"] == 1 and i["tool_call_names"] == ["search", "open", "open"]
    assert i["docs_opened"] == [q.evidence[1]] and q.subject in i["docs_retrieved"]


def test_unsupported_and_wrong_answers(world):
    q = world.questions(1, hops=1, seed=5)[0]
    env = SearchWorldEnv(world)
    env.reset(q)
    guess = env.step(f"<answer>{q.answer}</answer>")  # right, but nothing was retrieved
    assert (
        guess.reward == 1.0
        and guess.info["correct"]
        and not guess.info["supported"]
        and guess.info["evidence_recall"] == 0.0
    )
    env.reset(q)
    env.step(call("open", doc_id=q.subject))
    wrong = env.step("<answer>Nobody</answer>")
    assert wrong.reward == 0.0 and not wrong.info["supported"]
    env.reset(q)
    assert "no tool call and no answer" in env.step("hmm").observation


def test_text_stays_in_the_alphabet_without_blank_lines(world):
    """Character tokenizers map every character of ALPHABET to one token; a run of newlines would not be
    (ascent's char_tokenizer splits on '.', which skips '\\n')."""
    from ascent.envs.search_world import ALPHABET

    env = SearchWorldEnv(world)
    q = world.questions(1, hops=3)[0]
    texts = [
        env.reset(q).text,
        env.step(
            call("search", query=q.question) + call("open", doc_id="doc-001") + call("open", doc_id="x")
        ).observation,
    ]
    texts += [d.text + d.title for d in world.docs.values()]
    for text in texts:
        assert set(text) <= set(ALPHABET) and "\n\n" not in text


def run_oracle(world, questions, n=1, **kw):
    from ascent.agents import AgentConfig, ScriptedEngine, rollout, with_chat_template
    from ascent.envs.search_world import ALPHABET, OracleAgent
    from ascent.policy.model import Policy
    from ascent.policy.tokenizer import char_tokenizer

    tok = with_chat_template(char_tokenizer(ALPHABET))
    engine = ScriptedEngine(tok, OracleAgent(world, questions, **kw))
    return rollout(
        engine,
        Policy(model=None, tokenizer=tok),
        questions,
        lambda: SearchWorldEnv(world, prompt="Q: {question}"),
        AgentConfig(max_turns=12, max_turn_tokens=200, max_total_tokens=6000),
        n=n,
    )


def test_oracle_agent_solves_and_misbehaves_on_request(world):
    questions = world.questions(4, hops=2, seed=7)
    perfect = run_oracle(world, questions, p_guess=0.0, p_redundant=0.0)
    assert all(
        t.reward == 1.0 and t.info["supported"] and t.info["evidence_recall"] == 1.0 and t.info["num_tool_calls"] == 4
        for t in perfect
    )
    guesses = run_oracle(world, questions, p_guess=1.0)
    assert all(t.info["num_tool_calls"] == 0 and not t.info["supported"] and len(t.turns) == 1 for t in guesses)
    redundant = run_oracle(world, questions, p_guess=0.0, p_redundant=1.0)
    assert all(t.reward == 1.0 and t.info["num_tool_calls"] == 6 for t in redundant)
    mixed = run_oracle(world, questions, n=4, p_guess=0.5, p_redundant=0.5, seed=1)
    calls = [t.info["num_tool_calls"] for t in mixed]
    assert len(set(calls)) > 1 and calls == [
        t.info["num_tool_calls"] for t in run_oracle(world, questions, n=4, p_guess=0.5, p_redundant=0.5, seed=1)
    ]
