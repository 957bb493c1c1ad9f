"""benchmarks/retriever_harr.py end to end on a tiny budget: the fields it prints, the paired differences it
summarises, and that the retriever learns the history features that beat the fixed BM25 top-k."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def test_retriever_benchmark_learns_and_summarises():
    args = ["--seeds", "2", "--steps", "8", "--prompts", "4", "--samples", "6", "--train", "30", "--eval", "30"]
    out = subprocess.run(
        [sys.executable, "benchmarks/retriever_harr.py", *args, "--lr", "0.3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    seeds, summary = lines[1:-1], lines[-1]["summary"]
    assert [s["seed"] for s in seeds] == [0, 1]
    for s in seeds:
        assert all(0.0 <= s[arm] <= 1.0 for arm in ("bm25", "pl_init", "pl", "pl_query"))
        assert s["pl_weights"]["linked"] > 0, "the retriever learns to follow the documents the history names"
        assert s["pl"] > s["bm25"]
    d = [s["pl"] - s["bm25"] for s in seeds]
    assert summary["pl - bm25"]["mean"] == pytest.approx(statistics.mean(d), abs=1e-4)
    lo, hi = summary["pl - bm25"]["ci95"]
    assert lo <= summary["pl - bm25"]["mean"] <= hi
