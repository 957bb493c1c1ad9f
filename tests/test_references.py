"""Papers are cited by authors, year and arXiv id, never by a row number of an outside catalogue.

An earlier draft cited papers as "REBEL (#38)", the row of a list that is not part of the repository. These tests
keep such references out of the package and docs, and keep docs/references.md complete: every arXiv id written
anywhere in them has its row there.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = {".py", ".yaml", ".yml", ".md", ".c", ".h"}

# "#" + 1-3 digits as a word of its own: "(#38)", "#38:", "rows #4", "#102)", "#63/#73". Not flagged: hex colours
# ("#1f77b4": no word boundary after the digits), HTML entities ("&#38;"), URL fragments ("/#1"), "##", comments
# and headings ("# 2 rows", "## 2. Agents": a space follows the "#"), and "#" inside code that is not followed by
# a short number on its own.
CATALOGUE_REF = re.compile(r"(?<![\w&/#])#\d{1,3}\b(?![0-9a-fA-F])")
ARXIV_ID = re.compile(r"arXiv:\s?(\d{4}\.\d{4,5})")


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("ascent", "docs", "benchmarks"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    return [p for p in files if p.exists()]


def catalogue_refs(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if CATALOGUE_REF.search(line)]


def test_pattern_flags_catalogue_rows_and_nothing_else():
    flagged = [
        "REBEL (#38)",
        "IGPO's probe (#102): for each",
        "rows #4 and #5",
        "#21 in the catalogue",
        "(#63/#73; Yao et al.)",
        "(#6 TACO, #8 GUI-Libra)",
    ]
    legitimate = [
        "color='#1f77b4'",
        "x = y  # 2 rows",
        "## 2. Agents",
        "# 3 seeds",
        "&#38;",
        "page.html/#1",
        "x[#idx]",
        "issue-#12a",
        "#define N 3",
        "arXiv:2404.16767",
        "C#7",
    ]
    assert all(CATALOGUE_REF.search(s) for s in flagged), [s for s in flagged if not CATALOGUE_REF.search(s)]
    assert not any(CATALOGUE_REF.search(s) for s in legitimate), [s for s in legitimate if CATALOGUE_REF.search(s)]


def test_no_catalogue_row_references():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line}"
        for path in scanned_files()
        for n, line in catalogue_refs(path.read_text(errors="replace"))
    ]
    assert not found, (
        "cite papers by authors, year and arXiv id (see docs/references.md), not by catalogue row:\n" + "\n".join(found)
    )


def test_every_arxiv_id_is_in_the_bibliography():
    bibliography = (ROOT / "docs" / "references.md").read_text()
    listed = set(ARXIV_ID.findall(bibliography))
    assert listed, "docs/references.md lists no arXiv ids"
    missing = [
        f"{path.relative_to(ROOT)}: arXiv:{arxiv_id}"
        for path in scanned_files()
        if path.name != "references.md"
        for arxiv_id in sorted(set(ARXIV_ID.findall(path.read_text(errors="replace"))))
        if arxiv_id not in listed
    ]
    assert not missing, (
        "add these papers to ascent/papers.py (or declare them at a piece's registration, `paper=`), then run "
        "`python -m ascent.cli references --write` (docs/references.md is generated):\n" + "\n".join(missing)
    )
