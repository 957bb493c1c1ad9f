"""The shipped in-context RL recipes (YAML with an `incontext:` section), found without importing torch."""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPE_DIR = Path(__file__).resolve().parent


def recipe_path(recipe: str) -> Path:
    """A shipped recipe name (`ad-darkroom`) or a YAML path."""
    return Path(recipe) if Path(recipe).suffix else RECIPE_DIR / f"{recipe}.yaml"


def is_incontext_recipe(recipe: str) -> bool:
    """Whether `recipe` names a shipped in-context recipe or a YAML file with an `incontext:` section."""
    path = recipe_path(recipe)
    try:
        raw = yaml.safe_load(path.read_text()) if path.is_file() else None
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return False  # the language-model loader reports what is wrong with the file
    return isinstance(raw, dict) and "incontext" in raw
