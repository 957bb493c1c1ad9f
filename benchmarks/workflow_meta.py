"""FlowReasoner's query-level meta-agent (recipe `workflow-meta`) against fixed, task-level workflows.

Reads a finished `ascent compare workflow-meta ... --variants benchmarks/compare_workflow.yaml` folder and, per seed,
executes on the 500 held-out queries (the worker's draws seeded by the run seed, the same for every arm):
  - each RL arm's final policy (greedy workflows) and the shared warm start (the query-blind teacher's imitation);
  - the fixed workflows `solve`, `split`, `solve>check` (FlowReasoner's control: one system for every query);
  - the oracle: per query the one of the three fixed workflows with the highest expected reward (estimated from
    64 executions), a reference for what choosing per query can gain.
Metrics per arm: mean multi-purpose reward (`workflow_exec` with the recipe's weights), accuracy (the executed
answer is right), worker calls and operators per query, the share of `solve` on easy / hard queries. Prints one
JSON object: per arm the mean over seeds with a 95% t-interval, and paired differences (same seed) of `flow`
against the best fixed workflow and against `perf_only`.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/workflow_meta.py --compare compare/workflow [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ci95, load, paired_summary  # noqa: E402

from ascent.config.loader import load_config  # noqa: E402
from ascent.rewards.workflow import WorkflowReward  # noqa: E402
from ascent.tasks import load_task  # noqa: E402

FIXED = ("solve", "split", "solve>check")
KEYS = ("reward", "accuracy", "calls", "ops", "solve_easy", "solve_hard", "valid")


def greedy_workflows(folder: Path, prompts: list[str], batch: int = 250) -> list[str]:
    """The model's greedy completion of each prompt (at most 8 new tokens), left-padded batches."""
    tok = PreTrainedTokenizerFast.from_pretrained(folder)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(prompts), batch):
            enc = tok(prompts[i : i + batch], return_tensors="pt", padding=True)
            gen = model.generate(
                **enc, max_new_tokens=8, do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
            )
            out += tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def score(rows: list[dict], workflows: list[str], reward: WorkflowReward) -> dict[str, float]:
    """Execute one workflow per held-out row: the means of KEYS."""
    rewards = reward([r["prompt"] for r in rows], workflows, a=[r["a"] for r in rows], b=[r["b"] for r in rows])
    stats = {"reward": statistics.mean(rewards)}
    perf, calls, ops, valid = [], [], [], []
    for i, (r, w) in enumerate(zip(rows, workflows)):
        _, s = reward.score_one(r["prompt"], w, r["a"], r["b"], i)  # same count as the batch call: same draws
        perf.append(s["perf"]), calls.append(s["calls"]), ops.append(s["ops"]), valid.append(s["valid"])
    easy = [w.strip() == "solve" for r, w in zip(rows, workflows) if not r["hard"]]
    hard = [w.strip() == "solve" for r, w in zip(rows, workflows) if r["hard"]]
    stats |= {
        "accuracy": statistics.mean(perf),
        "calls": statistics.mean(calls),
        "ops": statistics.mean(ops),
        "valid": statistics.mean(valid),
        "solve_easy": float(statistics.mean(easy)) if easy else 0.0,
        "solve_hard": float(statistics.mean(hard)) if hard else 0.0,
    }
    return stats


def expected_reward(workflow: str, a: int, b: int, reward: WorkflowReward, draws: int = 64) -> float:
    """E[r] of a workflow on a + b, estimated from `draws` executions (seeded by the query)."""
    return statistics.mean(reward.score_one(f"{a}+{b}=", workflow, a, b, i)[0] for i in range(draws))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", required=True, help="a finished `ascent compare workflow-meta` folder")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    root = Path(args.compare)
    plan = json.loads((root / "plan.json").read_text())
    cfg = load_config("workflow-meta", list(plan.get("overrides", [])))
    task = load_task(cfg.data, cfg.data.split_seed if cfg.data.split_seed is not None else cfg.seed)
    rows = task.eval
    prompts = [r["prompt"] for r in rows]
    variants = [v["name"] if isinstance(v, dict) else v for v in plan["variants"]]
    seeds = plan["seeds"]
    oracle_ref = WorkflowReward()
    best = [max(FIXED, key=lambda w: expected_reward(w, r["a"], r["b"], oracle_ref)) for r in rows]
    warm = greedy_workflows(root / "warmstart" / "warmstart", prompts)
    per_seed = []
    for seed in seeds:
        arms: dict[str, list[str]] = {"warm_start": warm, "oracle": best} | {f: [f] * len(rows) for f in FIXED}
        for v in variants:
            run = root / "runs" / f"{v}__seed{seed}" / "checkpoints"
            arms[v] = greedy_workflows(run / (run / "latest").read_text().strip(), prompts)
        per_seed.append({name: score(rows, ws, WorkflowReward(seed=seed)) for name, ws in arms.items()})
    fixed_best = max(FIXED, key=lambda f: statistics.mean(s[f]["reward"] for s in per_seed))
    result = {
        "machine": load(),
        "seeds": seeds,
        "rows": len(rows),
        "arms": {
            name: {k: {"mean": round(statistics.mean(s[name][k] for s in per_seed), 4)} for k in KEYS}
            for name in per_seed[0]
        },
        "best_fixed": fixed_best,
    }
    for name, arm in result["arms"].items():
        for k in KEYS:
            arm[k]["ci95"] = ci95([s[name][k] for s in per_seed])
    for v in variants:
        result[f"{v}_vs_{fixed_best}"] = paired_summary(per_seed, ("reward", "accuracy", "calls"), v, fixed_best)
    if len(variants) > 1:
        result[f"{variants[0]}_vs_{variants[1]}"] = paired_summary(
            per_seed, ("reward", "accuracy", "calls"), variants[0], variants[1]
        )
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
