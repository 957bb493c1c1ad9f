"""The sql_world task: disjoint train/held-out databases, rows that rebuild their episodes, the oracle's
demonstrations through the agent loop (scored by sql_exec), and both recipes load."""

from __future__ import annotations

import random

import pytest

from ascent.agents import AgentConfig
from ascent.config import load_config
from ascent.config.schema import DataConfig
from ascent.rewards.builtin import REWARDS
from ascent.tasks import demonstrations, task_piece
from ascent.tasks.sql_world import SqlWorldParams, sql_world_task

CFG = SqlWorldParams(
    kinds=["filter", "count", "join", "nested_none"], oracle_p_mistake=1.0, oracle_mistake_kinds=["count"]
)


@pytest.fixture(scope="module")
def task():
    return sql_world_task(DataConfig(task="sql_world", num_train=24, num_eval=8), seed=2, params=CFG)


def test_held_out_databases_are_disjoint_and_deterministic(task):
    assert len(task.train) == 24 and len(task.eval) == 8
    assert not {(r["domain"], r["world_seed"]) for r in task.train} & {
        (r["domain"], r["world_seed"]) for r in task.eval
    }
    assert {r["kind"] for r in task.train + task.eval} <= set(CFG.kinds)
    assert {r["domain"] for r in task.train} == {"library", "school", "shop"}
    again = sql_world_task(DataConfig(task="sql_world", num_train=24, num_eval=8), seed=2, params=CFG)
    assert again.train == task.train and again.eval == task.eval
    assert task.reward == "sql_exec"


def test_rows_rebuild_their_question_and_bad_params_are_clear(task):
    for r in task.eval:
        wq = task.agent.env_task(r)
        assert wq.question.question == r["prompt"] and wq.question.sql == r["answer"]
    with pytest.raises(ValueError, match="unknown"):
        SqlWorldParams(kinds=["filter", "pivot"])
    with pytest.raises(ValueError, match="domains"):
        SqlWorldParams(domains=["zoo"])
    with pytest.raises(ValueError, match="answer_format"):
        SqlWorldParams(answer_format="markdown")
    env = sql_world_task(
        DataConfig(task="sql_world", num_train=4, num_eval=2), seed=2, params=SqlWorldParams(answer_format="sql_block")
    ).agent.make_env()
    assert env.answer_format == "sql_block"


def test_demonstrations_score_by_execution_match(task):
    rows = task.train[:12]
    trajs = demonstrations(
        task.agent, rows, random.Random(0), task.tokenizer, AgentConfig(max_turns=6, max_turn_tokens=200)
    )
    infos = [t.info for t in trajs]
    rewards = REWARDS.get("sql_exec")(["q"] * len(rows), [""] * len(rows), agent_info=infos)
    assert rewards == [t.reward for t in trajs], "sql_exec agrees with the environment's reward"
    for r, reward, info in zip(rows, rewards, infos):
        if r["kind"] != "count":
            assert reward == 1.0 and info["queries_run"] == 1, (r, info)  # the oracle only errs on its blind spot
    counts = [x for r, x in zip(rows, rewards) if r["kind"] == "count"]
    assert counts and set(counts) == {0.0}, "p_mistake=1 on count: always the wrong query"


@pytest.mark.parametrize("recipe", ["sql-agent", "smollm2-sql"])
def test_recipes_load(recipe):
    cfg = load_config(recipe)
    piece = task_piece(cfg.data)
    assert piece.name == "sql_world" and "sql_exec" in str(cfg.reward)
    if cfg.model.source == "scratch":
        assert cfg.agent.max_total_tokens <= cfg.model.max_position_embeddings
    assert cfg.control.enabled
    if recipe == "smollm2-sql":
        assert cfg.control.kind == "rft" and cfg.model.source == "smollm2"
