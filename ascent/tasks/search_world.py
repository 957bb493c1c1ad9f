"""The `search_world` agent task: questions over many small generated worlds (`ascent.envs.search_world`),
answered with search/open tools, reward answer_em.

    data.task=search_world(people=4, hops=[1, 2])      # YAML: task: {search_world: {people: 4, hops: [1, 2]}}

Every few questions get their own world (`questions_per_world`), and the held-out questions live in worlds
no training question comes from, so a policy cannot memorise facts: it has to search. Rows are
`{"prompt": question, "answer", "hops", "evidence", "evidence_titles", "path", "subject", "world_seed",
"evidence_doc", "evidence_sentence"}` (the last hop's document and its sentence that states the answer: the source
an evidence or grounding reward checks against, `evidence_rm`, `source_similarity`);
the environment (`WorldsEnv`) switches to the row's world on reset. The warm start imitates `OracleAgent`
(scripted, deliberately imperfect: `oracle_p_guess`, `oracle_p_redundant`), or `SearchingOracle`
(`oracle_open=false`: the same, reading facts from search results without opening); with `oracle_markup`, its
replies also carry a reward's markup (`ascent.tasks.search_markup`: CaRR's citations, RLVMR's tags, SOAR's streams).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ascent.agents.chat import with_chat_template
from ascent.config.schema import DataConfig
from ascent.envs.retriever import RETRIEVERS, Retriever, RetrieverTrainer
from ascent.envs.search_world import (
    ALPHABET,
    ATTRIBUTES,
    RELATIONS,
    OracleAgent,
    Question,
    SearchWorld,
    SearchWorldEnv,
    WorldConfig,
    evidence_sentence,
    tokenizer_pieces,
)
from ascent.envs.tools import ToolCall, parse_tool_calls
from ascent.policy.tokenizer import char_tokenizer
from ascent.tasks.agent import AgentTask, Responder
from ascent.tasks.base import TASKS, Row, TaskData
from ascent.tasks.search_markup import MARKUP_PIECES, MARKUPS, mark


@dataclass(frozen=True)
class SearchWorldParams:
    """The `search_world` agent task: one small generated world per few questions (train and held-out
    worlds are disjoint, so facts cannot be memorised), and the scripted oracle of the warm start."""

    people: int = 6
    """People per world."""
    companies: int = 3
    """Companies per world."""
    cities: int = 3
    """Cities per world (>= countries: every country needs a capital)."""
    countries: int = 2
    """Countries per world."""
    questions_per_world: int = 4
    """Questions asked about each world."""
    hops: list[int] = field(default_factory=lambda: [1])
    """Hop counts of the questions (1-3), used in turn."""
    relations: list[str] = field(default_factory=list)
    """Question types kept, by the last hop's relation or attribute (employer, headquarters, population,
    capital, born_in, occupation, ...; empty: all). Fewer types make the warm start learn faster."""
    top_k: int = 2
    """Documents a search returns."""
    snippet_chars: int = 80
    """Characters of each search hit's text shown."""
    prompt: str = "Q: {question}"
    """First user message; fields {question} and {tools} (the tools' specs and call syntax)."""
    oracle_p_guess: float = 0.6
    """Warm-start oracle: probability of answering at once without searching (a guess: usually wrong, never
    supported), in [0, 1]."""
    oracle_p_redundant: float = 0.3
    """Warm-start oracle: probability of repeating a search once, in [0, 1]."""
    oracle_guess_relations: list[str] = field(default_factory=list)
    """Warm-start oracle: question types (last hop) it may guess on, with oracle_p_guess; it always searches
    the others (empty: it may guess on every type). A systematic blind spot, like the default task's dropped
    carry."""
    oracle_quote: bool = False
    """Warm-start oracle (oracle_open=false): precede an answer found by searching with the evidence sentence, as
    `<evidence>SENTENCE</evidence> <answer>X</answer>` (the span `evidence_rm` scores; a guess has none). The
    tokenizer then also gets `<evidence>` and `</evidence>` as whole tokens."""
    tokenizer_pieces: bool = True
    """The task's character tokenizer also gets whole tokens for name syllables, the documents' words and
    the tool-call markup (`ascent.envs.search_world.tokenizer_pieces`): ~4x shorter episodes, names copied
    in 2-4 tokens; false: one token per character."""
    oracle_open: bool = True
    """Warm-start oracle: open each hop's document after searching (OracleAgent); false: read the fact from
    the search result (needs snippet_chars >= the documents' length, ~120) and move on (shorter episodes)."""
    oracle_markup: str = ""
    """Warm-start oracle: the markup its demonstrations write (`ascent.tasks.search_markup`): `cite` (CaRR's
    `<cite>`), `meta` (RLVMR's `<plan>`/`<explore>`), `soar` (SOAR's `<external>`/`<internal>` streams and
    `<source>`); empty: none. The tokenizer then also gets the markup's tags as whole tokens."""
    oracle_markup_error: float = 0.2
    """Warm-start oracle with a markup: the rate of the markup's own mistakes (a wrong or missing citation, a
    dropped tag, a fabricated or mislabelled source), in [0, 1]."""
    retriever: str = "bm25"
    """Who picks a search's top_k documents (`ascent.envs.retriever.RETRIEVERS`): `bm25` (fixed top-k) or
    `plackett_luce` (HARR's sampled, trainable retriever, trained in the RL step beside the policy; in YAML with
    its parameters, e.g. "plackett_luce(lr=0.05)")."""

    def __post_init__(self) -> None:
        if not (0 <= self.oracle_p_guess <= 1 and 0 <= self.oracle_p_redundant <= 1):
            raise ValueError("oracle_p_guess and oracle_p_redundant must be in [0, 1]")
        if self.oracle_markup and self.oracle_markup not in MARKUPS:
            raise ValueError(
                f"oracle_markup must be one of {', '.join(MARKUPS)} (or empty), got {self.oracle_markup!r}"
            )
        if not 0 <= self.oracle_markup_error <= 1:
            raise ValueError(f"oracle_markup_error must be in [0, 1], got {self.oracle_markup_error}")
        counts = (self.people, self.companies, self.cities, self.countries, self.questions_per_world, self.top_k)
        if min(counts) < 1 or self.cities < self.countries:
            raise ValueError(
                "people, companies, cities, countries, questions_per_world and top_k must be >= 1, "
                "and cities >= countries"
            )
        if not self.hops or any(h not in (1, 2, 3) for h in self.hops):
            raise ValueError(f"hops must be a non-empty list of 1, 2 or 3, got {self.hops}")
        RETRIEVERS.resolve(self.retriever, key="retriever")
        known = {r for _, r in RELATIONS} | {a for _, a in ATTRIBUTES}
        if set(self.relations) - known:
            unknown = sorted(set(self.relations) - known)
            raise ValueError(f"relations: unknown {unknown}; choose among {sorted(known)}")


