"""The search world's oracle with a markup (`search_world(oracle_markup=cite|meta|soar)`): the tags are whole tokens,
the rewards that read them score the oracle's own episodes as computed by hand, and its mistakes come at the set
rate; `eval.metrics` reports such a reward next to accuracy."""

from __future__ import annotations

import random

import pytest
import torch

from ascent.agents import AgentConfig, ScriptedEngine, rollout
from ascent.agents.collector import pack_episodes
from ascent.algorithms.soar import stream_rewards
from ascent.config.schema import DataConfig
from ascent.policy.model import Policy
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.tasks.search_markup import MARKUP_PIECES
from ascent.tasks.search_world import SearchWorldParams, SearchWorlds, search_world_task
from ascent.trainer.evaluate import Evaluator, metric_key

RECIPE = dict(  # the search-agent recipe's world and oracle
    people=6,
    companies=3,
    cities=3,
    countries=2,
    questions_per_world=4,
    hops=[1],
    relations=["employer", "headquarters", "population", "capital"],
    top_k=1,
    snippet_chars=160,
    oracle_p_guess=0.7,
    oracle_guess_relations=["employer"],
    oracle_p_redundant=0.6,
    oracle_open=False,
)
LOOP = AgentConfig(max_turns=5, max_turn_tokens=40, max_total_tokens=400)  # the recipe's limits


def run(markup, n=40, seed=0, **over):
    """The oracle's episodes on n held-out rows, the rows, the task's tokenizer and the packed batch's reward fields."""
    cfg = SearchWorldParams(**{**RECIPE, "oracle_markup": markup, **over})
    task = search_world_task(DataConfig(task="search_world", num_train=8, num_eval=n), seed=seed, params=cfg)
    worlds = SearchWorlds(cfg)
    rows = task.eval
    engine = ScriptedEngine(task.tokenizer, worlds.demonstrator(rows, random.Random(seed)))
    policy = Policy(None, task.tokenizer)
    trajs = rollout(engine, policy, [worlds.env_task(r) for r in rows], worlds.make_env, LOOP)
    batch = pack_episodes(trajs, rows, 1, task.tokenizer)
    return trajs, rows, task.tokenizer, batch


def score(name, batch):
    fields = batch.reward_fields()
    cols = {k: [f.get(k) for f in fields] for k in {k for f in fields for k in f}}
    return resolve_reward(name)(batch.prompts, batch.completions, **cols)


@pytest.mark.parametrize("markup", ["cite", "meta", "soar"])
def test_tags_are_whole_tokens_and_turns_fit_the_recipe(markup):
    trajs, _, tok, _ = run(markup)
    for piece in MARKUP_PIECES[markup]:
        assert len(tok(piece, add_special_tokens=False)["input_ids"]) == 1, piece
    assert all(t.finish_reason == "done" for t in trajs), "no turn is cut by max_turn_tokens=40"
    text = " ".join(u.text for t in trajs for u in t.turns)
    assert all(p in text for p in MARKUP_PIECES[markup][:2])
    with pytest.raises(ValueError, match="oracle_markup"):
        SearchWorldParams(oracle_markup="bibtex")


def test_cite_rubric_of_the_oracles_episodes_by_hand():
    """Rubric (one hop) = 1 iff the answer is right and the cited document is the evidence, and was seen; C-GRPO =
    0.7 o + 0.3 o rubric. Without mistakes every searched answer scores 1; every mistake cites wrongly or not at all."""
    trajs, rows, _, batch = run("cite", n=60, oracle_markup_error=0.3)
    rubric, cgrpo = score("citation_rubric", batch), score("c_grpo", batch)
    mistakes = searched = 0
    for t, r, x, y in zip(trajs, rows, rubric, cgrpo):
        last = t.turns[-1].text
        right = t.reward == 1.0
        cited = last[len("<cite>") : last.find("</cite>")] if last.startswith("<cite>") else None
        if t.info["num_tool_calls"] == 0:
            assert cited is None and x == 0.0
        else:
            searched += 1
            mistakes += cited != r["evidence"][0]
            assert cited is None or cited in t.info["docs_retrieved"] or cited != r["evidence"][0]
        assert x == float(right and cited == r["evidence"][0])
        assert y == pytest.approx(0.7 * right + 0.3 * right * x)
    assert searched >= 20 and 0.1 <= mistakes / searched <= 0.5, "mistakes at about the set rate 0.3"
    _, _, _, clean = run("cite", n=20, oracle_p_guess=0.0, oracle_markup_error=0.0)
    assert score("citation_rubric", clean) == [1.0] * 20 and score("c_grpo", clean) == [1.0] * 20
    _, _, _, wrong = run("cite", n=20, oracle_p_guess=0.0, oracle_markup_error=1.0)
    assert score("citation_rubric", wrong) == [0.0] * 20 and score("c_grpo", wrong) == [pytest.approx(0.7)] * 20


