"""sql_world: the database is generated deterministically, gold SQL is right by construction, queries run
read-only (writes, ATTACH, PRAGMA, endless queries become error observations and leave the file unchanged),
and the execution-match reward compares result sets order-insensitively as multisets."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3

import pytest

from ascent.envs import check_env
from ascent.envs.sql_world import (
    DOMAINS,
    KINDS,
    QueryError,
    SqlEnv,
    SqlOracle,
    SqlWorld,
    SqlWorldConfig,
    canonical,
    guard,
    results_match,
    run_readonly,
)
from ascent.rewards.builtin import REWARDS


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> SqlWorld:
    return SqlWorld(SqlWorldConfig(domain="shop", num_parents=8, seed=5), directory=tmp_path_factory.mktemp("sql"))


def call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# the reward: numeric cases
# ---------------------------------------------------------------------------------------------------------
def test_results_match_is_order_insensitive_but_counts_duplicates():
    gold = [("a", 1), ("b", 2), ("b", 2)]
    assert results_match([("b", 2), ("a", 1), ("b", 2)], gold)
    assert not results_match([("a", 1), ("b", 2)], gold), "a missing duplicate must not match"
    assert not results_match([("a", 1), ("b", 2), ("b", 2), ("b", 2)], gold), "an extra duplicate must not match"
    assert not results_match([("a", 1), ("b", 2), ("a", 1)], gold)
    assert results_match([], []) and not results_match([], [(None,)])


def test_results_match_respects_order_when_asked():
    assert results_match([(3,), (2,), (1,)], [(3,), (2,), (1,)], ordered=True)
    assert not results_match([(1,), (2,), (3,)], [(3,), (2,), (1,)], ordered=True)
    assert results_match([(1,), (2,), (3,)], [(3,), (2,), (1,)], ordered=False)


def test_results_match_nulls_floats_and_types():
    assert results_match([(None, 1)], [(None, 1)]) and not results_match([(None,)], [(0,)])
    assert not results_match([(None,)], [("",)]) and not results_match([(None,)], [("NULL",)])
    assert results_match([(0.1 + 0.2,)], [(0.3,)]), "floats agree to 6 decimals"
    assert results_match([(2,)], [(2.0,)]) and results_match([(-0.0,)], [(0.0,)])
    assert not results_match([(0.3001,)], [(0.3,)])
    assert results_match([(1 / 3,)], [(0.333333,)]) and not results_match([(1 / 3,)], [(0.333333,)], digits=9)
    assert not results_match([("2",)], [(2,)]), "text '2' is not the number 2"
    assert not results_match([(1, 2)], [(1,)]), "column count differs"
    assert not results_match([(1, 2)], [(2, 1)]), "column order counts"
    assert canonical(True) == canonical(1) and canonical(2**60) == (1, 2**60)


def test_sql_exec_reward_reads_the_episode_info():
    fn = REWARDS.get("sql_exec")
    out = fn(["q"] * 4, [""] * 4, agent_info=[{"exec_match": True}, {"exec_match": False}, {}, None])
    assert out == [1.0, 0.0, 0.0, None]


# ---------------------------------------------------------------------------------------------------------
# the database and questions
# ---------------------------------------------------------------------------------------------------------
def test_deterministic_given_seed_and_gold_sql_is_right(tmp_path, world):
    again = SqlWorld(world.cfg, directory=tmp_path)
    assert again.parents == world.parents and again.children == world.children
    assert digest(again.path) == digest(world.path)
    other = SqlWorld(SqlWorldConfig(domain="shop", num_parents=8, seed=6), directory=tmp_path)
    assert other.parents != world.parents
    qs = world.questions(25, seed=1)
    assert qs == world.questions(25, seed=1) and len({q.question for q in qs}) == 25
    for q in qs:
        gold = world.execute(q.sql).rows
        assert gold and not results_match(world.execute(q.wrong_sql).rows, gold, q.ordered)
        assert q.difficulty == KINDS[q.kind] and q.ordered == (q.kind == "ordered")


def count_by_python(world: SqlWorld, kind: str, q) -> list:
    """Gold results recomputed in Python from the generated rows (independent of the SQL)."""
    P, C = world.parents, world.children
    if kind == "nested_none":
        return [(p[1],) for p in P if p[0] not in {c[1] for c in C}]
    if kind == "nested_average":
        avg = sum(p[3] for p in P) / len(P)
        return [(p[1],) for p in P if p[3] > avg]
    if kind == "group_count":
        cats = sorted({p[2] for p in P})
        return [(c, sum(p[2] == c for p in P)) for c in cats]
    if kind == "ordered":
        return [(p[1],) for p in sorted(P, key=lambda p: -p[3])]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["nested_none", "nested_average", "group_count", "ordered"])
def test_gold_results_agree_with_python(world, kind):
    (q,) = world.questions(1, kinds=[kind], seed=0)
    assert results_match(world.execute(q.sql).rows, count_by_python(world, kind, q), q.ordered)


def test_every_domain_makes_every_kind(tmp_path):
    for domain in DOMAINS:
        w = SqlWorld(SqlWorldConfig(domain=domain, seed=2), directory=tmp_path)
        assert {q.kind for q in w.questions(len(KINDS), kinds=list(KINDS), seed=0)} <= set(KINDS)
        for kind in KINDS:
            assert w.questions(1, kinds=[kind], seed=0)[0].kind == kind


# ---------------------------------------------------------------------------------------------------------
# read-only execution: hostile SQL becomes an observation, the file never changes
# ---------------------------------------------------------------------------------------------------------
HOSTILE = {
    "delete": ("DELETE FROM customers", "read-only"),
    "insert": ("INSERT INTO orders VALUES (99, 1, 'lamp', 3)", "read-only"),
    "update": ("UPDATE customers SET age = 0", "read-only"),
    "drop": ("DROP TABLE orders", "read-only"),
    "create": ("CREATE TABLE t (x)", "read-only"),
    "temp table": ("CREATE TEMP TABLE t (x)", "read-only"),
    "attach": ("ATTACH DATABASE '{other}' AS other", "ATTACH is not allowed"),
    "pragma write": ("PRAGMA journal_mode = WAL", "PRAGMA is not allowed"),
    "pragma user_version": ("PRAGMA user_version = 7", "PRAGMA is not allowed"),
    "vacuum into": ("VACUUM INTO '{other}'", "read-only"),
    "transaction": ("BEGIN IMMEDIATE", "read-only"),
    "two statements": ("SELECT 1; DELETE FROM customers", "one SQL statement"),
    "endless": ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c", "limit"),
    "cross join blowup": (
        "SELECT COUNT(*) FROM customers a, customers b, customers c, customers d, "
        "customers e, customers f, customers g, customers h, customers i",
        "limit",
    ),  # fmt: skip
    "huge blob": ("SELECT zeroblob(100000000)", "too big"),
    "syntax": ("SELEC name FROM customers", "syntax error"),
    "empty": ("   ", "empty query"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_sql_is_an_observation_and_changes_nothing(world, tmp_path, name):
    sql, expect = HOSTILE[name]
    other = tmp_path / "other.sqlite"
    sql = sql.format(other=other)
    before = digest(world.path)
    env = SqlEnv(world, query_seconds=0.3)
    (q,) = world.questions(1, kinds=["filter"], seed=0)
    env.reset(q)
    r = env.step(call("run_query", sql=sql))
    assert not r.done and r.observation.startswith("<tool_response>\nError: "), r.observation
    assert expect in r.observation, r.observation
    assert len(r.observation.splitlines()) == 3, "one line of error"
    assert r.info["tool_errors"] == 1
    assert digest(world.path) == before, "the database file must not change"
    assert not other.exists(), "no file may be attached or written"
    # the final answer runs under the same guards: hostile SQL as the answer scores 0, with the error recorded
    final = env.step(f"<answer>{sql}</answer>")
    assert final.done and final.reward == 0.0 and final.info["sql_error"]
    assert digest(world.path) == before and not other.exists()


def test_run_readonly_refuses_a_write_and_the_rows_stay(world):
    """run_readonly itself (no tool layer) refuses a write with a QueryError; the table keeps its rows."""
    with pytest.raises(QueryError, match="read-only"):
        run_readonly(world.path, "DELETE FROM orders")
    conn = sqlite3.connect(world.path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == len(world.children)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "sql", ["DELETE FROM orders", "INSERT INTO orders VALUES (99, 1, 'x', 1)", "DROP TABLE orders"]
)
def test_each_guard_alone_keeps_the_file_unchanged(world, tmp_path, sql):
    """Defence in depth: the authorizer refuses writes on a writable connection, and a mode=ro connection
    without the authorizer refuses them too."""
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(world.path.read_bytes())
    before = digest(copy)
    conn = sqlite3.connect(copy)  # writable
    denied = guard(conn)
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute(sql)
    conn.commit()
    conn.close()
    assert denied and digest(copy) == before
    conn = sqlite3.connect(f"{copy.resolve().as_uri()}?mode=ro", uri=True)  # no authorizer
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute(sql)
    conn.close()
    assert digest(copy) == before
    conn = sqlite3.connect(copy)  # the control: without either guard the statement does change the file
    conn.execute(sql)
    conn.commit()
    conn.close()
    assert digest(copy) != before


def test_row_limit_cuts_results_with_a_marker(world):
    env = SqlEnv(world, max_rows=3)
    (q,) = world.questions(1, kinds=["filter"], seed=0)
    env.reset(q)
    obs = env.step(call("run_query", sql="SELECT name FROM customers")).observation
    lines = obs.splitlines()[1:-1]
    assert lines[0] == "name" and len(lines) == 1 + 3 + 1 and "more rows not shown (limit 3)" in lines[-1]


# ---------------------------------------------------------------------------------------------------------
# the environment and the oracle
# ---------------------------------------------------------------------------------------------------------
def test_env_passes_check_env_and_scores_execution_match(world):
    (q,) = world.questions(1, kinds=["join"], seed=3)
    check_env(SqlEnv(world), q)
    env = SqlEnv(world)
    env.reset(q)
    assert env.step(call("list_tables")).observation == "<tool_response>\ncustomers, orders\n</tool_response>"
    desc = env.step(call("describe_table", table="orders")).observation
    assert "CREATE TABLE orders" in desc and "customer_id" in desc
    assert "Error: no table" in env.step(call("describe_table", table="nope")).observation
    equivalent = q.sql.replace("SELECT orders.product", "SELECT o.product").replace(
        "FROM orders JOIN", "FROM orders o JOIN"
    )
    equivalent = equivalent.replace("orders.customer_id", "o.customer_id")
    r = env.step(f"<answer>{equivalent}</answer>")
    assert r.reward == 1.0 and r.info["exec_match"] and r.info["difficulty"] == 4
    env.reset(q)
    assert env.step(f"<answer>{q.wrong_sql}</answer>").reward == 0.0


def test_ordered_question_needs_the_order(world):
    (q,) = world.questions(1, kinds=["ordered"], seed=0)
    env = SqlEnv(world)
    env.reset(q)
    assert env.step(f"<answer>{q.sql}</answer>").reward == 1.0
    env.reset(q)
    assert env.step(f"<answer>{q.sql.replace(' DESC', ' ASC')}</answer>").reward == 0.0
    env.reset(q)  # the same multiset in another order
    assert env.step(f"<answer>{q.sql.replace(' DESC', ' ASC')}</answer>").info["exec_match"] is False


def test_sql_block_answers_only_where_asked_and_never_beside_a_tool_call(world):
    (q,) = world.questions(1, kinds=["count"], seed=1)
    block = f"Here is the query:\n```sql\n{q.sql};\n```\nIt counts the rows."
    tag_env = SqlEnv(world)  # the default: only <answer> ends the episode
    tag_env.reset(q)
    r = tag_env.step(block)
    assert not r.done and r.observation.startswith("Error: no tool call and no answer")
    env = SqlEnv(world, answer_format="sql_block")
    env.reset(q)
    r = env.step(block)
    assert r.done and r.reward == 1.0 and r.info["answer"] == f"{q.sql};"
    env.reset(q)  # <answer> is read first; a wrong tagged answer is not rescued by a right block
    assert env.step(f"<answer>{q.wrong_sql}</answer>\n```sql\n{q.sql}\n```").reward == 0.0
    env.reset(q)  # a tool turn is a tool turn, whatever code block it also holds
    r = env.step(call("list_tables") + f"\n```sql\n{q.sql}\n```")
    assert not r.done and r.info["tool_calls"] == 1
    env.reset(q)  # an unclosed block (cut at the token cap) and a block that is not a query are no answers
    assert not env.step(f"```sql\n{q.sql}").done
    assert not env.step("```sql\nCREATE TABLE x (y)\n```").done
    r = env.step("```sql\nDELETE FROM orders\n```\n```sql\nSELECT COUNT(*) FROM orders; DROP TABLE orders\n```")
    assert r.done and r.reward == 0.0 and "one SQL statement" in r.info["sql_error"]
    with pytest.raises(ValueError, match="answer_format"):
        SqlEnv(world, answer_format="markdown")


def run_oracle(world, oracle, q) -> tuple[float, list[str]]:
    env = SqlEnv(world)
    context = env.reset(q).text
    for _ in range(8):
        reply = oracle(context)
        r = env.step(reply)
        context += reply + r.observation
        if r.done:
            return r.reward, r.info["tool_call_names"]
    raise AssertionError("oracle did not finish")


def test_oracle_explores_then_answers_and_errs_only_where_told(world):
    qs = world.questions(12, seed=4)
    perfect = SqlOracle(qs, p_mistake=0.0)
    for q in qs:
        reward, names = run_oracle(world, perfect, q)
        assert reward == 1.0 and names[0] == "list_tables" and names[-1] == "run_query"
        assert names.count("describe_table") == len(q.tables)
    blind = SqlOracle(qs, p_mistake=1.0, mistake_kinds=["filter", "count"])
    blind.rng = random.Random(0)
    for q in qs:
        reward, names = run_oracle(world, blind, q)
        assert (reward, bool(names)) == ((0.0, False) if q.kind in ("filter", "count") else (1.0, True))


def test_shared_cache_is_pruned_and_a_pruned_world_rebuilds(tmp_path, monkeypatch):
    """The default cache ($TMPDIR/ascent-sql-worlds) keeps the CACHE_KEEP newest databases; a world whose file
    was pruned rebuilds it on its next query instead of failing to open it."""
    import ascent.envs.sql_world as sw

    monkeypatch.setattr(sw.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(sw, "CACHE_KEEP", 3)
    worlds = []
    for seed in range(6):
        worlds.append(SqlWorld(SqlWorldConfig(domain="shop", num_parents=8, seed=seed)))
        os.utime(worlds[-1].path, (1000 + seed, 1000 + seed))  # written in order, a second apart
    cache = tmp_path / "ascent-sql-worlds"
    left = sorted(p.name for p in cache.glob("*.sqlite"))
    assert len(left) == 3 and left == sorted(w.path.name for w in worlds[3:])
    assert not worlds[0].path.exists()
    q = worlds[0].questions(1)[0]
    fresh = SqlWorld(worlds[0].cfg, directory=tmp_path / "fresh")
    assert worlds[0].execute(q.sql).rows == fresh.execute(q.sql).rows  # rebuilt, the same database
    assert worlds[0].path.exists()
    kept = SqlWorld(SqlWorldConfig(domain="shop", num_parents=8, seed=0), directory=tmp_path / "mine")
    for seed in range(1, 6):
        SqlWorld(SqlWorldConfig(domain="shop", num_parents=8, seed=seed), directory=tmp_path / "mine")
    assert kept.path.exists() and len(list((tmp_path / "mine").glob("*.sqlite"))) == 6  # a user's folder: no pruning
