"""Bad input at the command line: one-line errors that say what to change, exit code 2, no traceback."""

from __future__ import annotations

import json

from ascent.cli import main

FAST = ["warmstart.steps=0", "control.enabled=false", "logging.progress=false"]


def run(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def check_one_line(code, err, *fragments):
    assert code == 2
    assert err.startswith("ascent: error:") and "\n" not in err and "Traceback" not in err
    for f in fragments:
        assert f in err, err


def test_unknown_recipe(capsys):
    check_one_line(*run(capsys, "train", "nosuchrecipe"), "no recipe 'nosuchrecipe'", "default")


def test_unknown_key_and_bad_value(capsys):
    check_one_line(*run(capsys, "train", "trian.steps=3"), "unknown key trian", "valid keys")
    check_one_line(*run(capsys, "train", "train.steps=many"), "train.steps", "integer")
    check_one_line(*run(capsys, "train", "rollout.backend=fast"), "rollout.backend", "'ascent'", "'hf'")
    check_one_line(*run(capsys, "train", "algorithm.advantage=ppo2"), "ppo2", "grpo")


def test_malformed_recipe_file(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [steps: 3\n")
    check_one_line(*run(capsys, "train", str(bad)), "not valid YAML")


def test_missing_data_file(capsys, tmp_path):
    check_one_line(
        *run(
            capsys,
            "train",
            f"data.train={tmp_path}/none.jsonl",
            f"data.eval={tmp_path}/none.jsonl",
            f"output_dir={tmp_path}",
            *FAST,
        ),
        "does not exist",
    )


def test_row_without_prompt_and_empty_dataset(capsys, tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"question": "1+1"}) + "\n")
    (tmp_path / "empty.jsonl").write_text("\n")
    check_one_line(
        *run(
            capsys,
            "train",
            f"data.train={tmp_path}/a.jsonl",
            f"data.eval={tmp_path}/a.jsonl",
            f"output_dir={tmp_path}",
            *FAST,
        ),
        "a.jsonl:1",
        "'prompt'",
    )
    check_one_line(
        *run(
            capsys,
            "train",
            f"data.train={tmp_path}/empty.jsonl",
            f"data.eval={tmp_path}/empty.jsonl",
            f"output_dir={tmp_path}",
            "name=e",
            *FAST,
        ),
        "has no rows",
    )


def test_bad_reward_spec(capsys, tmp_path):
    check_one_line(
        *run(capsys, "train", f"reward={tmp_path}/nope.py:fn", f"output_dir={tmp_path}", *FAST), "does not exist"
    )
    check_one_line(
        *run(capsys, "train", "reward=not_a_reward", f"output_dir={tmp_path}", "name=r2", *FAST),
        "unknown reward",
        "exact_answer",
    )


def test_existing_run_dir_and_bad_resume(capsys, tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "state.json").write_text("{}")
    check_one_line(
        *run(capsys, "train", f"output_dir={tmp_path}", *FAST), "already holds a run", "--resume", "--overwrite"
    )
    check_one_line(*run(capsys, "train", "--resume", str(tmp_path / "nothing")), "not a run directory")


def test_list_prints_every_registry(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in (
        "grpo",
        "dr_grpo",
        "rloo",
        "ppo_clip",
        "pg",
        "exact_answer",
        "math_verify",
        "default",
        "addition",
        "hf",
    ):
        assert f"  {name} " in out
    assert "filters:" in out and "  dapo " in out and "  none " in out
    assert "max_refill_rounds" not in out  # parameters only with --params


def params_of(out: str, piece: str, provenance: bool = False) -> dict[str, str]:
    """The parameter lines printed under `piece` by `ascent list KIND --params`: name -> line (with `provenance`:
    its provenance lines instead, `paper:` / `fidelity:` / `departs:` -> the rest of the line, joined)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {piece} "))
    found: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.startswith("      "):
            break
        word, _, rest = line.strip().partition(" ")
        if not word.endswith(":") and not provenance:  # provenance lines start with "paper:", "fidelity:", ...
            found[word] = line
        elif word.endswith(":") and provenance:
            found[word] = f"{found[word]}\n{rest}" if word in found else rest
    return found


def test_list_params_prints_type_default_and_help(capsys):
    assert main(["list", "advantages", "--params"]) == 0
    taco = params_of(capsys.readouterr().out, "taco")
    assert set(taco) == {"alpha", "floor", "window"}
    assert taco["alpha"].split()[1:4] == ["float", "=", "0.01"] and "Tail-risk" in taco["alpha"]
    assert taco["window"].split()[1:4] == ["int", "=", "16"]
    assert main(["list", "filters", "--params"]) == 0
    out = capsys.readouterr().out
    assert params_of(out, "dapo")["max_refill_rounds"].split()[1:4] == ["int", "=", "3"]
    assert params_of(out, "none") == {}  # a piece without parameters prints none
    for kind in ("losses", "rewards", "tasks"):
        assert main(["list", kind, "--params"]) == 0


def test_list_params_prints_provenance(capsys):
    assert main(["list", "advantages", "--params"]) == 0
    out = capsys.readouterr().out
    grpo = params_of(out, "grpo", provenance=True)
    assert grpo == {"paper:": "GRPO (Shao et al. 2024, arXiv:2402.03300)", "fidelity:": "faithful"}
    dr_grpo = params_of(out, "dr_grpo", provenance=True)
    assert dr_grpo["fidelity:"] == "faithful" and "loss_agg=seq-mean-token-sum-norm" in dr_grpo["departs:"]
