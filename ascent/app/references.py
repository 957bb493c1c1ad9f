"""docs/references.md, generated from the registries: every paper a piece declares (`Registry.register(paper=...)`),
the papers of `ascent.papers` used elsewhere (a command, a config key) or named to tell methods apart, and one
table per registry with each piece's paper, fidelity and departures.

`ascent references` prints it, `ascent references --write` rewrites docs/references.md, `--check` exits 1 when
the file differs; tests/test_provenance.py fails on a difference or on a piece without provenance.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import ascent
from ascent import papers as papers_module
from ascent.registry import Entry, Paper, Registry, all_registries

REFERENCES = Path(__file__).resolve().parents[2] / "docs" / "references.md"


def registries() -> dict[str, Registry]:
    """`ascent list` kind -> registry, for every kind of piece."""
    import ascent.offline  # noqa: F401  (registers the offline algorithms in CLASSIC)
    from ascent.agents.complementary import EXTRACTORS
    from ascent.agents.jitrl import AGENT_DECODERS
    from ascent.agents.speculative_planning import SPECULATION_K
    from ascent.algorithms import ADVANTAGES, FILTERS, LOSSES
    from ascent.algorithms.preference import PREFERENCE_LOSSES
    from ascent.applications import (
        BR_ORACLES,
        CSRO_ORACLES,
        DRIVING_REWARDS,
        INVENTORY_METHODS,
        RANK_METHODS,
        ROUTER_OBJECTIVES,
    )
    from ascent.applications.constrained_irl import IRL_METHODS
    from ascent.applications.p2r import PREFERENCE_INTERFACES
    from ascent.applications.pamc import REWARD_COMPLETERS
    from ascent.classic import CLASSIC, CLASSIC_WRAPPERS
    from ascent.classic.robust_subtask import SUBTASK_LEARNERS
    from ascent.co import CO_LOSSES, CO_POLICIES
    from ascent.co.knapsack import CO_PROBLEMS
    from ascent.co.rmab import RMAB_POLICIES
    from ascent.data.samplers import SAMPLERS
    from ascent.envs.retriever import RETRIEVERS
    from ascent.generative import GENERATIVE
    from ascent.incontext import icpi, lamer, subtask_graph  # noqa: F401  (register the in-context agents)
    from ascent.incontext.agents import AGENTS
    from ascent.incontext.histories import SOURCES
    from ascent.incontext.meta import META_METHODS
    from ascent.incontext.tasks import FAMILIES
    from ascent.rewards import REWARDS
    from ascent.rewards.constraints import CONSTRAINTS
    from ascent.rollout.backends import ENGINES
    from ascent.rollout.explorers import EXPLORERS
    from ascent.rollout.speculative import DRAFTERS
    from ascent.runtime import RUNTIMES
    from ascent.tasks import TASKS
    from ascent.trainer.warmstart_data import WARMSTART_DATA

    return {
        "advantages": ADVANTAGES,
        "losses": LOSSES,
        "filters": FILTERS,
        "samplers": SAMPLERS,
        "explorers": EXPLORERS,
        "agent_decoders": AGENT_DECODERS,
        "experience_extractors": EXTRACTORS,
        "drafters": DRAFTERS,
        "speculation_k": SPECULATION_K,
        "rewards": REWARDS,
        "constraints": CONSTRAINTS,
        "tasks": TASKS,
        "backends": ENGINES,
        "runtimes": RUNTIMES,
        "preference": PREFERENCE_LOSSES,
        "warmstart-data": WARMSTART_DATA,
        "classic": CLASSIC,
        "classic_wrappers": CLASSIC_WRAPPERS,
        "incontext_families": FAMILIES,
        "incontext_sources": SOURCES,
        "incontext_agents": AGENTS,
        "meta_methods": META_METHODS,
        "co_policies": CO_POLICIES,
        "co_losses": CO_LOSSES,
        "co_problems": CO_PROBLEMS,
        "co_rmab_policies": RMAB_POLICIES,
        "router_objectives": ROUTER_OBJECTIVES,
        "inventory_methods": INVENTORY_METHODS,
        "driving_rewards": DRIVING_REWARDS,
        "retrievers": RETRIEVERS,
        "generative": GENERATIVE,
        "rank_methods": RANK_METHODS,
        "reward_completers": REWARD_COMPLETERS,
        "preference_interfaces": PREFERENCE_INTERFACES,
        "irl_methods": IRL_METHODS,
        "br_oracles": BR_ORACLES,
        "csro_oracles": CSRO_ORACLES,
        "subtask_learners": SUBTASK_LEARNERS,
    }


def import_all() -> list[str]:
    """Import every module of the package, so that every registration has run; returns the modules that could
    not be imported (an optional dependency missing), with the reason."""
    failed = []
    for info in pkgutil.walk_packages(ascent.__path__, "ascent."):
        try:
            importlib.import_module(info.name)
        except ImportError as e:
            failed.append(f"{info.name}: {e}")
    return failed


def unlisted_registries() -> list[str]:
    """Kinds of the registries made somewhere in the package but missing from `registries()` (call `import_all`
    first). Compared by kind: pytest's doctest collection may import a module of a folder without `__init__.py`
    a second time under a top-level name, which makes a second registry of the same kind."""
    listed = {r.kind for r in registries().values()}
    return [r.kind for r in all_registries() if r.kind not in listed]


def missing_provenance() -> list[str]:
    """`kind name` of every registered piece without its provenance (call `import_all` first)."""
    return [f"{kind} {e.name}" for kind, reg in registries().items() for e in reg.entries() if e.provenance is None]


def merge_papers(records: list[Paper]) -> list[Paper]:
    """One record per key, in first-seen order. Records under one key are one paper: they must agree on authors,
    year, title and reference (else ValueError); the first one's section is kept and the notes are joined."""
    found: dict[str, Paper] = {}
    for paper in records:
        known = found.setdefault(paper.key, paper)
        if (known.authors, known.year, known.title, known.ref) != (paper.authors, paper.year, paper.title, paper.ref):
            raise ValueError(f"two different papers under the key {paper.key!r}: {known} and {paper}")
        if paper.note and paper.note not in known.note:
            found[paper.key] = dataclasses.replace(known, note="; ".join(n for n in (known.note, paper.note) if n))
    return list(found.values())


