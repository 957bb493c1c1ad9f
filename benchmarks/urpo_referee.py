"""URPO's referee after RL (docs/results.md §4h): for each run of an `ascent compare` over
`benchmarks/compare_urpo.yaml`, how well the final policy judges sums it was not trained on, and the paired
difference of held-out accuracy between the arms.

For every held-out problem a+b of the run's own split, two judging prompts `a+b=c?`: c the right sum, and c wrong
(the ones carry dropped where there is one, else off by 1 or 10: the task's `judging_row` candidates). The referee's
opinion is p = π(1) / (π(1) + π(0)) of the verdict token after the prompt (what `self_judge(format=verdict)` samples
from). Reported per run: the referee's accuracy (p > 0.5 on right sums, p < 0.5 on wrong ones), its AUROC (right vs
wrong, by p), and the same for the shared warm start.

    python benchmarks/urpo_referee.py compare/urpo --warmstart runs/urpo-ws2/warmstart
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ci95, load  # noqa: E402

from ascent.config.loader import load_config  # noqa: E402
from ascent.tasks import load_task  # noqa: E402
from ascent.tasks.addition import addition_teacher, judging_row  # noqa: E402


def auroc(pos: list[float], neg: list[float]) -> float:
    """P(a right sum's p > a wrong sum's p), ties counted half.

    >>> auroc([0.9, 0.4], [0.5, 0.1])
    0.75
    """
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@torch.no_grad()
def referee(model_dir: Path, rows: list[dict]) -> dict[str, float]:
    """Accuracy and AUROC of the verdicts of the model in `model_dir` on a right and a wrong sum per row."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    one, zero = tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("0")
    rng, wrong = random.Random(0), addition_teacher(1.0)
    right_p, wrong_p = [], []
    for row in rows:
        a, b = int(row["a"]), int(row["b"])
        bad = judging_row(a, b, random.Random(rng.random()), wrong)
        while bad["answer"] == "1":  # a wrong candidate for every row
            bad = judging_row(a, b, random.Random(rng.random()), wrong)
        for c, out in ((a + b, right_p), (bad["candidate"], wrong_p)):
            probs = torch.softmax(model(input_ids=torch.tensor([tok(f"{a}+{b}={c}?")["input_ids"]])).logits[0, -1], -1)
            out.append(float(probs[one] / (probs[one] + probs[zero])))
    correct = sum(p > 0.5 for p in right_p) + sum(p < 0.5 for p in wrong_p)
    return {"referee_acc": correct / (2 * len(rows)), "referee_auroc": auroc(right_p, wrong_p)}


def held_out(run: Path) -> list[dict]:
    cfg = load_config(str(run / "config.yaml"))
    return load_task(cfg.data, seed=cfg.seed).eval


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_dir", type=Path)
    ap.add_argument("--warmstart", type=Path, help="the shared warm start (its referee, on seed 0's split)")
    ap.add_argument("--rows", type=int, default=200, help="held-out problems judged per run")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load {load()}")
    out: dict[str, dict] = {}
    runs = sorted(p for p in (args.compare_dir / "runs").iterdir() if (p / "summary.json").exists())
    if args.warmstart:
        out["warmstart"] = referee(args.warmstart, held_out(runs[0])[: args.rows])
        print("warmstart", out["warmstart"])
    for run in runs:
        summary = json.loads((run / "summary.json").read_text())
        final = sorted((run / "checkpoints").glob("step_*"))[-1]
        out[run.name] = {**referee(final, held_out(run)[: args.rows]), "accuracy": summary["accuracy_after_rl"]}
        print(run.name, out[run.name])
    arms = sorted({name.split("__")[0] for name in out if "__" in name})
    for key in ("accuracy", "referee_acc", "referee_auroc"):
        for arm in arms:
            xs = [v[key] for k, v in sorted(out.items()) if k.startswith(arm + "__")]
            print(f"{key:14s} {arm:11s} mean {statistics.mean(xs):.3f} per seed {[round(x, 3) for x in xs]}")
        if len(arms) == 2:
            a, b = ([v[key] for k, v in sorted(out.items()) if k.startswith(arm + "__")] for arm in arms)
            if len(a) == len(b):
                d = [y - x for x, y in zip(a, b)]
                print(f"{key:14s} {arms[1]} - {arms[0]}: {statistics.mean(d):+.3f}, 95% t-interval {ci95(d, 3)}")
    (args.compare_dir / "referee.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
