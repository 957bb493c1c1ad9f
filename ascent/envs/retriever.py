"""The search world's retriever as a choice: fixed BM25 top-k, or a sampled, trainable Plackett-Luce policy.

HARR (Zhang, Qin, Wu, Zhang & Deng 2026, arXiv:2602.03645) makes a RAG retriever a policy: deterministic top-k
retrieval becomes sampling an ordered list of k documents from the retriever's scores without replacement
(the Plackett-Luce model), the state of each retrieval is the sub-query plus the retrieval history (the same
query can need different documents after different histories: state aliasing), and the retriever is trained
by group-relative policy gradient on the final answer's reward. Here, for `ascent.envs.search_world`:

- `RETRIEVERS` holds the choice (`data.task=search_world(retriever=plackett_luce)`): `bm25` (the fixed top-k,
  the default) or `plackett_luce` (`PlackettLuceRetriever`);
- the state of a search is (query, the documents the episode has retrieved or opened so far); each document of
  the world is scored by a linear scorer over `FEATURES` (its BM25 score and how it relates to the history);
- while training (`train(True)`) the top-k is sampled: with scores s over the candidates, an ordered list
  (d_1..d_k) has probability prod_i exp(s_{d_i}) / sum_{d not in d_<i} exp(s_d) (`plackett_luce_logprob`);
  evaluation takes the k best scores;
- every sampled list is recorded in the step's info (`retrievals`: candidates, features, order), so the
  trainer can score it again under the current parameters: `RetrieverTrainer.update` takes the episode's
  advantage A (the same group-relative advantage the generator gets) and descends
  -mean_episodes(A * sum_retrievals log pi(list | state)).

>>> import torch
>>> s = torch.tensor([[2.0, 1.0, 0.0]])
>>> p = plackett_luce_logprob(s, torch.tensor([[0, 1]]), torch.ones(1, 3, dtype=torch.bool)).exp()
>>> round(float(p), 4)  # e^2/(e^2+e+1) * e/(e+1)
0.4863
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import torch

from ascent import papers
from ascent.registry import Registry

RETRIEVERS: Registry = Registry("retriever")
"""name -> factory `(params, seed) -> Retriever` (`data.task=search_world(retriever=NAME)`)."""

FEATURES = ("bm25", "seen", "linked", "in_query", "links_back")
"""Per (state, document): BM25 score of the query / the best candidate's; 1 if the document was already retrieved
or opened; 1 if a document of the history names it (its title appears in their text) and it is not seen; 1 if the
query names it; 1 if it names a document of the history."""
QUERY_FEATURES = ("bm25", "in_query")
"""The query-only subset (`history=false`): the aliased state HARR argues against."""


class Retriever(Protocol):
    """What `SearchWorldEnv.search` asks: the top-k for a query given the episode's history."""

    trainable: bool

    def retrieve(
        self, world: Any, query: str, history: list[str], k: int, generator: Optional[torch.Generator]
    ) -> tuple[list[tuple[str, float]], Optional[dict[str, Any]]]:
        """((doc_id, score) hits best first, the record of a sampled list or None)."""
        ...

    def episode_generator(self) -> Optional[torch.Generator]:
        """A generator for one new episode (None when retrieval is deterministic)."""
        ...


class BM25Retriever:
    """The fixed top-k of the world's BM25 index (bm25s); the history is ignored."""

    trainable = False

    def retrieve(
        self, world: Any, query: str, history: list[str], k: int, generator: Optional[torch.Generator]
    ) -> tuple[list[tuple[str, float]], None]:
        return world.search(query, k), None

    def episode_generator(self) -> None:
        return None


