"""`sql_world`: Text-to-SQL over a real SQLite database (Python's standard `sqlite3`), generated and seeded.

A world is one small database of a domain (a shop's customers and orders, a school's students and grades, a
library's authors and books): a parent table `P(id, name, <category>, <number>)` and a child table
`C(id, <parent>_id, <category>, <number>)` with a foreign key, rows drawn from a seed. Questions come from
templates of graded difficulty, each with its gold SQL (so the answer is right by construction):

    1 filter     List the names of customers whose city is Velmor.
    2 aggregate  How many customers live in ...? / What is the average age of customers? / ordered listing
    3 group-by   For each city, how many customers are there?
    4 join       List the product of every order of the customer named Kalo Miran.
    5 nested     List the names of customers with age above the average age. / ... who have no orders.

The agent has three tools, `list_tables()`, `describe_table(table)` (its CREATE statement and first rows) and
`run_query(sql)`, and ends with its final query, `<answer>SELECT ...</answer>`. The reward is execution match
(`results_match`): the final query's result equals the gold query's, compared as multisets of rows (order and
column names ignored, duplicates counted, NULL equal to NULL, numbers equal when they agree to `digits` decimals,
1 == 1.0), or as lists when the question asks for an order.

Every query the model writes runs read-only, three ways at once: the database is opened with a
`file:...?mode=ro` URI, an authorizer callback allows only reading (SELECT, reading columns, functions,
recursive CTEs: every write, ATTACH, PRAGMA, temp table or transaction is denied), and a progress handler
interrupts a query after `query_seconds`; results are cut at `max_rows`, values at a length limit. A denied,
failed or interrupted query becomes an error observation ("Error: ..."), never an exception out of the
environment and never a change to the file.

The reward follows the execution-match reward of SkyRL-SQL (Liu et al., 2025, blog post) and AGRO-SQL (Yang
et al., 2025, arXiv:2512.23366): 1 when the final SQL's result equals the gold SQL's, else 0. Departures are
listed where the task registers (ascent/tasks/sql_world.py).

>>> world = SqlWorld(SqlWorldConfig(domain="shop", seed=1))
>>> q = world.questions(1, kinds=["filter"], seed=0)[0]
>>> q.difficulty, q.sql.startswith("SELECT name FROM customers WHERE city = ")
(1, True)
>>> results_match(world.execute(q.sql).rows, world.execute(q.sql).rows, ordered=q.ordered)
True
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sqlite3
import string
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ascent.envs.base import Observation
from ascent.envs.search_world import SYLLABLES
from ascent.envs.tool_env import ToolEnv, parse_answer
from ascent.envs.tools import CALL_CLOSE, CALL_OPEN, ToolCall, ToolSet, parse_tool_calls, tool
from ascent.registry import Paper

SKYRL_SQL = Paper(
    "SkyRL-SQL",
    "Liu et al.",
    2025,
    "SkyRL-SQL: Simple, Efficient Multi-Turn RL for Text2SQL (NovaSky blog post, UC Berkeley & Anyscale)",
    "none (blog post, novasky-ai.notion.site/skyrl-sql; code github.com/NovaSky-AI/SkyRL)",
)
AGRO_SQL = Paper(
    "AGRO-SQL",
    "Yang et al.",
    2025,
    "AGRO-SQL: Agentic Group-Relative Optimization with High-Fidelity Data Synthesis",
    "arXiv:2512.23366",
)


@dataclass(frozen=True)
class Domain:
    """The names of one domain's two tables."""

    parent: str
    """Parent table (plural), e.g. customers."""
    parent_one: str
    """A parent row in words (singular), e.g. customer."""
    category: str
    """Parent's text column, e.g. city."""
    categories: tuple[str, ...]
    number: str
    """Parent's integer column, e.g. age (unique per row, so an ordering by it has no ties)."""
    number_range: tuple[int, int]
    child: str
    """Child table (plural), e.g. orders."""
    child_one: str
    child_category: str
    child_categories: tuple[str, ...]
    child_number: str
    child_number_range: tuple[int, int]

    @property
    def fk(self) -> str:
        """The child's foreign-key column, e.g. customer_id."""
        return f"{self.parent_one}_id"


