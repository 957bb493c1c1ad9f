"""The README's first screen and its commands: the two commands come first, then the five things a user does next,
and every `ascent train` / `ascent config` command it writes parses and builds a valid config as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ascent.cli import parser
from ascent.config import load_config

README = Path(__file__).resolve().parent.parent / "README.md"


def commands() -> list[str]:
    """Every `ascent ...` command in the README: lines of its code blocks and its inline code spans."""
    text = README.read_text()
    found, block, prose = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if block is not None:
                joined = "\n".join(block).replace("\\\n", " ")
                found += [x.split("  #")[0].strip() for x in joined.splitlines() if x.startswith("ascent ")]
            block = [] if block is None else None
        elif block is not None:
            block.append(line)
        else:
            prose.append(line)
    prose = "\n".join(prose)
    found += [m for m in re.findall(r"`(ascent [^`]+)`", prose.replace("\n", " "))]
    return found


def test_the_first_screen_shows_the_two_commands_and_the_five_next_steps():
    lines = README.read_text().splitlines()
    first = "\n".join(lines[:60])
    assert "make demo" in "\n".join(lines[:20]) and "make test" in "\n".join(lines[:20])
    for step in ("Run a recipe", "Bring your data", "Bring your model", "Watch a run", "Export"):
        assert f"**{step}" in first, step
    assert "model.source=hf" in first and "model.path=" in first
    # bare `ascent` works only in an activated venv: the README says so before its first bare command
    assert first.index("source .venv/bin/activate") < first.index("`ascent ")


def test_every_train_and_config_command_in_the_readme_builds_a_valid_config():
    checked = 0
    for command in commands():
        if "[" in command or "..." in command or "|" in command:  # a usage line, not a command
            continue
        argv = shlex.split(command.split(" > ")[0])[1:]
        if "--help" in argv or argv[0] not in ("train", "config"):  # others hold placeholders (--steps N)
            continue
        args = parser().parse_args(argv)  # every subcommand and option exists
        if args.command not in ("train", "config") or getattr(args, "resume", None):
            continue
        recipes = [a for a in args.items if "=" not in a]
        if recipes and not (recipes[0].endswith(".yaml") and not Path(recipes[0]).exists()):
            load_config(recipes[0], [a for a in args.items if "=" in a])
        elif not recipes:
            load_config("default", [a for a in args.items if "=" in a])
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("name", ["index.md", "results.md", "reliability.md"])
def test_docs_pages_the_readme_points_to_exist(name):
    assert f"docs/{name}" in README.read_text()
    assert (README.parent / "docs" / name).exists()
