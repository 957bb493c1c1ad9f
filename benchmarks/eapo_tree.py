"""EAPO's evidence trees and co-evolving evidence RM on the `needle` task: answer and grounded accuracy per arm.

Reads a finished `ascent compare needle-evidence ... --variants benchmarks/compare_eapo_tree.yaml` folder and prints
one JSON object: per arm and seed the held-out greedy accuracy (`answer_em`) and grounded accuracy (the answer right
and the quoted evidence exactly the needle: `grounded_answer`, the recipe's lenient grader), their means with 95%
t-intervals, and the paired difference (same seed) of every arm against the first.

    .venv/bin/python benchmarks/eapo_tree.py --compare compare/eapo-tree [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95, load, paired_summary  # noqa: E402

KEYS = {"accuracy": "accuracy_after_rl", "grounded": "accuracy_after_rl_lenient"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", required=True, help="a finished `ascent compare needle-evidence` folder")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    root = Path(args.compare)
    plan = json.loads((root / "plan.json").read_text())
    variants = [v["name"] for v in plan["variants"]]
    per_seed = []
    for seed in plan["seeds"]:
        row = {}
        for v in variants:
            summary = root / "runs" / f"{v}__seed{seed}" / "summary.json"
            if not summary.is_file():
                break
            s = json.loads(summary.read_text())
            row[v] = {k: float(s[key]) for k, key in KEYS.items()}
        if len(row) == len(variants):
            per_seed.append(row)
    result = {"machine": load(), "seeds_complete": len(per_seed), "per_seed": per_seed, "arms": {}}
    for v in variants:
        result["arms"][v] = {
            k: {"mean": round(statistics.mean(s[v][k] for s in per_seed), 4), "ci95": ci95([s[v][k] for s in per_seed])}
            for k in KEYS
        }
    for v in variants[1:]:
        result[f"{v}_vs_{variants[0]}"] = paired_summary(per_seed, tuple(KEYS), v, variants[0])
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