def all_papers() -> list[Paper]:
    """The papers of `ascent.papers` in their order there, then those only a registration names, by key
    (`merge_papers`)."""
    declared = [v for v in vars(papers_module).values() if isinstance(v, Paper)]
    cited = [p for reg in registries().values() for e in reg.entries() if e.provenance for p in e.provenance.papers]
    return merge_papers(declared + sorted(cited, key=lambda p: p.key.lower()))


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _users(paper: Paper) -> list[str]:
    """`kind `name`` of each piece that cites the paper."""
    return [
        f"{reg.kind} `{e.name}` ({e.provenance.fidelity})"
        for reg in registries().values()
        for e in reg.entries()
        if e.provenance and paper.key in {p.key for p in e.provenance.papers}
    ]


HEADER = """# References

<!-- Generated by `ascent references --write` from the registries (`register(paper=, fidelity=, departures=)`)
and ascent/papers.py; do not edit by hand: tests/test_provenance.py fails when this file and the generator differ. -->

The papers whose methods ascent implements or measures against, one row each, with the pieces of ascent that
implement them (registered names: `ascent list KIND --params` prints each piece's paper, fidelity and
departures). Docstrings cite the full form ("REBEL (Gao et al., 2024, arXiv:2404.16767)"); tables and running
text the short form ("REBEL (Gao et al. 2024)") with a link here. `tests/test_references.py` checks that every
arXiv id written in the package, the docs, the README and the benchmarks has its row in this file.

Where no arXiv id could be found, the row says so and gives what is known (method name, title where known);
do not fill in an id without checking it against the paper's own arXiv page.

Fidelity, as each piece declares it: **faithful**, the paper's mechanism (defaults or engineering details may
differ, listed); **reduced**, part of the paper's mechanism or a reading of it where the paper leaves the form
open, every difference listed with its reason; **ascent**, ascent's own piece (the papers it builds on, if any,
named).
"""

SECTIONS = {
    "methods": (
        "Methods implemented in ascent",
        'Four papers call their method "EAPO"; ascent implements Exploration-Aware PO (`explore_group`),\n'
        "Efficiency-Aware PO's round discount (`round_discount`, from IterResearch, with its workspace\n"
        "reconstruction and adaptive downsampling as `agent.context=workspace`), and in part Experience-Augmented\n"
        "PO (explorer `replay`) and Evidence-Augmented PO (reward `evidence_rm`, its co-evolving scorer\n"
        "`evidence_lr`, explorer `evidence_tree`).",
    ),
    "related": (
        "Related papers",
        "Named to tell methods apart, or whose setting a piece borrows without implementing the paper's method.",
    ),
    "baselines": (
        "Baseline algorithms",
        "The standard estimators and losses that the tables in [algorithms.md](algorithms.md) cite by author and year.",
    ),
    "systems": ("Systems techniques", ""),
}


def _paper_table(papers: list[Paper]) -> list[str]:
    rows = ["| key | authors | year | title | arXiv / venue | in ascent |", "|---|---|---|---|---|---|"]
    for p in papers:
        where = "; ".join(_users(p) + ([p.note] if p.note else [])) or "—"
        cells = (p.key, p.authors, p.year or "—", p.title, p.ref, where)
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def _piece_row(entry: Entry) -> str:
    prov = entry.provenance
    if prov is None:
        return f"| `{entry.name}` | **missing** | — | — |"
    papers = ", ".join(f"{p.key} ({p.cite()})" for p in prov.papers) or "—"
    departures = "<br>".join(f"• {d}" for d in prov.departures) or "—"
    return f"| `{entry.name}` | {_cell(papers)} | {prov.fidelity} | {_cell(departures)} |"


def render() -> str:
    """The text of docs/references.md (call `import_all` first so every piece is registered)."""
    out = [HEADER]
    papers = all_papers()
    for section, (title, intro) in SECTIONS.items():
        rows = [p for p in papers if p.section == section]
        if rows:  # a section without papers is left out
            out += [f"## {title}", ""] + ([intro, ""] if intro else []) + _paper_table(rows) + [""]
    out += [
        "## Every registered piece: paper, fidelity, departures",
        "",
        "One table per registry (`ascent list KIND --params` prints the same); a departure says what differs from",
        "the paper and why.",
        "",
    ]
    for kind, reg in registries().items():
        out += [f"### {reg.kind} (`ascent list {kind}`)", "", "| piece | paper | fidelity | departures |"]
        out += ["|---|---|---|---|"] + [_piece_row(e) for e in reg.entries()] + [""]
    return "\n".join(out).rstrip() + "\n"


def references_command(write: bool, check: bool) -> int:
    """`ascent references [--write | --check]`."""
    failed = import_all()
    if failed:
        print("not imported (their pieces are left out):\n  " + "\n  ".join(failed))
    text = render()
    if check:
        same = REFERENCES.exists() and REFERENCES.read_text() == text
        print(f"{REFERENCES}: {'up to date' if same else 'differs; run `ascent references --write`'}")
        return 0 if same else 1
    if write:
        REFERENCES.write_text(text)
        print(f"wrote {REFERENCES}")
        return 0
    print(text, end="")
    return 0
