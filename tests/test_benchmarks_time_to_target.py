"""benchmarks/time_to_target.py: crossings and ratios on hand-made run folders."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import time_to_target  # noqa: E402


def _run(root: Path, name: str, accs: dict[int, float], step_s: float, steps: int, final: float) -> None:
    run = root / "runs" / name
    run.mkdir(parents=True)
    rows = [
        {"phase": "rl", "step": s, "time/step": step_s, **({"eval/accuracy": accs[s]} if s in accs else {})}
        for s in range(1, steps + 1)
    ]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (run / "summary.json").write_text(json.dumps({"steps": steps, "accuracy_after_rl": final}))


def test_time_to_the_base_arms_final_accuracy(tmp_path, capsys):
    # base: 0.1 s a step, ends at 0.5 after 10 steps (1.0 s); arm: 0.2 s a step, first >= 0.5 at step 4 (0.8 s)
    _run(tmp_path, "grpo__seed0", {5: 0.3}, 0.1, 10, 0.5)
    _run(tmp_path, "grpo_2mb__seed0", {2: 0.4, 4: 0.55}, 0.2, 10, 0.7)
    # seed 1: the arm never reaches the base's final accuracy -> nan, left out of the mean
    _run(tmp_path, "grpo__seed1", {}, 0.1, 10, 0.9)
    _run(tmp_path, "grpo_2mb__seed1", {5: 0.5}, 0.2, 10, 0.6)
    out = time_to_target.main([str(tmp_path), "--seeds", "2"])
    assert out["per_seed"][0] == pytest.approx(0.8)
    assert out["time_to_base_final_ratio"] == pytest.approx(0.8)
    assert "step 4 (0.80 s)" in capsys.readouterr().out