def plackett_luce_logprob(scores: torch.Tensor, order: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """log P(order | scores) under Plackett-Luce: sum_i [s_{o_i} - logsumexp(s over valid candidates not in o_<i)].

    scores (R, C), order (R, k) long candidate indices (-1: no pick, padding), valid (R, C) bool -> (R,)."""
    s = scores.masked_fill(~valid, float("-inf"))  # (R, C)
    out = torch.zeros(scores.shape[0], dtype=scores.dtype)
    for j in range(order.shape[1]):
        idx = order[:, j : j + 1]  # (R, 1)
        present = idx[:, 0] >= 0
        safe = idx.clamp(min=0)
        pick = s.gather(1, safe)[:, 0]
        out = out + torch.where(present, pick - torch.logsumexp(s, dim=1), torch.zeros_like(out))
        taken = torch.zeros_like(valid).scatter(1, safe, present[:, None])
        s = s.masked_fill(taken, float("-inf"))
    return out


def features(world: Any, query: str, history: list[str], names: tuple[str, ...] = FEATURES) -> torch.Tensor:
    """(D, F) features of every document of `world` (in `world.docs` order) for the state (query, history)."""
    bm25 = world.scores(query)  # doc_id -> score
    top = max(bm25.values(), default=0.0) or 1.0
    seen = set(history)
    seen_text = " ".join(f" {normalize(world.docs[h].text)} " for h in history)
    seen_titles = [normalize(world.docs[h].title) for h in history]
    q = f" {normalize(query)} "
    rows = []
    for d, doc in world.docs.items():
        title, text = normalize(doc.title), f" {normalize(doc.text)} "
        value = {
            "bm25": bm25.get(d, 0.0) / top,
            "seen": float(d in seen),
            "linked": float(d not in seen and f" {title} " in seen_text),
            "in_query": float(f" {title} " in q),
            "links_back": float(d not in seen and any(f" {t} " in text for t in seen_titles)),
        }
        rows.append([value[n] for n in names])
    return torch.tensor(rows, dtype=torch.float32)


def normalize(text: str) -> str:
    """Lower-case words and numbers, one space apart (how titles are matched in texts).

    >>> normalize("Silthar Labs. Its headquarters")
    'silthar labs its headquarters'
    """
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass(frozen=True)
class PlackettLuceParams:
    """HARR's stochastic retriever over BM25 and history features (`PlackettLuceRetriever`)."""

    history: bool = True
    """Features of the retrieval history too (`FEATURES`); false: the query only (`QUERY_FEATURES`), the aliased
    state."""
    init_bm25: float = 5.0
    """Initial weight of the BM25 feature (the others start at 0): the untrained policy samples around BM25's
    ranking, and its greedy top-k is BM25's."""
    lr: float = 0.1
    """Adam learning rate of the scorer (one step per RL step)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip of the scorer (0: none)."""

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.max_grad_norm < 0:
            raise ValueError(f"lr must be > 0 and max_grad_norm >= 0, got {self.lr} and {self.max_grad_norm}")


class PlackettLuceRetriever(torch.nn.Module):
    """Scores s = features @ w; samples the top-k by Plackett-Luce while training, takes the k best otherwise."""

    trainable = True

    def __init__(self, params: PlackettLuceParams = PlackettLuceParams(), seed: int = 0) -> None:
        super().__init__()
        self.params = params
        self.names = FEATURES if params.history else QUERY_FEATURES
        w = torch.zeros(len(self.names))
        w[self.names.index("bm25")] = params.init_bm25
        self.weight = torch.nn.Parameter(w)  # (F,)
        self.sampling = False
        """True while collecting training episodes (`train`); False: greedy top-k (evaluation)."""
        self.seeds = random.Random(f"retriever-{seed}")
        self._lock = threading.Lock()

    def train(self, mode: bool = True) -> "PlackettLuceRetriever":
        """Sample the top-k (mode True) or take the best k (False)."""
        super().train(mode)
        self.sampling = mode
        return self

    def scores(self, feats: torch.Tensor) -> torch.Tensor:
        return feats @ self.weight  # (..., C)

    def episode_generator(self) -> Optional[torch.Generator]:
        """A generator seeded from the retriever's own stream while sampling; None otherwise (greedy evaluation
        draws nothing, so it leaves the training stream where it was)."""
        if not self.sampling:
            return None
        with self._lock:
            return torch.Generator().manual_seed(self.seeds.randrange(2**63))

    @torch.no_grad()
    def retrieve(
        self, world: Any, query: str, history: list[str], k: int, generator: Optional[torch.Generator]
    ) -> tuple[list[tuple[str, float]], Optional[dict[str, Any]]]:
        ids = list(world.docs)
        feats = features(world, query, history, self.names)  # (D, F)
        s = self.scores(feats)  # (D,)
        k = min(k, len(ids))
        if self.sampling:
            order = torch.multinomial(torch.softmax(s, 0), k, replacement=False, generator=generator)  # sequential PL
        else:
            order = torch.argsort(s, descending=True, stable=True)[:k]
        hits = [(ids[int(i)], float(s[i])) for i in order]
        if not self.sampling:
            return hits, None
        record = {"query": query, "features": feats.tolist(), "order": [int(i) for i in order]}
        return hits, record

    def logprob(self, records: list[dict[str, Any]]) -> torch.Tensor:
        """(R,) log-probability of each recorded list under the current scorer (with gradient)."""
        width = max(len(r["features"]) for r in records)
        k = max(len(r["order"]) for r in records)
        feats = torch.zeros(len(records), width, len(self.names))  # (R, C, F)
        valid = torch.zeros(len(records), width, dtype=torch.bool)  # (R, C)
        order = torch.full((len(records), k), -1, dtype=torch.long)  # (R, k)
        for i, r in enumerate(records):
            feats[i, : len(r["features"])] = torch.tensor(r["features"])
            valid[i, : len(r["features"])] = True
            order[i, : len(r["order"])] = torch.tensor(r["order"])
        return plackett_luce_logprob(self.scores(feats), order, valid)


class RetrieverTrainer:
    """Trains a `PlackettLuceRetriever` beside the policy, in the same RL step: called by the trainer with the
    step's batch and the generator's advantages (`ascent.trainer.rl.CoTrained`)."""

    def __init__(self, retriever: PlackettLuceRetriever) -> None:
        self.retriever = retriever
        self.optimizer = torch.optim.Adam(retriever.parameters(), lr=retriever.params.lr)
        self.initial = self.state_dict()

    def reset(self) -> None:
        """Back to the weights, optimizer and seed stream it was built with."""
        self.optimizer = torch.optim.Adam(self.retriever.parameters(), lr=self.retriever.params.lr)
        self.load_state_dict(self.initial)

    def train(self, mode: bool) -> None:
        self.retriever.train(mode)

    def update(self, batch: Any, advantages: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
        """One step on the batch's recorded retrievals; the episode advantage is the mean of its tokens' (N, T)."""
        mask = batch.completion_mask.float()  # (N, T)
        adv = (advantages * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (N,)
        records = [episode_records(f) for f in batch.fields]
        return self.step(records, adv, valid)

    def step(self, records: list[list[dict[str, Any]]], adv: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
        """-mean_i(A_i * sum_r log pi(list_r | state_r)) over valid episodes i with their records, one Adam step."""
        flat = [(i, r) for i, rs in enumerate(records) if bool(valid[i]) for r in rs]
        if not flat:
            return {"retriever/lists": 0.0}
        owner = torch.tensor([i for i, _ in flat])  # (R,)
        logp = self.retriever.logprob([r for _, r in flat])  # (R,)
        episodes = len({i for i, _ in flat})
        loss = -(adv[owner].detach() * logp).sum() / episodes
        self.optimizer.zero_grad()
        loss.backward()
        clip = self.retriever.params.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(self.retriever.parameters(), clip if clip > 0 else float("inf"))
        self.optimizer.step()
        w = self.retriever.weight.detach()
        return {
            "retriever/loss": float(loss.detach()),
            "retriever/grad_norm": float(norm),
            "retriever/lists": float(len(flat)),
            "retriever/logprob_mean": float(logp.detach().mean()),
            **{f"retriever/w_{n}": float(w[j]) for j, n in enumerate(self.retriever.names)},
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "weights": {k: v.clone() for k, v in self.retriever.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "seeds": list(self.retriever.seeds.getstate()[1]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.retriever.load_state_dict(state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        version, _, gauss = self.retriever.seeds.getstate()
        self.retriever.seeds.setstate((version, tuple(int(x) for x in state["seeds"]), gauss))


def episode_records(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The sampled lists of one packed episode (`retrievals` of each step's info)."""
    return [r for info in fields.get("agent_turn_infos", []) for r in (info or {}).get("retrievals", [])]


@RETRIEVERS.register(
    "bm25",
    paper=None,
    fidelity="ascent",
    departures=("the fixed retriever HARR starts from: top-k of the world's BM25 index (bm25s), deterministic",),
)
def bm25(params: None = None, seed: int = 0) -> BM25Retriever:
    """Fixed BM25 top-k (bm25s over title + text), the same list for the same query whatever the history."""
    return BM25Retriever()


@RETRIEVERS.register(
    "plackett_luce",
    params=PlackettLuceParams,
    paper=papers.HARR,
    fidelity="reduced",
    departures=(
        "the scorer is linear over 5 features (BM25 score; seen, linked from, in the query, links to the history) "
        "instead of a fine-tuned dense retriever over query + history text: the world is tiny and the CPU budget too",
        "the candidates are every document of the world (~14), not a first-stage pool of a large corpus",
        "trained jointly with the generator by the generator's group-relative advantages (HARR freezes the LLM); "
        "measured with a frozen scripted generator (HARR's setting) and jointly with the learned one (docs/agents.md)",
        "one on-policy step per batch, A * grad log pi, no ratio clipping or KL (with one step per batch the "
        "clipped objective has the same gradient)",
        "reward: the task's (answer exact match) where HARR uses answer F1",
        "evaluation takes the greedy top-k of the learned scores; training samples",
    ),
)
def plackett_luce(params: PlackettLuceParams = PlackettLuceParams(), seed: int = 0) -> PlackettLuceRetriever:
    """HARR's retriever as a policy: Plackett-Luce sampling of the top-k, trained by policy gradient."""
    return PlackettLuceRetriever(params, seed)