DOMAINS: dict[str, Domain] = {
    "shop": Domain(
        "customers",
        "customer",
        "city",
        ("Velmor", "Ostrana", "Kelbrin", "Dunmark"),
        "age",
        (18, 80),
        "orders",
        "order",
        "product",
        ("lamp", "chair", "kettle", "rug", "clock"),
        "amount",
        (1, 500),
    ),  # fmt: skip
    "school": Domain(
        "students",
        "student",
        "major",
        ("physics", "history", "biology", "music"),
        "height",
        (150, 200),
        "grades",
        "grade",
        "course",
        ("algebra", "poetry", "chemistry", "drawing", "latin"),
        "score",
        (0, 100),
    ),  # fmt: skip
    "library": Domain(
        "authors",
        "author",
        "country",
        ("Norland", "Pelmark", "Sorvia", "Tamberg"),
        "born",
        (1900, 1999),
        "books",
        "book",
        "genre",
        ("mystery", "poetry", "travel", "fantasy", "history"),
        "pages",
        (40, 900),
    ),  # fmt: skip
}

KINDS: dict[str, int] = {
    "filter": 1,
    "filter_number": 1,
    "count": 2,
    "average": 2,
    "max_child": 2,
    "ordered": 2,
    "group_count": 3,
    "group_sum": 3,
    "join": 4,
    "join_count": 4,
    "nested_average": 5,
    "nested_none": 5,
}
"""Question template -> difficulty (1 filter, 2 aggregate, 3 group-by, 4 join, 5 nested)."""


@dataclass(frozen=True)
class SqlWorldConfig:
    """How big a database to generate."""

    domain: str = "shop"
    """One of DOMAINS: shop, school, library."""
    num_parents: int = 8
    """Rows of the parent table (customers, students, authors)."""
    max_children: int = 3
    """Each parent gets 0..max_children child rows (orders, grades, books)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {sorted(DOMAINS)}, got {self.domain!r}")
        if self.num_parents < 3 or self.max_children < 1:
            raise ValueError(f"num_parents must be >= 3 and max_children >= 1, got {self}")
        lo, hi = DOMAINS[self.domain].number_range
        if self.num_parents > hi - lo + 1:
            raise ValueError(f"num_parents must be <= {hi - lo + 1} for domain {self.domain!r}")


@dataclass(frozen=True)
class SqlQuestion:
    """A question, its gold SQL, and a plausible wrong query (what the imperfect oracle answers)."""

    question: str
    sql: str
    kind: str
    difficulty: int
    ordered: bool
    """The question asks for an order: results are compared as lists, not multisets."""
    tables: tuple[str, ...]
    """Tables the gold SQL reads."""
    wrong_sql: str
    """A plausible mistake whose result differs from the gold result."""


@dataclass(frozen=True)
class QueryResult:
    """What a query returned: column names, rows (at most the limit) and whether rows were cut."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool


class QueryError(ValueError):
    """A query was refused (a write, ATTACH, PRAGMA...), failed, or ran past its time limit."""


