"""The `sql_world` agent task: Text-to-SQL over many small generated SQLite databases (`ascent.envs.sql_world`),
explored with list_tables / describe_table / run_query and answered with one final query, reward `sql_exec`
(execution match).

    data.task=sql_world(kinds=[filter, count, join])    # YAML: task: {sql_world: {kinds: [filter, join]}}

Every few questions get their own database (`questions_per_world`), drawn from the domains in turn, and the
held-out questions come from databases no training question comes from: names, categories and numbers differ, so
a policy has to read the question (and may look at the data) rather than remember answers. Rows are
`{"prompt": question, "answer": gold SQL, "kind", "difficulty", "ordered", "domain", "world_seed"}`. The warm
start imitates `SqlOracle` (scripted, deliberately imperfect: `oracle_p_mistake` on `oracle_mistake_kinds`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ascent.agents.chat import with_chat_template
from ascent.config.schema import DataConfig
from ascent.envs.sql_world import (
    AGRO_SQL,
    ALPHABET,
    ANSWER_FORMATS,
    DOMAINS,
    KINDS,
    SKYRL_SQL,
    SqlEnv,
    SqlOracle,
    SqlQuestion,
    SqlWorld,
    SqlWorldConfig,
    tokenizer_pieces,
)
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.agent import AgentTask, Responder
from ascent.tasks.base import TASKS, Row, TaskData


@dataclass(frozen=True)
class SqlWorldParams:
    """The `sql_world` agent task: one small generated database per few questions (train and held-out
    databases are disjoint), the question kinds asked, the tools' limits, and the warm start's oracle."""

    domains: list[str] = field(default_factory=lambda: sorted(DOMAINS))
    """Domains of the databases, used in turn: shop, school, library."""
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    """Question templates asked (difficulty 1 filter, filter_number; 2 count, average, max_child, ordered;
    3 group_count, group_sum; 4 join, join_count; 5 nested_average, nested_none)."""
    num_parents: int = 8
    """Rows of each database's parent table."""
    max_children: int = 3
    """Child rows per parent row: 0..max_children."""
    questions_per_world: int = 4
    """Questions asked about each database."""
    max_rows: int = 20
    """Rows a run_query observation shows (more are cut, with a marker)."""
    query_seconds: float = 1.0
    """Time limit of one query (a progress handler interrupts it)."""
    prompt: str = "Q: {question}"
    """First user message; fields {question}, {tools} (the tools' specs and call syntax), {schema} (every table's
    CREATE statement)."""
    answer_format: str = "tag"
    """How the final query may be given: tag, only `<answer>SQL</answer>`; sql_block, also a closed fenced code block
    starting with SELECT or WITH in a turn without a tool call (`ascent.envs.sql_world.parse_sql_block`)."""
    oracle_p_mistake: float = 0.5
    """Warm-start oracle: probability of answering at once with a plausible wrong query, in [0, 1]."""
    oracle_mistake_kinds: list[str] = field(default_factory=list)
    """Warm-start oracle: question kinds it may make that mistake on (empty: all)."""
    tokenizer_pieces: bool = True
    """The task's character tokenizer also gets whole tokens for SQL keywords, table/column names, name syllables
    and the tool-call markup (`ascent.envs.sql_world.tokenizer_pieces`); false: one token per character."""

    def __post_init__(self) -> None:
        if not self.domains or set(self.domains) - set(DOMAINS):
            raise ValueError(f"domains must be a non-empty list of {sorted(DOMAINS)}, got {self.domains}")
        bad = sorted(set(self.kinds) - set(KINDS)) + sorted(set(self.oracle_mistake_kinds) - set(KINDS))
        if not self.kinds or bad:
            raise ValueError(f"kinds: unknown {bad} (or empty); choose among {list(KINDS)}")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {list(ANSWER_FORMATS)}, got {self.answer_format!r}")
        if not 0 <= self.oracle_p_mistake <= 1:
            raise ValueError(f"oracle_p_mistake must be in [0, 1], got {self.oracle_p_mistake}")
        if min(self.questions_per_world, self.max_rows) < 1 or self.query_seconds <= 0:
            raise ValueError("questions_per_world and max_rows must be >= 1 and query_seconds > 0")


@dataclass(frozen=True)
class WorldQuestion:
    """What `WorldsEnv.reset` takes: a question and the database it is about."""

    world: SqlWorld
    question: SqlQuestion


class WorldsEnv(SqlEnv):
    """A `SqlEnv` whose database comes with each task (`WorldQuestion`)."""

    def reset(self, task: WorldQuestion):  # type: ignore[override]
        self.world = task.world
        return super().reset(task.question)


