"""The search_world task: held-out questions from worlds never trained on, the question-type filter, and
the warm-start oracles (guessing only on the chosen types, reading facts from search hits, quoting)."""

from __future__ import annotations

import random

import pytest

from ascent.agents import AgentConfig, ScriptedEngine, rollout, with_chat_template
from ascent.config.schema import DataConfig
from ascent.envs.search_world import ALPHABET
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.search_world import SearchWorldParams, SearchWorlds, search_world_task

CFG = SearchWorldParams(
    people=4,
    companies=2,
    cities=2,
    countries=1,
    questions_per_world=3,
    top_k=1,
    snippet_chars=160,
    relations=["employer", "headquarters", "population", "capital"],
    oracle_open=False,
)
LOOP = AgentConfig(max_turns=5, max_turn_tokens=200, max_total_tokens=3000)


def episodes(cfg, rows, seed=0):
    worlds = SearchWorlds(cfg)
    tok = with_chat_template(char_tokenizer(ALPHABET))
    engine = ScriptedEngine(tok, worlds.demonstrator(rows, random.Random(seed)))
    return rollout(engine, Policy(None, tok), [worlds.env_task(r) for r in rows], worlds.make_env, LOOP)


def test_held_out_worlds_are_disjoint_and_types_filtered():
    task = search_world_task(DataConfig(task="search_world", num_train=60, num_eval=12), seed=3, params=CFG)
    assert len(task.train) == 60 and len(task.eval) == 12
    assert not {r["world_seed"] for r in task.train} & {r["world_seed"] for r in task.eval}
    assert not {r["prompt"] for r in task.train} & {r["prompt"] for r in task.eval}
    assert {r["path"][-1] for r in task.train + task.eval} <= set(CFG.relations)
    again = search_world_task(DataConfig(task="search_world", num_train=60, num_eval=12), seed=3, params=CFG)
    assert again.train == task.train and again.eval == task.eval
    with pytest.raises(ValueError, match="unknown"):
        SearchWorlds(SearchWorldParams(relations=["colour"]))


def test_searching_oracle_answers_from_the_hit_and_quotes_it():
    worlds = SearchWorlds(CFG)
    rows = worlds.rows(8, range(10, 20), set())
    cfg = SearchWorldParams(**{**CFG.__dict__, "oracle_p_guess": 0.0, "oracle_p_redundant": 0.0, "oracle_quote": True})
    for t, r in zip(episodes(cfg, rows), rows):
        assert t.reward == 1.0 and t.info["supported"] and t.info["tool_call_names"] == ["search"] and len(t.turns) == 2
        quote, answer = t.turns[-1].text.split(" <answer>")
        assert answer == f"{r['answer']}</answer>" and quote.startswith("<evidence>") and quote.endswith("</evidence>")
        quote = quote.removeprefix("<evidence>").removesuffix("</evidence>")
        assert r["answer"] in quote and quote.endswith(".") and quote == r["evidence_sentence"]
        assert quote in t.messages[2]["content"], "the quote is a sentence of the search hit"
        assert quote in r["evidence_doc"] and r["evidence_doc"] in t.messages[2]["content"]


def test_oracle_guesses_only_on_its_blind_spot():
    worlds = SearchWorlds(CFG)
    rows = worlds.rows(40, range(30, 60), set())
    cfg = SearchWorldParams(**{**CFG.__dict__, "oracle_p_guess": 1.0, "oracle_guess_relations": ["population"]})
    for t, r in zip(episodes(cfg, rows), rows):
        guessed = t.info["num_tool_calls"] == 0
        assert guessed == (r["path"][-1] == "population") and (not guessed or not t.info["supported"])
    assert any(r["path"][-1] == "population" for r in rows) and any(r["path"][-1] != "population" for r in rows)


