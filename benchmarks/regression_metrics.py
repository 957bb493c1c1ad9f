"""Regression metrics of an `ascent compare` on the `sum_regression` task (docs/results.md section 3c, the CCC row):
`compare` reports greedy accuracy (exact predictions); this reads every run's final checkpoint, predicts the
held-out rows greedily, and reports per variant the mean absolute error (all rows, head rows, tail rows), Lin's
CCC of the predictions against the targets, and the share of parsable answers, with the paired difference to the
first variant and its 95% percentile bootstrap interval (`ascent.app.stats`, 10,000 resamples, paired by seed).

    python benchmarks/regression_metrics.py /work/runs_shared/fidrest/fid3-ccc     # writes regression.json there

Unparsable answers are left out of MAE and CCC (their share is reported). One torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ascent.app.model_eval import build_evaluator  # noqa: E402
from ascent.app.stats import bootstrap_difference, bootstrap_interval  # noqa: E402
from ascent.config.loader import load_config  # noqa: E402
from ascent.rewards.shaping import concordance, last_number_value  # noqa: E402
from ascent.trainer.checkpoint import load_weights  # noqa: E402

KEYS = ("mae", "mae_head", "mae_tail", "ccc", "parsable")


def metrics(rows: list[dict], completions: list[str]) -> dict[str, float]:
    """MAE (all / head / tail rows), CCC and parsable share of greedy `completions` against the rows' answers.

    >>> rows = [{"answer": "1.0", "part": "head"}, {"answer": "9.0", "part": "tail"}]
    >>> metrics(rows, ["1.5", "8.0"])  # CCC = 2 (13) / (10.5625 + 16 + 0.0625)
    {'mae': 0.75, 'mae_head': 0.5, 'mae_tail': 1.0, 'ccc': 0.9765, 'parsable': 1.0}
    """
    preds = [last_number_value(c) for c in completions]
    ok = [i for i, p in enumerate(preds) if p is not None]
    err = {i: abs(preds[i] - float(rows[i]["answer"])) for i in ok}

    def mae(part: str | None) -> float:
        e = [err[i] for i in ok if part is None or rows[i]["part"] == part]
        return round(float(np.mean(e)), 4) if e else float("nan")

    x, y = [preds[i] for i in ok], [float(rows[i]["answer"]) for i in ok]
    return {
        "mae": mae(None),
        "mae_head": mae("head"),
        "mae_tail": mae("tail"),
        "ccc": round(concordance(x, y), 4),
        "parsable": round(len(ok) / len(rows), 4),
    }


def run_metrics(run_dir: Path) -> dict[str, float]:
    """The metrics of one run's latest checkpoint on its held-out rows (greedy)."""
    cfg = load_config(run_dir / "config.yaml", ["threads=1"])
    evaluator, policy = build_evaluator(cfg)
    folder = run_dir / "checkpoints"
    load_weights(policy.model, folder / (folder / "latest").read_text().strip())  # `latest` names the step folder
    policy.model.eval()
    with torch.no_grad():
        batch, _ = evaluator.sample(policy, evaluator.rows, 1, 0.0, None)
    return metrics(evaluator.rows, list(batch.completions))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("compare_dir", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(1)
    plan = json.loads((args.compare_dir / "plan.json").read_text())
    names, seeds = [v["name"] for v in plan["variants"]], plan["seeds"]
    per: dict[str, dict[int, dict[str, float]]] = {}
    for name in names:
        per[name] = {}
        for s in seeds:
            per[name][s] = run_metrics(args.compare_dir / "runs" / f"{name}__seed{s}")
            print(name, s, per[name][s], flush=True)
    out: dict[str, dict] = {"per_seed": {n: {str(s): m for s, m in d.items()} for n, d in per.items()}}
    base = names[0]
    for name in names:
        out[name] = {}
        for key in KEYS:
            vals = [per[name][s][key] for s in seeds]
            entry = {"mean": round(float(np.mean(vals)), 4), "ci": asdict(bootstrap_interval(vals))}
            if name != base:
                entry["vs_first"] = asdict(bootstrap_difference([per[base][s][key] for s in seeds], vals, True))
            out[name][key] = entry
    (args.compare_dir / "regression.json").write_text(json.dumps(out, indent=2))
    for name in names:
        print(name, {k: out[name][k]["mean"] for k in KEYS})
        if name != base:
            print("  vs", base, {k: out[name][k]["vs_first"] for k in KEYS})


if __name__ == "__main__":
    main()
