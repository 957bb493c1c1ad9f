"""How well a generative judge (`reward=judge(...)`) agrees with a task's verifier: candidate answers half right,
half wrong, judged with k sampled judgements each; AUROC of the judge's score against the verifier's label for
one judgement (k = 1, averaged over the k single-judgement replicates) and for the vote over k, the share of
judgements that failed to parse, and judge seconds per sample.

    python benchmarks/judge_agreement.py --rows 100 --k 4 --threads 1
    python benchmarks/judge_agreement.py --rows 100 --k 4 --threads 1 --force-score

Candidates come from the `smollm2-arith` recipe's held-out word problems: even rows get the right answer
("The answer is N."), odd rows a wrong one (N + d, d in ±1..5, seeded); the recipe's verifier (`answer_is`) labels
them. A sample without a valid judgement scores 0.5 in the AUROC (a judge with no opinion ranks at chance);
`coverage` is the share of samples with one. Prints a markdown table row and the machine; --out writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch

from ascent.config.loader import load_config
from ascent.rewards.judge import vote
from ascent.rewards.runner import RewardRunner
from ascent.tasks import load_task


def auroc(scores: list[float], labels: list[int]) -> float:
    """P(score of a random positive > score of a random negative), ties counting half.

    >>> auroc([0.9, 0.2, 0.5, 0.5], [1, 0, 1, 0])
    0.875
    """
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(len(pos) * len(neg), 1)


def candidates(rows: int, seed: int) -> tuple[list[str], list[str], list[dict]]:
    """(prompts, completions, fields) of the first `rows` held-out problems, right answers on even rows."""
    cfg = load_config("smollm2-arith")
    task = load_task(cfg.data, cfg.data.split_seed)
    rng = random.Random(seed)
    prompts, completions, fields = [], [], []
    for i, row in enumerate(task.eval[:rows]):
        answer = int(row["answer"])
        shown = answer if i % 2 == 0 else answer + rng.choice([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5])
        prompts.append(row["prompt"])
        completions.append(f"The answer is {shown}.")
        fields.append({"answer": row["answer"]})
    return prompts, completions, fields


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--micro-batch-size", type=int, default=16)
    ap.add_argument("--force-score", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    prompts, completions, fields = candidates(args.rows, args.seed)
    labels = [int(v) for v in RewardRunner(["answer_is"]).score(prompts, completions, fields).rewards.tolist()]
    spec = (
        f"judge(model={args.model!r}, k={args.k}, max_new_tokens={args.max_new_tokens}, "
        f"temperature={args.temperature}, micro_batch_size={args.micro_batch_size}, "
        f"force_score={args.force_score}, seed={args.seed})"
    )
    runner = RewardRunner([spec], timeout_s=24 * 3600.0)
    load_before = open("/proc/loadavg").read().split()[:3]
    start = time.perf_counter()
    result = runner.score(prompts, completions, fields)
    seconds = time.perf_counter() - start
    votes = runner.fns[0].last_votes  # (rows) k judgements each
    k4 = [0.5 if (v := vote(j)) is None else v for j in votes]
    k1 = [auroc([0.5 if (v := vote([j[r]])) is None else v for j in votes], labels) for r in range(args.k)]
    judged = [j for js in votes for j in js]
    report = {
        "spec": spec,
        "rows": args.rows,
        "right": sum(labels),
        "auroc_k1": round(statistics.mean(k1), 3),
        "auroc_k1_replicates": [round(x, 3) for x in k1],
        f"auroc_k{args.k}": round(auroc(k4, labels), 3),
        "coverage_k1": round(sum(j.score is not None for j in judged) / len(judged), 3),
        f"coverage_k{args.k}": round(sum(vote(j) is not None for j in votes) / len(votes), 3),
        "failed_frac": round(result.stats["judge/failed_frac"], 3),
        "failures": {
            r: round(result.stats[f"judge/fail_{r}_frac"], 3)
            for r in ("no_score", "out_of_range", "wrong_scale", "truncated", "too_long")
        },
        "seconds_per_sample": round(seconds / args.rows, 2),
        "threads": args.threads,
        "load_before": load_before,
        "load_after": open("/proc/loadavg").read().split()[:3],
        "cpu": next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?"),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
