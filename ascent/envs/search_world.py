"""`search_world`: a generated world of fictional entities, searched with BM25, with multi-hop questions.

People, companies, cities and countries get names built from syllables (seeded) and functional relations
(a person's birthplace and employer, a company's founder and headquarters, a city's country, a country's
capital) plus attributes (occupation, birth year, industry, founding year, population). Each entity is
rendered as one short document that states its own facts. The facts are fictional: a model cannot know
them, so an answer that no retrieved document supports is measurable (the evidence fabrication of SOAR,
SOurce-Aware Reinforcement learning; see docs/references.md).

A question follows a path of 1-3 hops from a named entity, e.g. "What is the birthplace of the founder of
Silthar Labs?"; its gold evidence is the document of every entity along the path (each states the next
fact), so the answer is correct by construction. Everything is deterministic given the seed.

The agent has two tools, `search(query)` (BM25 over title + text with `bm25s`: top-k ids, titles and
snippets) and `open(doc_id)` (the full document), and ends with `<answer>...</answer>`. The final step's
`info` records the tool calls, the documents retrieved (shown by search) and opened, the evidence recall,
and whether the answer is `supported`: it appears in a document the agent retrieved or opened.

>>> world = SearchWorld(WorldConfig(num_people=6, num_companies=3, num_cities=3, num_countries=2, seed=1))
>>> q = world.questions(1, hops=2, seed=0)[0]
>>> q.hops, len(q.evidence), q.answer in world.docs[q.evidence[-1]].text
(2, 2, True)
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import string
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from ascent.envs.base import Observation, StepResult
from ascent.envs.retriever import BM25Retriever, Retriever
from ascent.envs.tool_env import ToolEnv
from ascent.envs.tools import (
    CALL_CLOSE,
    CALL_OPEN,
    REPORT_CLOSE,
    REPORT_OPEN,
    ToolCall,
    ToolSet,
    parse_tool_calls,
    tool,
)

SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ra",
    "ven",
    "dor",
    "sil",
    "tha",
    "qua",
    "bel",
    "nor",
    "tes",
    "zan",
    "fi",
    "gar",
    "hol",
    "ix",
    "jor",
    "lum",
    "pra",
    "rin",
    "sto",
    "ul",
    "vey",
    "wen",
    "yal",
    "zor",
    "ma",
    "ne",
    "ti",
    "so",
    "vu",
    "del",
    "ar",
    "en",
    "os",
    "bri",
    "cal",
    "dru",
    "esk",
    "fen",
    "gil",
    "hes",
    "kor",
    "mur",
    "pel",
    "ros",
    "tam",
)
OCCUPATIONS = (
    "chemist",
    "sculptor",
    "pilot",
    "botanist",
    "architect",
    "cartographer",
    "violinist",
    "engineer",
    "baker",
    "astronomer",
)
INDUSTRIES = ("shipping", "textile", "mining", "software", "glassware", "publishing", "brewing", "aerospace")
COMPANY_SUFFIXES = ("Labs", "Works", "Group", "Holdings", "Foundry", "Trading")
COUNTRY_SUFFIXES = ("ia", "land", "mark", "stan")

RELATIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("person", "born_in"): ("city", "the birthplace of {}"),
    ("person", "employer"): ("company", "the employer of {}"),
    ("company", "founder"): ("person", "the founder of {}"),
    ("company", "headquarters"): ("city", "the headquarters city of {}"),
    ("city", "country"): ("country", "the country of {}"),
    ("country", "capital"): ("city", "the capital of {}"),
}
"""(subject kind, relation) -> (object kind, noun-phrase template)."""
ATTRIBUTES: dict[tuple[str, str], str] = {
    ("person", "occupation"): "the occupation of {}",
    ("person", "birth_year"): "the birth year of {}",
    ("company", "industry"): "the industry of {}",
    ("company", "founded"): "the founding year of {}",
    ("city", "population"): "the population of {}",
}
"""(subject kind, attribute) -> noun-phrase template (a question's last hop only)."""


@dataclass(frozen=True)
class WorldConfig:
    """How big a world to generate."""

    num_people: int = 24
    """People (each has a birthplace, an employer, an occupation and a birth year)."""
    num_companies: int = 8
    """Companies (founder, headquarters, industry, founding year)."""
    num_cities: int = 8
    """Cities (country, population)."""
    num_countries: int = 3
    """Countries (capital: one of their cities)."""
    seed: int = 0
    """Seed of names, relations and attributes."""

    def __post_init__(self) -> None:
        if min(self.num_people, self.num_companies, self.num_cities, self.num_countries) < 1:
            raise ValueError(f"every entity count must be >= 1, got {self}")
        if self.num_cities < self.num_countries:
            raise ValueError(
                f"num_cities ({self.num_cities}) must be >= num_countries ({self.num_countries}): "
                "every country needs a capital"
            )


@dataclass(frozen=True)
class Entity:
    """One entity; its document has the id `doc_id`."""

    doc_id: str
    kind: str
    name: str
    relations: dict[str, str] = field(default_factory=dict)
    """relation -> object's doc_id."""
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Doc:
    """A searchable document."""

    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    """A question with its gold answer and evidence."""

    question: str
    answer: str
    hops: int
    evidence: tuple[str, ...]
    """Doc ids along the path, in order: each states the fact of one hop."""
    path: tuple[str, ...]
    """Relation/attribute names from the subject."""
    subject: str
    """Doc id of the entity the question names."""


def normalize(text: str) -> str:
    """Lower-case, drop punctuation and articles, collapse spaces (SQuAD-style answer normalisation).

    >>> normalize("  The Silthar-Labs. ")
    'silthar labs'
    """
    text = re.sub(rf"[{re.escape(string.punctuation)}]", " ", text.lower())
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


class SearchWorld:
    """The generated entities, their documents and the BM25 index over them."""

    def __init__(self, cfg: WorldConfig = WorldConfig()) -> None:
        import bm25s

        self.cfg = cfg
        self.entities = generate_entities(cfg)
        self.docs = {e.doc_id: render_doc(e, self.entities) for e in self.entities.values()}
        self._ids = list(self.docs)
        self._bm25s = bm25s
        self._index = bm25s.BM25()
        corpus = [f"{d.title}. {d.text}" for d in self.docs.values()]
        self._index.index(
            bm25s.tokenize(corpus, stopwords="en", return_ids=False, show_progress=False), show_progress=False
        )
        self._lock = threading.Lock()  # bm25s makes no promise about concurrent retrieval

    def search(self, query: str, k: int = 3) -> list[tuple[str, float]]:
        """Top-`k` (doc_id, BM25 score) for `query`, best first; documents scoring 0 are left out."""
        tokens = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not tokens[0]:
            return []
        with self._lock:
            ids, scores = self._index.retrieve(tokens, k=min(k, len(self._ids)), show_progress=False)
        return [(self._ids[int(i)], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every document for `query` (0 for those sharing no term with it)."""
        hits = dict(self.search(query, len(self._ids)))
        return {d: hits.get(d, 0.0) for d in self._ids}

    def questions(self, num: int, hops: int, seed: int = 0) -> list[Question]:
        """`num` distinct questions of exactly `hops` hops (1-3), deterministic given `seed`."""
        if not 1 <= hops <= 3:
            raise ValueError(f"hops must be 1, 2 or 3, got {hops}")
        rng = random.Random(f"{self.cfg.seed}-{seed}-{hops}")
        out: dict[str, Question] = {}
        for _ in range(200 * num):
            q = self._random_question(rng, hops)
            if q is not None:
                out.setdefault(q.question, q)
            if len(out) == num:
                return list(out.values())
        raise ValueError(
            f"could only make {len(out)} distinct {hops}-hop questions out of {num}; generate a larger world"
        )

    def _random_question(self, rng: random.Random, hops: int) -> Optional[Question]:
        """A random path of `hops` steps (relations, the last may be an attribute); None if it revisits an entity."""
        subject = self.entities[rng.choice(sorted(self.entities))]
        current, seen, evidence, path = subject, {subject.doc_id}, [], []
        phrase = subject.name
        for h in range(hops):
            steps = [r for (k, r) in RELATIONS if k == current.kind]
            steps += [a for (k, a) in ATTRIBUTES if k == current.kind] if h == hops - 1 else []
            step = rng.choice(steps)
            evidence.append(current.doc_id)
            path.append(step)
            if step in current.attributes:
                phrase = ATTRIBUTES[(current.kind, step)].format(phrase)
                return Question(
                    f"What is {phrase}?", current.attributes[step], hops, tuple(evidence), tuple(path), subject.doc_id
                )
            phrase = RELATIONS[(current.kind, step)][1].format(phrase)
            current = self.entities[current.relations[step]]
            if current.doc_id in seen:
                return None
            seen.add(current.doc_id)
        return Question(f"What is {phrase}?", current.name, hops, tuple(evidence), tuple(path), subject.doc_id)


def _names(
    rng: random.Random, count: int, syllables: int, taken: set[str], suffixes: tuple[str, ...] = ("",), sep: str = ""
) -> list[str]:
    """`count` new names of at least `syllables` syllables (more when the world is too big for that many),
    whose stems are not in `taken` (lower-case stems of every name so far; updated)."""
    while len(SYLLABLES) ** syllables < 8 * (len(taken) + count):
        syllables += 1
    out: list[str] = []
    while len(out) < count:
        stem = "".join(rng.choice(SYLLABLES) for _ in range(syllables))
        if stem not in taken:
            taken.add(stem)
            out.append(stem.capitalize() + (sep + rng.choice(suffixes) if suffixes != ("",) else ""))
    return out


def generate_entities(cfg: WorldConfig) -> dict[str, Entity]:
    """All entities, keyed by doc id, deterministic given `cfg.seed`."""
    rng = random.Random(cfg.seed)
    taken: set[str] = set()
    first, last = _names(rng, cfg.num_people, 2, taken), _names(rng, cfg.num_people, 2, taken)
    people = [f"{a} {b}" for a, b in zip(first, last)]
    companies = _names(rng, cfg.num_companies, 2, taken, COMPANY_SUFFIXES, " ")
    cities = _names(rng, cfg.num_cities, 3, taken)
    countries = _names(rng, cfg.num_countries, 2, taken, COUNTRY_SUFFIXES)
    order = [("person", people), ("company", companies), ("city", cities), ("country", countries)]
    ids: dict[str, list[str]] = {}
    n = 0
    for kind, names in order:
        ids[kind] = [f"doc-{n + i:03d}" for i in range(len(names))]
        n += len(names)
    city_country = [
        ids["country"][i % cfg.num_countries] if i < cfg.num_countries else rng.choice(ids["country"])
        for i in range(cfg.num_cities)
    ]
    ents: dict[str, Entity] = {}
    for i, name in enumerate(people):
        ents[ids["person"][i]] = Entity(
            ids["person"][i],
            "person",
            name,
            {"born_in": rng.choice(ids["city"]), "employer": rng.choice(ids["company"])},
            {"occupation": rng.choice(OCCUPATIONS), "birth_year": str(rng.randint(1900, 1999))},
        )
    for i, name in enumerate(companies):
        ents[ids["company"][i]] = Entity(
            ids["company"][i],
            "company",
            name,
            {"founder": rng.choice(ids["person"]), "headquarters": rng.choice(ids["city"])},
            {"industry": rng.choice(INDUSTRIES), "founded": str(rng.randint(1850, 1990))},
        )
    for i, name in enumerate(cities):
        ents[ids["city"][i]] = Entity(
            ids["city"][i], "city", name, {"country": city_country[i]}, {"population": str(rng.randint(1000, 900000))}
        )
    for i, name in enumerate(countries):
        capital = ids["city"][i]  # city i < num_countries lies in country i
        ents[ids["country"][i]] = Entity(ids["country"][i], "country", name, {"capital": capital})
    return ents


def render_doc(e: Entity, ents: dict[str, Entity]) -> Doc:
    """The document stating entity `e`'s own facts."""
    r = {k: ents[v].name for k, v in e.relations.items()}
    a = e.attributes
    text = {
        "person": (
            f"{e.name} is a {a.get('occupation')} born in {a.get('birth_year')} in {r.get('born_in')}. "
            f"{e.name} works for {r.get('employer')}."
        ),
        "company": (
            f"{e.name} is a {a.get('industry')} company founded in {a.get('founded')} by {r.get('founder')}. "
            f"Its headquarters are in {r.get('headquarters')}."
        ),
        "city": f"{e.name} is a city in {r.get('country')} with a population of {a.get('population')}.",
        "country": f"{e.name} is a country. Its capital is {r.get('capital')}.",
    }[e.kind]
    return Doc(e.doc_id, e.name, text)


ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"
"""Every character search_world writes (documents, prompt, tool results): a character tokenizer for it
needs these (plus those of its chat template)."""


def tokenizer_pieces(prompt: str = "") -> list[str]:
    """Multi-character tokens for a `char_tokenizer` over search_world text (`char_tokenizer(ALPHABET,
    tokenizer_pieces())`): the name syllables (lower-case and capitalised; names then split into
    syllables the same way wherever they stand), the suffixes, the words of documents, questions and
    `prompt` (lower-case ones also after a space), the tool-call and tool-response markup and the char chat
    template's role headers. An episode is ~3x shorter than in characters; numbers stay in digits.
    """
    e = {
        "person": Entity("p", "person", "P", {"born_in": "c", "employer": "m"}, {"occupation": "o", "birth_year": "1"}),
        "company": Entity(
            "m", "company", "M", {"founder": "p", "headquarters": "c"}, {"industry": "i", "founded": "1"}
        ),
        "city": Entity("c", "city", "C", {"country": "n"}, {"population": "1"}),
        "country": Entity("n", "country", "N", {"capital": "c"}),
    }
    ents = {x.doc_id: x for x in e.values()}
    text = " ".join(
        [render_doc(x, ents).text for x in e.values()]
        + [t for _, t in RELATIONS.values()]
        + list(ATTRIBUTES.values())
        + ["What is", "No documents match the query.", prompt.replace("{question}", " ").replace("{tools}", " ")]
    )
    words = set(re.findall(r"[A-Za-z]+", text)) | set(OCCUPATIONS) | set(INDUSTRIES) | set(COMPANY_SUFFIXES)
    after_space = {
        " " + w for w in words if w.islower()
    }  # never " Word": it would run into a name that starts like it ("No" + "rmurfi")
    syllables = set(SYLLABLES) | {s.capitalize() for s in SYLLABLES} | set(COUNTRY_SUFFIXES)
    markup = [
        CALL_OPEN + '{"name": "search", "arguments": {"query": "',
        CALL_OPEN + '{"name": "open", "arguments": {"doc_id": "',
        '"}}' + CALL_CLOSE,
        "<tool_response>\n",
        "\n</tool_response>",
        "<answer>",
        "</answer>",
        "[doc-",
        "[user]\n",
        "[assistant]\n",
        "[tool]\n",
        ". ",
        ": ",
    ]
    return sorted(syllables | words | after_space | {" " + w for w in COMPANY_SUFFIXES}) + markup


PROMPT = (
    "Answer the question by searching the documents.\n{tools}\n"
    "When you know the answer, write <answer>your answer</answer>.\nQuestion: {question}"
)


class SearchWorldEnv(ToolEnv):
    """One episode over a `SearchWorld`: tools `search` and `open`, a final `<answer>`; reward 1 for an
    exact (normalised) match with the gold answer, else 0."""

    def __init__(
        self,
        world: SearchWorld,
        top_k: int = 3,
        snippet_chars: int = 80,
        prompt: str = PROMPT,
        timeout: float = 5.0,
        max_output_chars: int = 1000,
        retriever: Optional[Retriever] = None,
    ) -> None:
        """`prompt` has the fields {question} and {tools} (the tools' specs and call syntax); `retriever` picks the
        top-k of a search (`ascent.envs.retriever`; None: the world's fixed BM25 top-k)."""
        self.world, self.top_k, self.snippet_chars, self.template = world, top_k, snippet_chars, prompt
        tools = [tool(self.search), tool(self.open_doc, name="open")]
        super().__init__(ToolSet(tools, timeout=timeout, max_output_chars=max_output_chars))
        self.retriever: Retriever = retriever or BM25Retriever()
        self.generator = self.retriever.episode_generator()
        self.retrieved: list[str] = []
        self.opened: list[str] = []
        self.retrievals: list[dict[str, Any]] = []
        """The sampled lists of the episode (a trainable retriever while training), recorded in each step's info."""
        self._lock = threading.Lock()

    def search(self, query: str) -> str:
        """Search the documents by keywords; returns the best matches as [doc_id] title: snippet.

        Args:
            query: keywords, e.g. a name.
        """
        with self._lock:
            history = self.retrieved + [d for d in self.opened if d not in self.retrieved]
            hits, record = self.retriever.retrieve(self.world, query, history, self.top_k, self.generator)
            self.retrieved += [d for d, _ in hits if d not in self.retrieved]
            self.retrievals += [record] if record is not None else []
        if not hits:
            return "No documents match the query."
        return "\n".join(
            f"[{d}] {self.world.docs[d].title}: {_snippet(self.world.docs[d].text, self.snippet_chars)}"
            for d, _ in hits
        )

    def open_doc(self, doc_id: str) -> str:
        """Open a document by its id; returns its full text.

        Args:
            doc_id: an id returned by search, e.g. doc-007.
        """
        doc = self.world.docs.get(doc_id.strip())
        if doc is None:
            raise ValueError(f"no document {doc_id!r}; use an id returned by search")
        with self._lock:
            self.opened += [doc.doc_id] if doc.doc_id not in self.opened else []
        return f"[{doc.doc_id}] {doc.title}\n{doc.text}"

    def reset(self, task: Question) -> Observation:
        self.retrieved, self.opened, self.retrievals = [], [], []
        return super().reset(task)

    def step(self, action: str) -> StepResult:
        """ToolEnv's step; the info also carries the lists a trainable retriever sampled in it (`retrievals`)."""
        before = len(self.retrievals)
        result = super().step(action)
        with self._lock:
            new = self.retrievals[before:]
        return dataclasses.replace(result, info={**result.info, "retrievals": new}) if new else result

    def prompt(self, task: Question) -> Observation:
        return Observation(text=self.template.format(question=task.question, tools=self.tools.describe()))

    def score(self, answer: str) -> tuple[float, dict[str, Any]]:
        q: Question = self.task
        correct = normalize(answer) == normalize(q.answer)
        seen = set(self.retrieved) | set(self.opened)
        supported = bool(normalize(answer)) and any(
            f" {normalize(answer)} " in f" {normalize(self.world.docs[d].text)} " for d in seen
        )
        recall = sum(d in seen for d in q.evidence) / len(q.evidence)
        return float(correct), {
            "correct": correct,
            "supported": supported,
            "gold_answer": q.answer,
            "hops": q.hops,
            "evidence": list(q.evidence),
            "docs_retrieved": list(self.retrieved),
            "docs_opened": list(self.opened),
            "evidence_recall": recall,
        }


class OracleAgent:
    """A scripted, deliberately imperfect search_world agent (demonstrations for warm starts, with
    `ascent.agents.ScriptedEngine`): per hop it searches the current entity's name and opens its
    document, then answers. With probability `p_guess` an episode answers at once without searching (a
    random entity of the answer's kind: usually wrong, never supported); with probability `p_redundant`
    a search is repeated once.

    Called with the rendered context, it returns the next reply: its state is read from the context (the
    question, the last tool call), its coin flips come from one `Random(seed)` stream, so a rerun that
    makes the same calls in the same order (the agent loop does) is identical.
    """

    def __init__(
        self,
        world: SearchWorld,
        questions: list[Question],
        p_guess: float = 0.1,
        p_redundant: float = 0.1,
        seed: int = 0,
    ) -> None:
        if not (0 <= p_guess <= 1 and 0 <= p_redundant <= 1):
            raise ValueError(f"p_guess and p_redundant must be in [0, 1], got {p_guess} and {p_redundant}")
        self.world, self.questions = world, questions
        self.p_guess, self.p_redundant = p_guess, p_redundant
        self.rng = random.Random(seed)

    def __call__(self, context: str) -> str:
        """The next reply; in a reconstructed workspace (`agent.context=workspace`: the context holds a report
        block) it starts with the updated report, the facts of every hop found so far (`report`)."""
        action = self.act(context)
        if REPORT_OPEN not in context:
            return action
        return f"{REPORT_OPEN}{self.report(context)}{REPORT_CLOSE}{action}"

    def act(self, context: str) -> str:
        """The next action: a tool call or an answer."""
        q = self.question(context)
        if q is None:
            return "<answer>unknown</answer>"
        calls = [c for c in parse_tool_calls(context) if isinstance(c, ToolCall)]
        if not calls:
            return self.guess(q) if self.rng.random() < self.p_guess else self.search(q, 0)
        last = calls[-1]
        if last.name == "search":
            hop = self.hop(q, last)
            # a workspace shows the last call only: the hop's fact in the report says its search was seen already
            first = (
                fact(self.world, q, hop) not in _report(context) if REPORT_OPEN in context else calls.count(last) < 2
            )
            repeat = first and self.rng.random() < self.p_redundant
            return self.search(q, hop) if repeat else _call("open", doc_id=q.evidence[hop])
        hop = self.hop(q, last)
        return self.search(q, hop + 1) if hop + 1 < len(q.evidence) else f"<answer>{q.answer}</answer>"

    def question(self, context: str) -> Optional[Question]:
        return max((q for q in self.questions if q.question in context), key=lambda q: len(q.question), default=None)

    def hop(self, q: Question, call: ToolCall) -> int:
        """The hop a tool call of this oracle's is about."""
        if call.name == "search":
            return next(i for i, d in enumerate(q.evidence) if self.world.docs[d].title == call.arguments.get("query"))
        return q.evidence.index(call.arguments["doc_id"])

    def report(self, context: str) -> str:
        """The report after the context's last tool call: the fact sentence of each hop up to that call's."""
        q = self.question(context)
        calls = [c for c in parse_tool_calls(context) if isinstance(c, ToolCall)]
        if q is None or not calls:
            return ""
        return " ".join(fact(self.world, q, h) for h in range(self.hop(q, calls[-1]) + 1))

    def search(self, q: Question, hop: int) -> str:
        return _call("search", query=self.world.docs[q.evidence[hop]].title)

    def guess(self, q: Question) -> str:
        """An answer of the right kind drawn at random (no search)."""
        kind = self.world.entities[q.evidence[-1]].kind
        if (kind, q.path[-1]) in RELATIONS:
            pool = sorted(e.name for e in self.world.entities.values() if e.kind == RELATIONS[(kind, q.path[-1])][0])
        else:
            pool = sorted(
                {e.attributes[q.path[-1]] for e in self.world.entities.values() if q.path[-1] in e.attributes}
            )
        return f"<answer>{self.rng.choice(pool)}</answer>"


def evidence_sentence(text: str, answer: str) -> str:
    """The sentence of `text` that states `answer` (the last one that contains it).

    >>> evidence_sentence("Kalo is a pilot born in 1950 in Ulm. Kalo works for Vey Labs.", "Vey Labs")
    'Kalo works for Vey Labs.'
    """
    sentences = [x.strip() for x in text.replace(". ", ".\n").splitlines() if x.strip()]
    return next((x for x in reversed(sentences) if answer in x), sentences[-1] if sentences else "")


def fact(world: SearchWorld, q: Question, hop: int) -> str:
    """The sentence of hop `hop`'s document that names the next entity on the question's path (the answer at
    the last hop)."""
    target = world.docs[q.evidence[hop + 1]].title if hop + 1 < len(q.evidence) else q.answer
    return evidence_sentence(world.docs[q.evidence[hop]].text, target)


def _report(context: str) -> str:
    """The report a workspace context carries (its last report block)."""
    start = context.rfind(REPORT_OPEN) + len(REPORT_OPEN)
    return context[start : context.find(REPORT_CLOSE, start)]


def _call(name: str, **arguments: str) -> str:
    return f"{CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CALL_CLOSE}"


def _snippet(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " ..."
