"""SPCT's meta-RM-guided vote against the plain vote (DeepSeek-GRM, Liu et al. 2025, arXiv:2504.02495): one pool of
k judgements per candidate from the SmolLM2-135M-Instruct judge (`reward=judge`), then per seed a random half of
the problems trains a meta RM (a BCE linear head on the judge's own frozen trunk, `spct.fit_meta_head`, label: the
judgement's score is on the verifier's side, `spct.judgement_correct`) and the other half is scored twice: the
plain vote over all valid judgements and the guided vote over the `meta_k` the meta RM rates highest
(`spct.guided_vote`, what `judge(meta_rm=..., meta_k=...)` computes). Reports the held-out AUROC of both against the
verifier's label, their paired difference per seed (mean, sd, t 95% interval), the meta RM's held-out AUROC on
judgement correctness, and how many judgements SPCT's rejective-fine-tuning filter (`spct.rft_select`) keeps.

    python benchmarks/spct_meta_vote.py --rows 40 --k 6 --max-new-tokens 64 --seeds 5 --threads 1

Candidates are judge_agreement.py's (held-out `smollm2-arith` problems, right answers on even rows). Every seed
reuses the one judgement pool (the judge is sampled once, seed 0): seeds vary the split and the head's init.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_agreement import auroc, candidates  # noqa: E402

from ascent.rewards.judge import JUDGE_TEMPLATE, PREFILL, SCORE_MAX, SCORE_MIN, Judgement, vote  # noqa: E402
from ascent.rewards.reward_model import RewardModel  # noqa: E402
from ascent.rewards.runner import RewardRunner  # noqa: E402
from ascent.rewards.spct import (  # noqa: E402
    fit_meta_head,
    guided_vote,
    judgement_correct,
    meta_prompt,
    rft_select,
    trunk_features,
)

T95 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}


def interval(xs: list[float]) -> tuple[float, float, float, float]:
    """(mean, sd, low, high) of a t 95% interval."""
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    h = T95.get(len(xs), 1.96) * sd / len(xs) ** 0.5
    return m, sd, m - h, m + h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--meta-k", type=int, default=0, help="0: k // 2 (the paper's k_meta = k/2)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pool", type=Path, default=None, help="reuse/write the judgement pool (JSON)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    meta_k = args.meta_k or max(args.k // 2, 1)
    load_before = open("/proc/loadavg").read().split()[:3]
    prompts, completions, fields = candidates(args.rows, 0)
    labels = [int(v) for v in RewardRunner(["answer_is"]).score(prompts, completions, fields).rewards.tolist()]
    spec = f"judge(k={args.k}, max_new_tokens={args.max_new_tokens}, temperature=0.7, force_score=True, seed=0)"
    runner = RewardRunner([spec], timeout_s=24 * 3600.0)
    judge = runner.fns[0]
    start = time.perf_counter()
    if args.pool and args.pool.exists():
        pool = json.loads(args.pool.read_text())
    else:
        runner.score(prompts, completions, fields)
        pool = [[[j.score, j.text] for j in js] for js in judge.last_votes]
        if args.pool:
            args.pool.write_text(json.dumps(pool) + "\n")
    judge_s = time.perf_counter() - start
    scores = [[s for s, _ in js] for js in pool]
    where = [(i, j) for i, js in enumerate(pool) for j, (s, _) in enumerate(js) if s is not None]
    rm = RewardModel(judge.model).eval()
    mp = [meta_prompt(JUDGE_TEMPLATE, PREFILL, prompts[i], completions[i]) for i, _ in where]
    feats = trunk_features(rm, judge.tokenizer, mp, [pool[i][j][1] for i, j in where], micro_batch_size=8)
    correct = torch.tensor([int(judgement_correct(pool[i][j][0], labels[i]) is True) for i, j in where])
    index = {w: n for n, w in enumerate(where)}

    def plain(i: int) -> float:
        v = vote([Judgement(s) if s is not None else Judgement(failure="no_score") for s in scores[i]])
        return 0.5 if v is None else v

    per_seed = []
    for seed in range(args.seeds):
        rows = list(range(args.rows))
        random.Random(seed).shuffle(rows)
        train, test = set(rows[: args.rows // 2]), rows[args.rows // 2 :]
        tr = [n for n, (i, _) in enumerate(where) if i in train]
        te = [n for n, (i, _) in enumerate(where) if i not in train]
        head = fit_meta_head(feats[tr], correct[tr], steps=300, lr=0.05, seed=seed)
        with torch.no_grad():
            meta = head(feats).squeeze(-1).tolist()
        guided = []
        for i in test:
            m = [meta[index[(i, j)]] if (i, j) in index else None for j in range(len(scores[i]))]
            g = guided_vote(scores[i], m, meta_k, 1, (SCORE_MIN, SCORE_MAX))
            guided.append(0.5 if g is None else g)
        y = [labels[i] for i in test]
        a_plain, a_guided = auroc([plain(i) for i in test], y), auroc(guided, y)
        meta_auc = auroc([meta[n] for n in te], [int(correct[n]) for n in te]) if te else float("nan")
        per_seed.append(
            {
                "seed": seed,
                "plain": a_plain,
                "guided": a_guided,
                "diff": a_guided - a_plain,
                "meta_auroc": meta_auc,
                "test_judgements": len(te),
            }
        )
    m, sd, lo, hi = interval([r["diff"] for r in per_seed])
    kept = rft_select(scores, labels)
    report = {
        "spec": spec,
        "meta_k": meta_k,
        "rows": args.rows,
        "valid_judgements": len(where),
        "judgements": args.rows * args.k,
        "correct_share_of_valid": round(float(correct.float().mean()), 3) if len(where) else None,
        "samples_with_2plus_valid": sum(sum(s is not None for s in row) >= 2 for row in scores),
        "rft_kept": len(kept),
        "rft_samples": len({i for i, _ in kept}),
        "per_seed": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in per_seed],
        "plain_auroc_mean": round(statistics.mean(r["plain"] for r in per_seed), 3),
        "guided_auroc_mean": round(statistics.mean(r["guided"] for r in per_seed), 3),
        "meta_auroc_mean": round(statistics.mean(r["meta_auroc"] for r in per_seed), 3),
        "diff": {"mean": round(m, 3), "sd": round(sd, 3), "ci95": [round(lo, 3), round(hi, 3)]},
        "judge_seconds": round(judge_s, 1),
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
