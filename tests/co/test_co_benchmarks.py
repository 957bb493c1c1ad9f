"""The co benchmark scripts run end to end on a tiny budget and print the fields docs/combinatorial.md reads (the
RL4CO side only where rl4co is installed: it is a benchmark-only dependency, `pip install 'ascent[rl4co]'`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> list[dict]:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


TINY = ["--steps", "2", "--batch-size", "4", "--eval-size", "8", "--val-size", "4"]


def test_co_vs_rl4co_prints_gaps_for_each_seed():
    rows = run("benchmarks/co_vs_rl4co.py", "--problem", "cvrp", "--seeds", "2", "--sides", "ascent", *TINY)
    final = rows[-1]
    assert [r["seed"] for r in rows[:-1]] == [0, 1]
    assert final["eval_size"] == 8 and final["ref_solver"].startswith("pyvrp")
    assert final["gap_ascent"] <= final["gap_ascent_multistart"] and final["gap_ascent"] > 0


@pytest.mark.skipif(
    importlib.util.find_spec("rl4co") is None, reason="rl4co not installed (pip install 'ascent[rl4co]')"
)
def test_co_vs_rl4co_runs_rl4co_on_the_same_test_instances():
    final = run("benchmarks/co_vs_rl4co.py", "--problem", "tsp", "--seeds", "1", *TINY)[-1]
    assert (
        final["wall_ratio"] > 0 and abs(final["params_rl4co"] - final["params_ascent"]) < 0.02 * final["params_ascent"]
    )
    assert 0 < final["gap_rl4co"] <= final["gap_rl4co_multistart"]


@pytest.mark.parametrize("problem", ["tsp"])
def test_co_poppy_prints_the_paired_difference(problem):
    rows = run(
        "benchmarks/co_poppy.py",
        "--problem",
        problem,
        "--seeds",
        "1",
        "--pretrain",
        "2",
        "--steps",
        "1",
        "--agents",
        "2",
        "--batch-size",
        "4",
        "--eval-size",
        "8",
    )
    arms = {r["arm"] for r in rows if "arm" in r}
    assert arms == {"poppy", "pomo"}
    summary = rows[-1]
    assert summary["diff_gap_aug8"] == pytest.approx(summary["poppy_gap_aug8"] - summary["pomo_gap_aug8"], abs=1e-3)


def test_co_compass_prints_equal_budgets_and_the_paired_difference(tmp_path):
    rows = run(
        "benchmarks/co_compass.py", "--seeds", "2", "--pretrain", "2", "--steps", "1", "--latents", "2",
        "--latent-dim", "4", "--batch-size", "2", "--budget", "80", "--popsize", "4", "--components", "2",
        "--eval-size", "4",
    )  # fmt: skip
    assert [r["seed"] for r in rows[:-1]] == [0, 1]
    assert all(r["compass_budget_used"] == r["pomo_budget_used"] == 80 for r in rows[:-1])
    final = rows[-1]
    diffs = [r["compass_gap"] - r["pomo_gap"] for r in rows[:-1]]
    assert final["diff_compass_minus_pomo_gap"] == pytest.approx(sum(diffs) / 2, abs=1e-3)
    lo, hi = final["diff_compass_minus_pomo_gap_ci95"]
    assert lo <= final["diff_compass_minus_pomo_gap"] <= hi
    # --aggregate re-summarises saved seed lines (several runs' outputs) without training
    log = tmp_path / "run.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows))
    again = run("benchmarks/co_compass.py", "--aggregate", str(log), "--plot", str(tmp_path / "c.png"))[-1]
    assert again["seeds"] == [0, 1] and again["diff_compass_minus_pomo_gap_ci95"] == pytest.approx([lo, hi], abs=0.01)
    assert len(again["compass_curve_mean"]) == len(rows[0]["compass_curve"]) and (tmp_path / "c.png").stat().st_size > 0


def test_co_po_prints_curves_for_both_losses(tmp_path):
    png = tmp_path / "curves.png"
    rows = run(
        "benchmarks/co_po.py", "--seeds", "2", "--steps", "4", "--eval-every", "2", "--batch-size", "4",
        "--eval-size", "4", "--plot", str(png),
    )  # fmt: skip
    assert [[p[0] for p in r["pomo"]] for r in rows[:-1]] == [[0, 2, 4]] * 2
    assert all(r["pomo"][0][2] == r["preference"][0][2] for r in rows[:-1])  # same initial weights
    assert set(rows[-1]["gap_by_step"]) == {"2", "4"} and png.stat().st_size > 0
    with pytest.raises(AssertionError, match="budget"):
        run("benchmarks/co_compass.py", "--budget", "0")


def test_co_sequoia_prints_paired_returns_for_each_seed():
    tiny = ["--arms", "3", "--workers", "1", "--horizon", "3", "--episodes", "1", "--eval-episodes", "2"]
    rows = run("benchmarks/co_sequoia.py", "--seeds", "2", *tiny, "--pretrain-samples", "40", "--pretrain-epochs", "1")
    seeds, summary = rows[1:-1], rows[-1]["summary"]
    assert [r["seed"] for r in seeds] == [0, 1] and all(r["milp_solves_target"] > 0 for r in seeds)
    assert summary["seeds"] == 2 and len(summary["diff_ci95"]) == 2
    assert summary["diff_mean"] == pytest.approx(sum(r["sequoia"] - r["myopic"] for r in seeds) / 2, abs=1e-3)