def test_tokenizer_pieces_shorten_episodes_and_split_names_the_same_everywhere():
    """With `tokenizer_pieces` a name is the same ids in the question, the tool call, the document and the
    answer (so copying it is copying a few tokens), text round-trips, and scripted episodes pass the token
    checker; an episode is several times shorter than in characters."""
    from ascent.agents.token_check import check_trajectories
    from ascent.envs.search_world import tokenizer_pieces

    rows = SearchWorlds(CFG).rows(12, range(60, 70), set())
    cfg = SearchWorldParams(**{**CFG.__dict__, "oracle_p_guess": 0.0, "oracle_p_redundant": 0.0, "oracle_quote": True})
    worlds = SearchWorlds(cfg)
    chars = with_chat_template(char_tokenizer(ALPHABET))
    pieces = with_chat_template(char_tokenizer(ALPHABET, tokenizer_pieces(cfg.prompt)))
    lengths = {}
    for name, tok in (("chars", chars), ("pieces", pieces)):
        engine = ScriptedEngine(tok, worlds.demonstrator(rows, random.Random(0)))
        trajs = rollout(engine, Policy(None, tok), [worlds.env_task(r) for r in rows], worlds.make_env, LOOP)
        assert check_trajectories(trajs, tok)["match_frac"] == 1.0
        assert all(t.reward == 1.0 for t in trajs)
        lengths[name] = sum(len(t.ids) for t in trajs)
        if name == "pieces":
            for t, r in zip(trajs, rows):
                subject = worlds.env_task(r).world.docs[worlds.env_task(r).question.subject].title
                name_ids = tok(subject, add_special_tokens=False)["input_ids"]
                assert 2 <= len(name_ids) <= 6
                hay = t.ids
                hits = sum(hay[i : i + len(name_ids)] == name_ids for i in range(len(hay)))
                assert hits >= 4, "question, query, search hit title and text all hold the name's ids"
                assert tok.decode(t.ids, skip_special_tokens=False).count(subject) == hits
    assert lengths["chars"] > 3 * lengths["pieces"]


def test_evidence_and_grounding_rewards_tell_searched_answers_from_guesses():
    """On the quoting oracle's episodes, as the rewards see them (the packed completion holds the tool responses):
    a searched answer's evidence span is the row's `evidence_sentence` (BM25 coverage 1), a guess has none, so
    `evidence_rm` ranks every searched episode of a group above every guess; `source_similarity` against
    `evidence_doc` also scores searched episodes (which read the document) above guesses."""
    from ascent.agents.trajectory import pack_trajectories
    from ascent.rewards.evidence import evidence_of
    from ascent.rewards.runner import resolve_reward

    rows = SearchWorlds(CFG).rows(16, range(80, 100), set())
    cfg = SearchWorldParams(**{**CFG.__dict__, "oracle_p_guess": 0.5, "oracle_p_redundant": 0.0, "oracle_quote": True})
    trajs = episodes(cfg, rows, seed=1)
    batch = pack_trajectories(trajs, with_chat_template(char_tokenizer(ALPHABET)))
    searched = [t.info["num_tool_calls"] > 0 for t in trajs]
    assert 3 <= sum(searched) <= 13, "the coin gives both kinds"
    fields = {k: [r[k] for r in rows] for k in ("evidence_sentence", "evidence_doc", "answer")}  # the rows' fields
    for c, r, s in zip(batch.completions, rows, searched):
        assert evidence_of(c, r"<evidence>(.*?)</evidence>") == (r["evidence_sentence"] if s else None)
    eapo = resolve_reward("evidence_rm(scorer='source_similarity(source_field=evidence_sentence)')")
    scores = eapo(batch.prompts, batch.completions, group=[0] * len(rows), **fields)
    assert eapo.metrics()["evidence_rm/found_frac"] == pytest.approx(sum(searched) / len(rows))
    assert min(x for x, s in zip(scores, searched) if s) > 0 > max(x for x, s in zip(scores, searched) if not s)
    grounding = resolve_reward("source_similarity(source_field=evidence_doc)")(
        batch.prompts, batch.completions, **fields
    )
    assert min(x for x, s in zip(grounding, searched) if s) > max(x for x, s in zip(grounding, searched) if not s)
