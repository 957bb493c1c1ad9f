"""Provenance lives in the registry: every registered piece declares its paper, its fidelity and its departures
(`Registry.register(paper=, fidelity=, departures=)`), malformed declarations fail at registration, and
docs/references.md is generated from them (`ascent references --write`)."""

from __future__ import annotations

import pytest

from ascent.app.references import (
    REFERENCES,
    import_all,
    merge_papers,
    missing_provenance,
    registries,
    render,
    unlisted_registries,
)
from ascent.registry import Paper, Provenance, Registry

PAPER = Paper("X", "A et al.", 2025, "A title", "arXiv:2501.00001")


def test_every_registry_is_listed_and_every_module_imports():
    assert import_all() == []
    assert unlisted_registries() == [], "add the registry to ascent.app.references.registries()"


def test_every_piece_declares_its_provenance():
    import_all()
    missing = missing_provenance()
    assert not missing, (
        f"pieces without provenance: {', '.join(missing)}. Declare it at registration: "
        '`register("name", ..., paper=papers.X or Paper(key, authors, year, title, "arXiv:..."), '
        'fidelity="faithful" | "reduced" | "ascent", departures=("what differs from the paper, and why", ...))` '
        '(ascent/registry.py: Provenance; ascent\'s own piece: paper=None, fidelity="ascent"); then '
        "`ascent references --write`"
    )


def test_a_declared_provenance_travels_to_the_resolved_piece():
    r = Registry("test piece")
    r.register("a", paper=PAPER, fidelity="reduced", departures=("no critic: a group baseline",))(lambda: 1)
    r.register("b", paper=None, fidelity="ascent")(lambda: 2)
    r.register("c")(lambda: 3)
    assert r.resolve("a").provenance == Provenance((PAPER,), "reduced", ("no critic: a group baseline",))
    assert r.entry("b").provenance == Provenance((), "ascent")
    assert r.entry("c").provenance is None  # not declared: the strict test above fails on such a piece
    r.register("d", paper=(PAPER, PAPER), fidelity="faithful")(lambda: 4)
    assert r.entry("d").provenance.papers == (PAPER, PAPER)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"paper": PAPER, "fidelity": "faithfull"}, "is not one of faithful, reduced, ascent"),
        ({"paper": None, "fidelity": "faithful"}, "needs the paper"),
        ({"paper": PAPER, "fidelity": "reduced"}, "needs its departures"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": "one string"}, "tuple of lines"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": ("two\nlines",)}, "one non-empty line"),
        ({"paper": PAPER, "fidelity": "reduced", "departures": ("",)}, "one non-empty line"),
        ({"paper": PAPER}, "without fidelity"),
        ({"departures": ("x",)}, "without fidelity"),
        ({"fidelity": "faithful"}, "without paper"),
        ({"paper": "Shao et al. 2024", "fidelity": "faithful"}, "must be a Paper"),
    ],
)
def test_a_malformed_provenance_fails_at_registration(kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        Registry("test piece").register("p", **kwargs)
    assert str(err.value).startswith("test piece 'p': ")


@pytest.mark.parametrize(
    "fields, message",
    [
        (("X", "", 2025, "T", "arXiv:1"), "authors is empty"),
        (("X", "A", 2025, "T", " "), "ref is empty"),
    ],
)
def test_a_malformed_paper_fails(fields, message):
    with pytest.raises(ValueError, match=message):
        Paper(*fields)
    with pytest.raises(ValueError, match="section"):
        Paper("X", "A", 2025, "T", "arXiv:1", section="misc")


def test_registries_cover_every_list_kind():
    from ascent.cli import LIST_KINDS

    assert set(registries()) == set(LIST_KINDS) - {"recipes"}


def test_references_md_is_generated_from_the_registries():
    import_all()
    assert REFERENCES.read_text() == render(), (
        "docs/references.md differs from the registries' provenance and ascent/papers.py: run "
        "`python -m ascent.cli references --write` (never edit the file by hand)"
    )


def test_the_generated_file_lists_every_piece_with_its_provenance():
    import_all()
    sections = render().split("\n### ")
    for kind, reg in registries().items():
        (section,) = [s for s in sections if f"(`ascent list {kind}`)" in s.splitlines()[0]]
        rows = {
            line.split(" | ")[0][3:-1]: line.split(" | ") for line in section.splitlines() if line.startswith("| `")
        }
        assert set(rows) == set(reg.names())
        for e in reg.entries():
            _, papers, fidelity, departures = rows[e.name]
            assert fidelity == e.provenance.fidelity
            assert all(p.key in papers for p in e.provenance.papers) and (papers == "—") == (not e.provenance.papers)
            assert departures.count("• ") == len(e.provenance.departures)
    text = render()
    for row in (
        "| LOOP | Chen, Cusumano-Towner",
        "| Multi-turn agentic RL recipe (meow-tea-taro) | Wang & Ammanabrolu",
    ):
        assert row in text


def test_records_of_one_paper_merge_and_different_papers_under_one_key_fail():
    noted = Paper("X", "A et al.", 2025, "A title", "arXiv:2501.00001", note="used by `ascent collect`")
    other = Paper("Y", "B et al.", 2024, "B title", "arXiv:2401.00001", section="baselines")
    merged = merge_papers([PAPER, other, noted, Paper("X", "A et al.", 2025, "A title", "arXiv:2501.00001", note="n2")])
    assert [p.key for p in merged] == ["X", "Y"] and merged[0].note == "used by `ascent collect`; n2"
    with pytest.raises(ValueError, match="two different papers under the key 'X'"):
        merge_papers([PAPER, Paper("X", "Someone else", 2025, "A title", "arXiv:2501.00001")])