_AUTH_ACTIONS = {
    getattr(sqlite3, n): n[len("SQLITE_") :]
    for n in (
        "SQLITE_CREATE_INDEX SQLITE_CREATE_TABLE SQLITE_CREATE_TEMP_INDEX SQLITE_CREATE_TEMP_TABLE "
        "SQLITE_CREATE_TEMP_TRIGGER SQLITE_CREATE_TEMP_VIEW SQLITE_CREATE_TRIGGER SQLITE_CREATE_VIEW SQLITE_DELETE "
        "SQLITE_DROP_INDEX SQLITE_DROP_TABLE SQLITE_DROP_TEMP_INDEX SQLITE_DROP_TEMP_TABLE SQLITE_DROP_TEMP_TRIGGER "
        "SQLITE_DROP_TEMP_VIEW SQLITE_DROP_TRIGGER SQLITE_DROP_VIEW SQLITE_INSERT SQLITE_PRAGMA SQLITE_READ "
        "SQLITE_SELECT SQLITE_TRANSACTION SQLITE_UPDATE SQLITE_ATTACH SQLITE_DETACH SQLITE_ALTER_TABLE "
        "SQLITE_REINDEX SQLITE_ANALYZE SQLITE_CREATE_VTABLE SQLITE_DROP_VTABLE SQLITE_FUNCTION SQLITE_SAVEPOINT "
        "SQLITE_RECURSIVE"
    ).split()
    if hasattr(sqlite3, n)
}
_ALLOWED = {getattr(sqlite3, n) for n in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")}


def run_readonly(
    path: str | Path, sql: str, max_rows: int = 20, seconds: float = 1.0, max_value_chars: int = 10_000
) -> QueryResult:
    """Run one SQL statement on the database file at `path`, read-only, with a row and time limit.

    The file is opened as a `file:...?mode=ro` URI; an authorizer denies everything but reading; a progress
    handler interrupts the statement after `seconds`. Raises `QueryError` with a one-line message the model
    can read for anything refused, failing or interrupted; the file is never changed.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("empty query; write one SELECT statement")
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        denied = guard(conn, seconds, max_value_chars)
        try:
            cur = conn.execute(sql)
            rows = cur.fetchmany(max_rows + 1)
        except sqlite3.Error as e:
            raise QueryError(_explain(e, denied, seconds)) from None
        columns = tuple(d[0] for d in cur.description or ())
        if not columns:
            raise QueryError("the statement returned no result set; write one SELECT statement")
        return QueryResult(columns, rows[:max_rows], len(rows) > max_rows)
    finally:
        conn.close()


def guard(conn: sqlite3.Connection, seconds: float = 1.0, max_value_chars: int = 10_000) -> list[str]:
    """Make `conn` read-only and time-limited whatever mode it was opened in: an authorizer that denies every
    action but reading (the returned list collects the names of denied actions), a progress handler that
    interrupts a statement after `seconds` from now, no attached databases, values up to `max_value_chars`."""
    denied: list[str] = []

    def authorize(action: int, *_: Any) -> int:
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        denied.append(_AUTH_ACTIONS.get(action, f"action {action}"))
        return sqlite3.SQLITE_DENY

    deadline = time.perf_counter() + seconds
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_chars)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(authorize)
    conn.set_progress_handler(lambda: int(time.perf_counter() > deadline), 1000)
    return denied


def _explain(e: sqlite3.Error, denied: list[str], seconds: float) -> str:
    msg = str(e)
    if denied:
        what = ", ".join(dict.fromkeys(d.replace("_", " ") for d in denied))
        return f"refused: the database is read-only and only SELECT queries run ({what} is not allowed)"
    if "interrupted" in msg:
        return f"the query ran past the {seconds:g} s limit and was stopped"
    if "readonly" in msg or "read-only" in msg:
        return "refused: the database is read-only and only SELECT queries run"
    if "one statement at a time" in msg:
        return "write exactly one SQL statement per query"
    return f"{type(e).__name__}: {msg}"


def canonical(value: Any, digits: int = 6) -> tuple[int, Any]:
    """A hashable, comparable form of one SQL value: NULL, numbers (1 == 1.0; floats rounded to `digits`
    decimals), text, blobs.

    >>> canonical(None), canonical(2), canonical(2.0), canonical(0.1 + 0.2), canonical("2")
    ((0, None), (1, 2), (1, 2), (1, 0.3), (2, '2'))
    """
    if value is None:
        return (0, None)
    if isinstance(value, (bool, int)):
        return (1, int(value))
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return (1, int(value))
        return (1, round(value, digits) + 0.0)  # + 0.0: -0.0 -> 0.0
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


def results_match(
    predicted: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], ordered: bool = False, digits: int = 6
) -> bool:
    """Execution match: the rows of `predicted` equal those of `gold` as multisets (as lists when `ordered`).

    Columns are compared in order (their names are ignored); a row is equal when every value is (`canonical`).

    >>> results_match([(1, "a"), (2, "b")], [(2, "b"), (1.0, "a")]), results_match([(1,), (1,)], [(1,)])
    (True, False)
    >>> results_match([(1,), (2,)], [(2,), (1,)], ordered=True)
    False
    """
    p = [tuple(canonical(v, digits) for v in r) for r in predicted]
    g = [tuple(canonical(v, digits) for v in r) for r in gold]
    return p == g if ordered else Counter(p) == Counter(g)


def world_path(cfg: SqlWorldConfig, directory: Optional[str | Path] = None) -> Path:
    """Where the database of `cfg` lives (created on first use): one file per configuration."""
    key = hashlib.sha256(json.dumps([1, cfg.__dict__], sort_keys=True).encode()).hexdigest()[:16]
    base = Path(directory) if directory is not None else Path(tempfile.gettempdir()) / "ascent-sql-worlds"
    return base / f"{cfg.domain}-{cfg.seed}-{key}.sqlite"


def _names(rng: random.Random, count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        name = " ".join("".join(rng.choice(SYLLABLES) for _ in range(2)).capitalize() for _ in range(2))
        if name not in out:
            out.append(name)
    return out


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


CACHE_KEEP = 256  # databases kept in the shared temporary cache (a few KB each; the newest stay)


def prune_cache(directory: Path, keep: int, spare: Optional[Path] = None) -> int:
    """Delete all but the `keep` most recently written databases in `directory` (and builders' leftover `.tmp`
    files older than an hour); `spare` is never deleted. A world whose file went is rebuilt on its next query
    (`SqlWorld.execute`); the number of files deleted."""
    now, gone = time.time(), 0
    dbs = []
    for f in directory.iterdir():
        try:
            mtime = f.stat().st_mtime
        except OSError:  # deleted by a concurrent pruner
            continue
        if f.suffix == ".sqlite":
            dbs.append((mtime, f))
        elif f.suffix == ".tmp" and now - mtime > 3600:
            f.unlink(missing_ok=True)
    for _, f in sorted(dbs, reverse=True)[keep:]:
        if f != spare:
            f.unlink(missing_ok=True)
            gone += 1
    return gone


class SqlWorld:
    """One generated database (a file written once, then only ever opened read-only) and its questions."""

    def __init__(self, cfg: SqlWorldConfig = SqlWorldConfig(), directory: Optional[str | Path] = None) -> None:
        self.cfg, self.domain = cfg, DOMAINS[cfg.domain]
        self.parents, self.children = self._rows(random.Random(f"sql-{cfg.domain}-{cfg.seed}"))
        self.path, self._cached = world_path(cfg, directory), directory is None
        if not self.path.exists():
            self._write()
        d = self.domain
        self.schema = {
            d.parent: f"CREATE TABLE {d.parent} (id INTEGER PRIMARY KEY, name TEXT, {d.category} TEXT, "
            f"{d.number} INTEGER)",
            d.child: f"CREATE TABLE {d.child} (id INTEGER PRIMARY KEY, {d.fk} INTEGER REFERENCES {d.parent}(id), "
            f"{d.child_category} TEXT, {d.child_number} INTEGER)",
        }

    def _rows(self, rng: random.Random) -> tuple[list[tuple], list[tuple]]:
        d, c = self.domain, self.cfg
        numbers = rng.sample(range(d.number_range[0], d.number_range[1] + 1), c.num_parents)
        parents = [
            (i + 1, name, rng.choice(d.categories), numbers[i]) for i, name in enumerate(_names(rng, c.num_parents))
        ]
        children: list[tuple] = []
        for pid, *_ in parents:
            for _ in range(rng.randint(0, c.max_children)):
                value = rng.randint(*d.child_number_range)
                children.append((len(children) + 1, pid, rng.choice(d.child_categories), value))
        return parents, children

    def _write(self) -> None:
        """Write the database to a temporary file, then move it into place (atomic: concurrent builders agree)."""
        d = self.domain
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
        os.close(fd)
        conn = sqlite3.connect(tmp)
        try:
            conn.execute(
                f"CREATE TABLE {d.parent} (id INTEGER PRIMARY KEY, name TEXT, {d.category} TEXT, {d.number} INTEGER)"
            )
            conn.execute(
                f"CREATE TABLE {d.child} (id INTEGER PRIMARY KEY, {d.fk} INTEGER REFERENCES {d.parent}(id), "
                f"{d.child_category} TEXT, {d.child_number} INTEGER)"
            )
            conn.executemany(f"INSERT INTO {d.parent} VALUES (?, ?, ?, ?)", self.parents)
            conn.executemany(f"INSERT INTO {d.child} VALUES (?, ?, ?, ?)", self.children)
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, self.path)
        if self._cached:
            prune_cache(self.path.parent, CACHE_KEEP, spare=self.path)

    def execute(self, sql: str, max_rows: int = 10_000, seconds: float = 2.0) -> QueryResult:
        """`run_readonly` on this world's file (rebuilt first if the shared cache pruned it meanwhile)."""
        if not self.path.exists():
            self._write()
        return run_readonly(self.path, sql, max_rows=max_rows, seconds=seconds)

    def questions(self, num: int, kinds: Sequence[str] = tuple(KINDS), seed: int = 0) -> list[SqlQuestion]:
        """`num` distinct questions of the given kinds (used in turn), deterministic given `seed`; each gold
        query returns at least one row and its `wrong_sql` a different result."""
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise ValueError(f"kinds: unknown {unknown}; choose among {list(KINDS)}")
        rng = random.Random(f"{self.cfg.domain}-{self.cfg.seed}-{seed}")
        out: dict[str, SqlQuestion] = {}
        for _ in range(50 * num):
            q = self._question(rng.choice(list(kinds)), rng)
            if q is not None and q.question not in out:
                out[q.question] = q
            if len(out) == num:
                return list(out.values())
        raise ValueError(f"could only make {len(out)} distinct questions out of {num} for kinds {list(kinds)}")

    def _question(self, kind: str, rng: random.Random) -> Optional[SqlQuestion]:
        d = self.domain
        P, C, fk = d.parent, d.child, d.fk
        person = rng.choice(self.parents)
        cat = rng.choice(sorted({p[2] for p in self.parents}))
        nums = sorted(p[3] for p in self.parents)
        threshold = nums[rng.randrange(1, len(nums) - 1)]
        if kind == "filter":
            q = f"List the names of {P} whose {d.category} is {cat}."
            sql = f"SELECT name FROM {P} WHERE {d.category} = {_quote(cat)}"
            wrong = f"SELECT name FROM {P} WHERE {d.category} != {_quote(cat)}"
        elif kind == "filter_number":
            q = f"List the names of {P} with {d.number} greater than {threshold}."
            sql = f"SELECT name FROM {P} WHERE {d.number} > {threshold}"
            wrong = f"SELECT name FROM {P} WHERE {d.number} >= {threshold}"
        elif kind == "count":
            q = f"How many {P} have {d.category} {cat}?"
            sql = f"SELECT COUNT(*) FROM {P} WHERE {d.category} = {_quote(cat)}"
            wrong = f"SELECT COUNT(*) FROM {P}"
        elif kind == "average":
            q = f"What is the average {d.number} of {P}?"
            sql = f"SELECT AVG({d.number}) FROM {P}"
            wrong = f"SELECT SUM({d.number}) FROM {P}"
        elif kind == "max_child":
            q = f"What is the highest {d.child_number} among {C}?"
            sql = f"SELECT MAX({d.child_number}) FROM {C}"
            wrong = f"SELECT MIN({d.child_number}) FROM {C}"
        elif kind == "ordered":
            q = f"List the names of {P} ordered by {d.number} from highest to lowest."
            sql = f"SELECT name FROM {P} ORDER BY {d.number} DESC"
            wrong = f"SELECT name FROM {P} ORDER BY {d.number}"
        elif kind == "group_count":
            q = f"For each {d.category}, how many {P} are there?"
            sql = f"SELECT {d.category}, COUNT(*) FROM {P} GROUP BY {d.category}"
            wrong = f"SELECT {d.category}, COUNT(*) FROM {C} JOIN {P} ON {C}.{fk} = {P}.id GROUP BY {d.category}"
        elif kind == "group_sum":
            q = f"For each {d.child_category}, what is the total {d.child_number} of {C}?"
            sql = f"SELECT {d.child_category}, SUM({d.child_number}) FROM {C} GROUP BY {d.child_category}"
            wrong = f"SELECT {d.child_category}, MAX({d.child_number}) FROM {C} GROUP BY {d.child_category}"
        elif kind == "join":
            q = f"List the {d.child_category} of every {d.child_one} of the {d.parent_one} named {person[1]}."
            sql = (
                f"SELECT {C}.{d.child_category} FROM {C} JOIN {P} ON {C}.{fk} = {P}.id "
                f"WHERE {P}.name = {_quote(person[1])}"
            )
            wrong = f"SELECT {d.child_category} FROM {C} WHERE {fk} = {person[0] % len(self.parents) + 1}"
        elif kind == "join_count":
            q = f"For each {d.parent_one} with {C}, give their name and how many {C} they have."
            sql = f"SELECT {P}.name, COUNT(*) FROM {P} JOIN {C} ON {C}.{fk} = {P}.id GROUP BY {P}.id"
            wrong = f"SELECT {P}.name, COUNT(*) FROM {P} JOIN {C} ON {C}.{fk} = {P}.id"
        elif kind == "nested_average":
            q = f"List the names of {P} whose {d.number} is above the average {d.number}."
            sql = f"SELECT name FROM {P} WHERE {d.number} > (SELECT AVG({d.number}) FROM {P})"
            wrong = f"SELECT name FROM {P} WHERE {d.number} < (SELECT AVG({d.number}) FROM {P})"
        else:  # nested_none
            q = f"List the names of {P} who have no {C}."
            sql = f"SELECT name FROM {P} WHERE id NOT IN (SELECT {fk} FROM {C})"
            wrong = f"SELECT name FROM {P} WHERE id IN (SELECT {fk} FROM {C})"
        gold = self.execute(sql).rows
        if not gold or results_match(self.execute(wrong).rows, gold, ordered=kind == "ordered"):
            return None
        tables = tuple(t for t in (P, C) if re.search(rf"\b{t}\b", sql))
        return SqlQuestion(q, sql, kind, KINDS[kind], kind == "ordered", tables, wrong)

    def describe(self, table: str, sample_rows: int = 3) -> str:
        """The CREATE statement of `table` and its first rows."""
        head = self.execute(f"SELECT * FROM {table} LIMIT {sample_rows}")
        return self.schema[table] + "\n" + format_result(head, sample_rows)


def format_result(result: QueryResult, max_rows: int) -> str:
    """A query result as text: a header line, then one line per row (values separated by ' | ')."""
    lines = [" | ".join(result.columns)] + [" | ".join("NULL" if v is None else str(v) for v in r) for r in result.rows]
    if result.truncated:
        lines.append(f"... more rows not shown (limit {max_rows})")
    elif not result.rows:
        lines.append("(no rows)")
    return "\n".join(lines)


PROMPT = (
    "Answer the question with one SQLite query over the database.\n{tools}\n"
    "When your query is ready, write it as <answer>SELECT ...</answer>.\nQuestion: {question}"
)


ANSWER_FORMATS = ("tag", "sql_block")
_SQL_BLOCK = re.compile(r"```[ \t]*(?:sql|sqlite)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_sql_block(text: str) -> Optional[str]:
    r"""The first closed fenced code block (```sql, ```sqlite or bare ```) whose text starts with SELECT or WITH,
    stripped; None if there is none or the text calls a tool (a tool turn is never an answer).

    >>> parse_sql_block("Use:\n```sql\nSELECT AVG(age) FROM customers;\n```\nDone.")
    'SELECT AVG(age) FROM customers;'
    >>> parse_sql_block("```\nCREATE TABLE t (x)\n```\n```\nselect x from t\n```")
    'select x from t'
    >>> parse_sql_block("```sql\nSELECT 1"), parse_sql_block('<tool_call>{}</tool_call> ```sql\nSELECT 1\n```')
    (None, None)
    """
    if CALL_OPEN in text:
        return None
    for m in _SQL_BLOCK.finditer(text):
        body = m.group(1).strip()
        if re.match(r"(select|with)\b", body, re.IGNORECASE):
            return body
    return None


class SqlEnv(ToolEnv):
    """One Text-to-SQL episode over a `SqlWorld`: tools `list_tables`, `describe_table`, `run_query`; the final
    `<answer>SQL</answer>` scores 1 when its result matches the gold query's (`results_match`), else 0.

    `answer_format="sql_block"` also takes a turn without a tool call whose reply holds a closed fenced code block
    starting with SELECT or WITH (```sql ... ```, the form instruction-tuned models write unprompted) as the final
    query; `<answer>` still counts first."""

    def __init__(
        self,
        world: SqlWorld,
        prompt: str = PROMPT,
        max_rows: int = 20,
        query_seconds: float = 1.0,
        digits: int = 6,
        timeout: float = 5.0,
        max_output_chars: int = 1000,
        answer_format: str = "tag",
    ) -> None:
        """`prompt` has the fields {question}, {tools} and {schema} (every table's CREATE statement)."""
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}")
        self.world, self.template, self.answer_format = world, prompt, answer_format
        self.max_rows, self.query_seconds, self.digits = max_rows, query_seconds, digits
        tools = [tool(self.list_tables), tool(self.describe_table), tool(self.run_query)]
        super().__init__(ToolSet(tools, timeout=timeout, max_output_chars=max_output_chars))
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def list_tables(self) -> str:
        """The names of the database's tables."""
        return ", ".join(self.world.schema)

    def describe_table(self, table: str) -> str:
        """A table's columns (its CREATE statement) and its first rows.

        Args:
            table: a table name from list_tables.
        """
        if table.strip() not in self.world.schema:
            raise ValueError(f"no table {table!r}; tables: {', '.join(self.world.schema)}")
        return self.world.describe(table.strip())

    def run_query(self, sql: str) -> str:
        """Run one read-only SQLite SELECT query; returns its columns and rows.

        Args:
            sql: one SELECT statement.
        """
        with self._lock:
            self.queries.append(sql)
        return format_result(self.world.execute(sql, self.max_rows, self.query_seconds), self.max_rows)

    def final_answer(self, action: str) -> Optional[str]:
        answer = parse_answer(action)
        if answer is None and self.answer_format == "sql_block":
            answer = parse_sql_block(action)
        return answer

    def reset(self, task: SqlQuestion) -> Observation:
        self.queries = []
        return super().reset(task)

    def prompt(self, task: SqlQuestion) -> Observation:
        schema = "\n".join(self.world.schema.values())
        return Observation(
            text=self.template.format(question=task.question, tools=self.tools.describe(), schema=schema)
        )

    def score(self, answer: str) -> tuple[float, dict[str, Any]]:
        q: SqlQuestion = self.task
        gold = self.world.execute(q.sql).rows
        error = None
        try:
            result = self.world.execute(answer, seconds=self.query_seconds)
            match = not result.truncated and results_match(result.rows, gold, q.ordered, self.digits)
        except QueryError as e:
            match, error = False, str(e)
        return float(match), {
            "exec_match": match,
            "correct": match,
            "sql_error": error,
            "gold_sql": q.sql,
            "kind": q.kind,
            "difficulty": q.difficulty,
            "queries_run": len(self.queries),
        }


def _call(name: str, **arguments: str) -> str:
    return f"{CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CALL_CLOSE}"


class SqlOracle:
    """A scripted, deliberately imperfect sql_world agent (the warm start's demonstrations): it lists the
    tables, describes each table the gold query reads, runs the gold query, then answers it. With
    probability `p_mistake` (on the question kinds of `mistake_kinds`; all when empty) it answers at once with
    the question's plausible wrong query instead, without looking at the database.

    Called with the rendered context, it returns the next reply; its state is read from the context and its
    coin flips come from one `Random(seed)` stream, as `ascent.envs.search_world.OracleAgent`.
    """

    def __init__(
        self,
        questions: list[SqlQuestion],
        p_mistake: float = 0.3,
        mistake_kinds: Sequence[str] = (),
        seed: int = 0,
    ) -> None:
        if not 0 <= p_mistake <= 1:
            raise ValueError(f"p_mistake must be in [0, 1], got {p_mistake}")
        self.questions, self.p_mistake, self.mistake_kinds = questions, p_mistake, set(mistake_kinds)
        self.rng = random.Random(seed)

    def __call__(self, context: str) -> str:
        q = max((q for q in self.questions if q.question in context), key=lambda q: len(q.question), default=None)
        if q is None:
            return "<answer>SELECT 0</answer>"
        calls = [c for c in parse_tool_calls(context) if isinstance(c, ToolCall)]
        if not calls:
            may = not self.mistake_kinds or q.kind in self.mistake_kinds
            if may and self.rng.random() < self.p_mistake:
                return f"<answer>{q.wrong_sql}</answer>"
            return _call("list_tables")
        described = [c.arguments.get("table") for c in calls if c.name == "describe_table"]
        todo = [t for t in q.tables if t not in described]
        if todo:
            return _call("describe_table", table=todo[0])
        if calls[-1].name != "run_query":
            return _call("run_query", sql=q.sql)
        return f"<answer>{q.sql}</answer>"


ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"
"""Every character sql_world writes: a character tokenizer for it needs these (plus its chat template's)."""


def tokenizer_pieces(prompt: str = "") -> list[str]:
    """Multi-character tokens for a `char_tokenizer` over sql_world text: SQL keywords, every domain's table,
    column and category names, the question templates' words, name syllables, and the tool-call markup."""
    words: set[str] = set()
    for d in DOMAINS.values():
        for name in (d.parent, d.parent_one, d.category, d.number, d.child, d.child_one, d.child_category,
                     d.child_number, d.fk, *d.categories, *d.child_categories):  # fmt: skip
            words.add(name)
    template_words = (
        "List the names of whose is with greater than How many have What average highest among ordered by from "
        "to lowest For each are there total every named give their name and they above who no INTEGER PRIMARY "
        "KEY TEXT REFERENCES CREATE TABLE id"
    )
    words |= set(template_words.split()) | set(prompt.replace("{question}", " ").split())
    keywords = "SELECT FROM WHERE GROUP BY ORDER DESC JOIN ON COUNT(*) AVG( SUM( MAX( MIN( NOT IN AND".split()
    syllables = set(SYLLABLES) | {s.capitalize() for s in SYLLABLES}
    markup = [
        _call("list_tables"),
        CALL_OPEN + '{"name": "describe_table", "arguments": {"table": "',
        CALL_OPEN + '{"name": "run_query", "arguments": {"sql": "',
        '"}}' + CALL_CLOSE,
        "<tool_response>\n",
        "\n</tool_response>",
        "<answer>",
        "</answer>",
        " | ",
        "[user]\n",
        "[assistant]\n",
        "[tool]\n",
    ]
    return sorted(words | {" " + w for w in words} | set(keywords) | {" " + k for k in keywords} | syllables) + markup
