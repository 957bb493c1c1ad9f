"""`ascent config`: a recipe's resolved config with the help of every key, itself a valid recipe."""

from __future__ import annotations

import subprocess
import sys

import yaml

from ascent.cli import main
from ascent.config import load_config, to_dict
from ascent.config.loader import config_from_dict


def test_config_prints_every_key_with_its_help_as_a_recipe_that_loads_back(capsys, tmp_path):
    assert main(["config", "default", "train.steps=7", "rollout.temperature=0.5"]) == 0
    text = capsys.readouterr().out
    cfg = load_config("default", ["train.steps=7", "rollout.temperature=0.5"])
    assert to_dict(config_from_dict(yaml.safe_load(text))) == to_dict(cfg)  # the output is the config itself
    lines = text.splitlines()
    at = lines.index("  steps: 7")
    assert lines[at - 1].startswith("  # RL steps")  # each key under its help (from the schema's docstrings)
    keys = [x for x in lines if x.strip() and not x.lstrip().startswith("#") and not x.endswith(":")]
    helped = [i for i, x in enumerate(lines) if x in keys and lines[i - 1].lstrip().startswith("#")]
    assert len(helped) == len(keys)  # every key has its help
    (tmp_path / "mine.yaml").write_text(text)
    assert load_config(str(tmp_path / "mine.yaml"), []) == cfg


def test_train_help_has_examples(capsys):
    try:
        main(["train", "--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    assert "examples:" in out and "model.source=hf model.path=" in out and "ascent config" in out


def test_a_typo_in_a_recipe_name_answers_before_the_training_stack_is_imported():
    code = (
        "import sys\nfrom ascent.cli import main\ncode = main(['train', 'defualt'])\n"
        "print(code, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False", "False"]
    assert "no recipe 'defualt' (did you mean 'default'?)" in done.stderr