class SqlWorlds:
    """The task's databases (built once per process, by seed) and the conversions between rows and episodes."""

    def __init__(self, cfg: SqlWorldParams) -> None:
        self.cfg = cfg
        self.worlds: dict[tuple[str, int], SqlWorld] = {}
        self.asked: dict[tuple[str, int], list[SqlQuestion]] = {}

    def world(self, domain: str, seed: int) -> SqlWorld:
        if (domain, seed) not in self.worlds:
            c = self.cfg
            wc = SqlWorldConfig(domain=domain, num_parents=c.num_parents, max_children=c.max_children, seed=seed)
            self.worlds[(domain, seed)] = SqlWorld(wc)
        return self.worlds[(domain, seed)]

    def rows(self, num: int, seeds: range, taken: set[str]) -> list[Row]:
        """`num` rows from databases of `seeds` (in order), questions_per_world each, skipping questions in `taken`
        (updated; a question is its text and its database)."""
        out: list[Row] = []
        for w, seed in enumerate(seeds):
            domain = self.cfg.domains[w % len(self.cfg.domains)]
            for q in self.questions(domain, seed):
                key = f"{domain}/{seed}/{q.question}"
                if key in taken:
                    continue
                taken.add(key)
                out.append(
                    {
                        "prompt": q.question,
                        "answer": q.sql,
                        "kind": q.kind,
                        "difficulty": q.difficulty,
                        "ordered": q.ordered,
                        "domain": domain,
                        "world_seed": seed,
                    }
                )
                if len(out) == num:
                    return out
        raise ValueError(f"sql_world: only {len(out)} questions for {num} rows; raise the database seeds' range")

    def questions(self, domain: str, seed: int) -> list[SqlQuestion]:
        """The questions of one database (made once, cached)."""
        if (domain, seed) not in self.asked:
            world = self.world(domain, seed)
            self.asked[(domain, seed)] = world.questions(self.cfg.questions_per_world, self.cfg.kinds, seed=0)
        return self.asked[(domain, seed)]

    def env_task(self, row: Row) -> WorldQuestion:
        qs = self.questions(row["domain"], row["world_seed"])
        q = next((x for x in qs if x.question == row["prompt"] and x.sql == row["answer"]), None)
        if q is None:
            raise ValueError(f"sql_world: row {row['prompt']!r} is not a question of its database")
        return WorldQuestion(self.world(row["domain"], row["world_seed"]), q)

    def make_env(self) -> WorldsEnv:
        c = self.cfg
        first = self.world(c.domains[0], 0)
        return WorldsEnv(
            first, prompt=c.prompt, max_rows=c.max_rows, query_seconds=c.query_seconds, answer_format=c.answer_format
        )

    def demonstrator(self, rows: list[Row], rng: random.Random) -> Responder:
        """The oracle for these rows' episodes, sharing one random stream seeded from `rng`; a context is routed
        to the oracle of the question it contains (the longest question text found)."""
        shared = random.Random(rng.randrange(2**32))
        oracles: dict[str, SqlOracle] = {}
        for r in rows:
            oracle = SqlOracle([self.env_task(r).question], self.cfg.oracle_p_mistake, self.cfg.oracle_mistake_kinds)
            oracle.rng = shared
            oracles[r["prompt"]] = oracle

        def respond(context: str) -> str:
            question = max((q for q in oracles if q in context), key=len, default=None)
            return oracles[question](context) if question is not None else "<answer>SELECT 0</answer>"

        return respond


@TASKS.register(
    "sql_world",
    params=SqlWorldParams,
    paper=(SKYRL_SQL, AGRO_SQL),
    fidelity="reduced",
    departures=(
        "generated databases (3 domains, 2 tables each) and templated questions of 5 difficulty levels instead of "
        "Spider/BIRD/SynSQL databases and human or LLM-written questions: no download, exact gold SQL, disjoint "
        "train/held-out databases",
        "tools list_tables / describe_table / run_query called as JSON tool calls and a final <answer>SQL</answer> "
        "(answer_format=sql_block: also a fenced ```sql block in a turn without a tool call), instead of "
        "SkyRL-SQL's <sql>...</sql> blocks with <observation> replies and a final <solution>",
        "no data factory (AGRO-SQL's synthesis with execution verification) beyond checking that every gold query "
        "returns rows and its wrong variant a different result; the warm start imitates a scripted oracle rather "
        "than AGRO-SQL's diversity-aware cold start",
    ),
)
def sql_world_task(cfg: DataConfig, seed: int, params: SqlWorldParams = SqlWorldParams()) -> TaskData:
    """Agent task: Text-to-SQL over generated SQLite databases with read-only tools (reward sql_exec)."""
    worlds = SqlWorlds(params)
    num_train = cfg.num_train or 2000
    base = seed * 10_000_000
    taken: set[str] = set()
    held_out = worlds.rows(cfg.num_eval, range(base + 5_000_000, base + 10_000_000), taken)
    train = worlds.rows(num_train, range(base, base + 5_000_000), taken)
    agent = AgentTask(make_env=worlds.make_env, env_task=worlds.env_task, demonstrator=worlds.demonstrator)
    pieces = tokenizer_pieces(params.prompt) if params.tokenizer_pieces else []
    tokenizer = with_chat_template(char_tokenizer(ALPHABET, pieces))
    return TaskData(train=train, eval=held_out, reward="sql_exec", teacher=None, tokenizer=tokenizer, agent=agent)
