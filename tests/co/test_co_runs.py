"""A `co:` recipe through the run directory: `ascent train`, summary.json, and an exact resume."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from ascent.app.co import evaluate_checkpoint, train_run
from ascent.config import ConfigError, load_config

TINY = "co.policy=attention_model(embed_dim=16, layers=1, heads=2, ff_hidden=32)"
FAST = [TINY, "co.steps=4", "co.batch_size=4", "co.eval_size=16", "co.log_every=1", "co.eval_modes=[greedy]"]


def test_a_co_recipe_trains_into_a_run_directory_and_resumes_exactly(tmp_path, one_thread):
    cfg = load_config("tsp20-pomo", FAST + [f"output_dir={tmp_path}"])
    summary = train_run(cfg)
    run = tmp_path / "tsp20-pomo"
    saved = json.loads((run / "summary.json").read_text())
    assert saved["steps"] == 4 and saved["instances"] == 16 and 0 < saved["gap_greedy"] < 200
    assert saved["ref_solver"].startswith("elkai") and summary["gap_greedy"] == saved["gap_greedy"]
    assert len((run / "metrics.jsonl").read_text().splitlines()) >= 4
    straight = load_file(str(run / "checkpoints" / "step_000004" / "model.safetensors"))

    cfg2 = load_config("tsp20-pomo", FAST + [f"output_dir={tmp_path}", "name=halves"])
    assert train_run(cfg2, stop_at=2) is None
    train_run(run_dir=tmp_path / "halves", resume=True)
    resumed = load_file(str(tmp_path / "halves" / "checkpoints" / "step_000004" / "model.safetensors"))
    assert straight.keys() == resumed.keys()
    assert all((straight[k] == resumed[k]).all() for k in straight)

    evaluated = evaluate_checkpoint(run, run / "checkpoints" / "step_000004")
    assert evaluated["steps"] == 4 and evaluated["gap_greedy"] == pytest.approx(saved["gap_greedy"], abs=1e-3)


def test_bad_co_values_are_config_errors():
    with pytest.raises(ConfigError, match="co.starts must be in"):
        load_config("tsp20-pomo", ["co.starts=50"])
    with pytest.raises(ConfigError, match="valid names: attention_model"):
        load_config("tsp20-pomo", ["co.policy=pointer_net"])
    with pytest.raises(ConfigError, match="co.problem"):
        load_config("tsp20-pomo", ["co.problem=jssp"])


def test_the_cli_says_how_to_build_a_missing_test_set(tmp_path, capsys):
    from ascent.cli import main

    rc = main(["train", "tsp20-pomo", "co.n=13", f"output_dir={tmp_path}", f"co.test_cache={tmp_path / 'sets'}"])
    assert rc == 2
    assert "no test set for tsp13" in capsys.readouterr().err