def test_meta_tag_scores_of_the_oracles_episodes_by_hand():
    """RLVMR's rules on the tagging oracle: <plan> in turn 0 scores the episode's success, <explore> on a new search
    +1 and on the repeated one -1; the episode's reward is the mean over its tags."""
    _, _, _, clean = run("meta", n=20, oracle_p_guess=0.0, oracle_p_redundant=0.0, oracle_markup_error=0.0)
    assert score("meta_tags", clean) == [1.0] * 20  # plan (success) 1, explore 1
    _, _, _, again = run("meta", n=20, oracle_p_guess=0.0, oracle_p_redundant=1.0, oracle_markup_error=0.0)
    assert score("meta_tags", again) == [pytest.approx(1 / 3)] * 20  # 1, 1 and -1 for the repeated search
    _, _, _, bare = run("meta", n=20, oracle_markup_error=1.0)
    assert score("meta_tags", bare) == [0.0] * 20  # every tag dropped
    trajs, _, _, batch = run("meta", n=60, oracle_markup_error=0.3)
    values = score("meta_tags", batch)
    for t, v in zip(trajs, values):
        texts = [u.text for u in t.turns]
        tags = []
        for k, text in enumerate(texts):
            if "<plan>" in text:
                tags.append(float(k == 0 and t.reward == 1.0))
            if "<explore>" in text:
                call = text[text.find("<tool_call>") :]
                tags.append(-1.0 if any(call in earlier for earlier in texts[:k]) else 1.0)
        assert v == pytest.approx(sum(tags) / len(tags) if tags else 0.0)
    plans = sum("<plan>" in t.turns[0].text for t in trajs)
    assert 0.5 <= plans / len(trajs) <= 0.9, "plans dropped at about the set rate 0.3"


def test_soar_sources_and_streams_of_the_oracles_episodes_by_hand():
    """Without mistakes a searched answer quotes the hit (r_ext 1) under <source>external</source>, a guess writes
    itself as internal (r_int 1: nothing was shown): source consistency 1 for both. A guess's mistake claims
    external (consistency 0, r_ext 0: fabricated); a searched answer's either tags internal or fabricates."""
    trajs, _, _, batch = run("soar", n=40, oracle_markup_error=0.0)
    assert score("source_consistency", batch) == [1.0] * 40
    for t, f in zip(trajs, batch.reward_fields()):
        r_ext, r_int = streams(f)
        assert (r_ext, r_int) == ((1.0, None) if t.info["num_tool_calls"] else (None, 1.0))
    trajs, _, _, batch = run("soar", n=40, oracle_markup_error=1.0)
    for t, c, f in zip(trajs, score("source_consistency", batch), batch.reward_fields()):
        r_ext, r_int = streams(f)
        if t.info["num_tool_calls"] == 0:
            assert c == 0.0 and r_ext == 0.0 and r_int is None
        else:
            assert (c == 0.0 and r_ext == 1.0) or (c == 1.0 and r_ext < 1.0)


def streams(fields):
    """SOAR's (r_ext, r_int) of one packed episode, as the advantage `soar` computes them."""
    return stream_rewards(fields["agent_turn_texts"], [o for o in fields["agent_observation_texts"] if o])


def test_eval_metrics_report_a_further_grader_on_the_greedy_episodes():
    """`eval.metrics`: the Evaluator reports `score_NAME`, the grader's mean over the held-out episodes."""
    cfg = SearchWorldParams(**{**RECIPE, "oracle_markup": "cite", "oracle_markup_error": 0.0, "oracle_p_guess": 0.0})
    task = search_world_task(DataConfig(task="search_world", num_train=8, num_eval=12), seed=0, params=cfg)
    worlds = SearchWorlds(cfg)
    engine = ScriptedEngine(task.tokenizer, worlds.demonstrator(task.eval, random.Random(0)))
    evaluator = Evaluator(
        task.eval,
        None,
        engine,
        RewardRunner(["answer_em"], None),
        None,
        agent=task.agent,
        loop=LOOP,
        metrics={metric_key("citation_rubric"): RewardRunner(["citation_rubric"], None)},
    )
    result = evaluator(Policy(torch.nn.Linear(1, 1), task.tokenizer))
    assert result["accuracy"] == 1.0 and result["score_citation_rubric"] == 1.0