EVIDENCE_OPEN, EVIDENCE_CLOSE = "<evidence>", "</evidence>"
"""The tags around the quoted evidence (`oracle_quote`), the default span of `evidence_rm`."""


@dataclass(frozen=True)
class WorldQuestion:
    """What `WorldsEnv.reset` takes: a question and the world it is about."""

    world: SearchWorld
    question: Question


class WorldsEnv(SearchWorldEnv):
    """A `SearchWorldEnv` whose world comes with each task (`WorldQuestion`)."""

    def reset(self, task: WorldQuestion):  # type: ignore[override]
        self.world = task.world
        return super().reset(task.question)


class SearchingOracle(OracleAgent):
    """`OracleAgent` that reads each hop's fact from the search result instead of opening the document
    (for worlds whose search hits show whole documents: `snippet_chars` >= the documents' length). Same
    coin flips, same guesses and redundant searches; where the oracle would open, it moves on. With
    `quote`, an answer found by searching is preceded by the evidence sentence it comes from."""

    def __init__(self, *args: Any, quote: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quote = quote

    def act(self, context: str) -> str:
        reply = super().act(context)
        calls = [c for c in parse_tool_calls(reply) if isinstance(c, ToolCall)]
        q = self.question(context)
        if q is not None and calls and calls[0].name == "open":
            hop = q.evidence.index(calls[0].arguments["doc_id"])
            reply = self.search(q, hop + 1) if hop + 1 < len(q.evidence) else f"<answer>{q.answer}</answer>"
        if self.quote and q is not None and reply.startswith("<answer>") and parse_tool_calls(context):
            quote = evidence_sentence(self.world.docs[q.evidence[-1]].text, q.answer)
            reply = f"{EVIDENCE_OPEN}{quote}{EVIDENCE_CLOSE} {reply}"
        return reply


class SearchWorlds:
    """The task's worlds (built once, by seed) and the conversions between rows, questions and episodes."""

    def __init__(self, cfg: SearchWorldParams, seed: int = 0) -> None:
        self.cfg = cfg
        self.worlds: dict[int, SearchWorld] = {}
        self.retriever: Retriever = RETRIEVERS.resolve(cfg.retriever, key="retriever")(seed=seed)
        """One retriever for every episode (a trainable one is trained by `companions`)."""
        self.companions = (RetrieverTrainer(self.retriever),) if self.retriever.trainable else ()

    def world(self, seed: int) -> SearchWorld:
        if seed not in self.worlds:
            c = self.cfg
            self.worlds[seed] = SearchWorld(
                WorldConfig(
                    num_people=c.people,
                    num_companies=c.companies,
                    num_cities=c.cities,
                    num_countries=c.countries,
                    seed=seed,
                )
            )
        return self.worlds[seed]

    def rows(self, num: int, seeds: range, taken: set[str]) -> list[Row]:
        """`num` rows from worlds of `seeds` (in order), questions_per_world each, skipping question texts in
        `taken` (updated)."""
        out: list[Row] = []
        hops, per = self.cfg.hops, self.cfg.questions_per_world
        for w, seed in enumerate(seeds):
            world = self.world(seed)
            kinds = [hops[(w * per + k) % len(hops)] for k in range(per)]  # the hop counts cycle through the rows
            for q in (q for h in sorted(set(kinds)) for q in self.questions(world, kinds.count(h), h)):
                if q.question in taken:
                    continue
                taken.add(q.question)
                source = world.docs[q.evidence[-1]].text  # the last hop's document: it states the answer
                out.append(
                    {
                        "prompt": q.question,
                        "answer": q.answer,
                        "hops": q.hops,
                        "evidence": list(q.evidence),
                        "path": list(q.path),
                        "subject": q.subject,
                        "evidence_titles": [world.docs[d].title for d in q.evidence],
                        "world_seed": seed,
                        "evidence_doc": source,
                        "evidence_sentence": evidence_sentence(source, q.answer),
                    }
                )
                if len(out) == num:
                    return out
        raise ValueError(
            f"search_world: only {len(out)} distinct questions for {num} rows; raise the world seeds' range"
        )

    def questions(self, world: SearchWorld, num: int, hops: int) -> list[Question]:
        """Up to `num` questions of `hops` hops about `world` whose last hop is one of `relations` (all when empty)."""
        keep = set(self.cfg.relations)
        if not keep:
            return world.questions(num, hops=hops)
        pool = []
        for ask in (4 * num, 2 * num, num):  # as many candidates as the world has, up to 4 per question wanted
            try:
                pool = world.questions(ask, hops=hops)
                break
            except ValueError:
                continue
        return [q for q in pool if q.path[-1] in keep][:num]

    def env_task(self, row: Row) -> WorldQuestion:
        q = Question(
            row["prompt"], row["answer"], row["hops"], tuple(row["evidence"]), tuple(row["path"]), row["subject"]
        )
        return WorldQuestion(self.world(row["world_seed"]), q)

    def make_env(self) -> WorldsEnv:
        c = self.cfg
        return WorldsEnv(
            self.world(0), top_k=c.top_k, snippet_chars=c.snippet_chars, prompt=c.prompt, retriever=self.retriever
        )

    def demonstrator(self, rows: list[Row], rng: random.Random) -> Responder:
        """The oracle for these rows' episodes: one `OracleAgent` per world, sharing one random stream
        seeded from `rng`; a context is routed to the oracle of the question it contains."""
        shared = random.Random(rng.randrange(2**32))
        oracles: dict[str, OracleAgent] = {}
        c = self.cfg
        for r in rows:
            task = self.env_task(r)
            p_guess = (
                c.oracle_p_guess
                if not c.oracle_guess_relations or task.question.path[-1] in c.oracle_guess_relations
                else 0.0
            )
            if c.oracle_open:
                oracle = OracleAgent(task.world, [task.question], p_guess, c.oracle_p_redundant)
            else:
                oracle = SearchingOracle(
                    task.world, [task.question], p_guess, c.oracle_p_redundant, quote=c.oracle_quote
                )
            oracle.rng = shared
            oracles[r["prompt"]] = oracle

        def respond(context: str) -> str:
            question = max((q for q in oracles if q in context), key=len, default=None)
            if question is None:
                return "<answer>unknown</answer>"
            reply = oracles[question](context)
            return mark(oracles[question], c.oracle_markup, c.oracle_markup_error, context, reply)

        return respond


@TASKS.register("search_world", params=SearchWorldParams, paper=None, fidelity="ascent")
def search_world_task(cfg: DataConfig, seed: int, params: SearchWorldParams = SearchWorldParams()) -> TaskData:
    """Agent task: multi-hop questions over small generated worlds, answered with search/open tools (answer_em)."""
    worlds = SearchWorlds(params, seed)
    num_train = cfg.num_train or 2000
    base = seed * 10_000_000
    taken: set[str] = set()
    held_out = worlds.rows(cfg.num_eval, range(base + 5_000_000, base + 10_000_000), taken)
    train = worlds.rows(num_train, range(base, base + 5_000_000), taken)
    agent = AgentTask(
        make_env=worlds.make_env,
        env_task=worlds.env_task,
        demonstrator=worlds.demonstrator,
        companions=worlds.companions,
    )
    pieces = tokenizer_pieces(params.prompt) if params.tokenizer_pieces else []
    if params.tokenizer_pieces and params.oracle_quote:
        pieces += [EVIDENCE_OPEN, EVIDENCE_CLOSE]
    if params.tokenizer_pieces and params.oracle_markup:
        pieces += MARKUP_PIECES[params.oracle_markup]
    tokenizer = with_chat_template(char_tokenizer(ALPHABET, pieces))
    return TaskData(train=train, eval=held_out, reward="answer_em", teacher=None, tokenizer=tokenizer, agent=agent)
