"""Issue 38's preference-based and return-conditioned seed rows, each against its control on the same dataset, same
budget, same seeds (docs/offline.md, "Preference-based and return-conditioned offline RL"):

    ipl      IPL (no reward model)            vs  pref_iql (Bradley-Terry reward model, then IQL), per flip rate
    reed     REED's reward model, then IQL    vs  pref_iql (the plain Bradley-Terry model), one preference budget
    br_rcrl  BR-RCRL (adaptive RTG target)    vs  rcrl (a plain return-conditioned policy, a fixed target)

Every run is `ascent train halfcheetah-sac classic.env=ENV classic.dataset=DATA classic.algorithm=ALGO(...)` in this
process (`train_run`), one torch thread; the two arms alternate A B / B A over seeds so the load of a shared machine
falls on both. Printed: one line per run, then a JSON line with, per arm, the final return (mean of
`--eval-episodes` deterministic episodes), the normalised score (0 = the dataset's random reference, 100 = its
expert), the learned preference model's held-out accuracy where there is one; and the paired difference (treatment -
control) with its 95% bootstrap interval over seeds (ascent.app.stats).

    python benchmarks/offline_preference_rows.py --row ipl --dataset datasets/pendulum-medium-replay-v0 --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARMS = {
    "ipl": ("ipl", "pref_iql"),
    "reed": ("reed", "pref_iql"),
    "br_rcrl": ("br_rcrl", "rcrl"),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--row", choices=sorted(ARMS), required=True)
    ap.add_argument("--dataset", required=True, help="a Minari dataset folder (ascent collect's --out/<id>)")
    ap.add_argument("--env", default="Pendulum-v1")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5000, help="gradient steps a run")
    ap.add_argument("--hidden", default="64,64")
    ap.add_argument("--eval-episodes", type=int, default=5)
    ap.add_argument("--flip-rates", default="0.0,0.2", help="ipl row: one comparison per flip rate")
    ap.add_argument("--n-pairs", type=int, default=500, help="preference budget (ipl, reed rows)")
    ap.add_argument("--segment-len", type=int, default=25)
    ap.add_argument("--extra", default="", help="more key=value for both arms' algorithm parameters, ';'-separated")
    ap.add_argument("--treatment-extra", default="", help="more key=value for the treatment arm only")
    ap.add_argument("--control-extra", default="", help="more key=value for the control arm only")
    ap.add_argument("--work", default=str(ROOT / "runs" / "offline-preference-rows"))
    ap.add_argument("--aggregate", nargs="*", default=None, metavar="OUT",
                    help="train nothing: summarise the run lines printed by earlier invocations (e.g. seed ranges run "
                         "in parallel) that carry this --row's tag")  # fmt: skip
    return ap.parse_args(argv)


def machine() -> dict[str, Any]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())  # fmt: skip
    return {"cpu": cpu, "cores": os.cpu_count(), "load": [round(x, 1) for x in os.getloadavg()]}


def algo_spec(arm: str, args: argparse.Namespace, flip: float, treatment: bool) -> str:
    kw = [f"hidden=[{args.hidden}]"]
    if arm in ("ipl", "pref_iql", "reed"):
        kw += [f"n_pairs={args.n_pairs}", f"segment_len={args.segment_len}", f"flip_rate={flip}"]
        if arm != "ipl":
            kw += [f"reward_hidden=[{args.hidden}]"]
    kw += [x for x in args.extra.split(";") if x]
    kw += [x for x in (args.treatment_extra if treatment else args.control_extra).split(";") if x]
    return f"{arm}({','.join(kw)})"


def one_run(arm: str, spec: str, seed: int, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    from ascent.app.classic import train_run
    from ascent.config import load_config

    name = f"{tag}-{arm}-s{seed}"
    over = [f"name={name}", f"output_dir={args.work}", f"seed={seed}", f"classic.env={args.env}",
            f"classic.dataset={args.dataset}", f"classic.algorithm={spec}", f"classic.total_steps={args.steps}",
            f"classic.eval_episodes={args.eval_episodes}", f"classic.log_every={args.steps}",
            f"classic.eval_every={args.steps}", "logging.progress=false", "threads=1"]  # fmt: skip
    t0, c0 = time.time(), time.process_time()
    summary = train_run(load_config("halfcheetah-sac", over), overwrite=True)
    wall, cpu = time.time() - t0, time.process_time() - c0
    lines = (Path(args.work) / name / "metrics.jsonl").read_text().splitlines()
    last = {}
    for line in lines:
        rec = json.loads(line)
        last.update({k: v for k, v in rec.items() if k.startswith("reward_model/")})
    ret = float(np.mean(summary["final_returns"]))
    out = {
        "tag": tag,
        "arm": arm,
        "seed": seed,
        "return": ret,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        **last,
    }
    print(json.dumps(out), flush=True)
    return out


def compare(args: argparse.Namespace, flip: float, ref: tuple[float, float]) -> dict[str, Any]:
    treat, control = ARMS[args.row]
    tag = f"{args.row}-f{flip}-p{args.n_pairs}-{args.steps}"
    runs: dict[str, list[dict[str, Any]]] = {treat: [], control: []}
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        order = (treat, control) if i % 2 == 0 else (control, treat)
        for arm in order:
            runs[arm].append(one_run(arm, algo_spec(arm, args, flip, arm == treat), seed, args, tag))
    return summarize(runs, treat, control, ref, flip, {a: algo_spec(a, args, flip, a == treat) for a in runs})


def summarize(runs: dict[str, list[dict[str, Any]]], treat: str, control: str, ref: tuple[float, float], flip: float,
              specs: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """Per-arm returns, normalised scores, held-out accuracies, and the paired treatment - control differences
    (runs of the same seed, matched by seed)."""
    from ascent.app.stats import bootstrap_difference, bootstrap_interval

    for rs in runs.values():
        rs.sort(key=lambda r: r["seed"])
    if [r["seed"] for r in runs[treat]] != [r["seed"] for r in runs[control]]:
        raise SystemExit(f"unpaired seeds: {[r['seed'] for r in runs[treat]]} vs {[r['seed'] for r in runs[control]]}")
    lo, hi = ref
    res: dict[str, Any] = {"flip_rate": flip, "specs": specs, "seeds": [r["seed"] for r in runs[treat]]}
    for arm, rs in runs.items():
        rets = [r["return"] for r in rs]
        scores = [100.0 * (x - lo) / (hi - lo) for x in rets]
        ci = bootstrap_interval(scores)
        res[arm] = {"return_mean": round(float(np.mean(rets)), 1), "returns": [round(x, 1) for x in rets],
                    "score_mean": round(ci.mean, 1), "score_ci95": [round(ci.lo, 1), round(ci.hi, 1)],
                    "score_sd": round(float(np.std(scores, ddof=1)), 1) if len(scores) > 1 else 0.0,
                    "cpu_s_mean": round(float(np.mean([r["cpu_s"] for r in rs])), 1)}  # fmt: skip
        acc = [r["reward_model/heldout_accuracy"] for r in rs if "reward_model/heldout_accuracy" in r]
        if acc:
            res[arm]["heldout_accuracy"] = [round(a, 3) for a in acc]
            res[arm]["heldout_accuracy_mean"] = round(float(np.mean(acc)), 3)
    a = [100.0 * (r["return"] - lo) / (hi - lo) for r in runs[control]]
    b = [100.0 * (r["return"] - lo) / (hi - lo) for r in runs[treat]]
    d = bootstrap_difference(a, b, paired=True)
    res["score_diff"] = {"treatment_minus_control": round(d.diff, 1), "ci95": [round(d.lo, 1), round(d.hi, 1)],
                         "significant": d.significant}  # fmt: skip
    if "heldout_accuracy" in res[treat] and "heldout_accuracy" in res[control]:
        da = bootstrap_difference(res[control]["heldout_accuracy"], res[treat]["heldout_accuracy"], paired=True)
        res["accuracy_diff"] = {"treatment_minus_control": round(da.diff, 3), "ci95": [round(da.lo, 3),
                                round(da.hi, 3)], "significant": da.significant}  # fmt: skip
    return res


def aggregate(args: argparse.Namespace, ref: tuple[float, float]) -> list[dict[str, Any]]:
    """One comparison per tag of this row found in the --aggregate files' run lines."""
    treat, control = ARMS[args.row]
    by_tag: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for path in args.aggregate:
        for line in Path(path).read_text().splitlines():
            if line.startswith('{"tag"') and json.loads(line)["tag"].startswith(args.row + "-"):
                rec = json.loads(line)
                by_tag.setdefault(rec["tag"], {treat: [], control: []})[rec["arm"]].append(rec)
    flip = lambda tag: float(tag.split("-f")[1].split("-")[0])  # noqa: E731
    return [summarize(runs, treat, control, ref, flip(tag), {"tag": tag}) for tag, runs in sorted(by_tag.items())]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch

    from ascent.offline.dataset import load_transitions

    torch.set_num_threads(1)
    data = load_transitions(args.dataset)
    ref = (data.ref_min_score, data.ref_max_score)
    if None in ref:
        raise SystemExit(f"{args.dataset}: no ref_min_score / ref_max_score to normalise with")
    if args.aggregate is not None:
        out = {"row": args.row, "dataset": args.dataset, "aggregated_from": args.aggregate,
               "comparisons": aggregate(args, ref)}  # fmt: skip
        print(json.dumps(out), flush=True)
        return out
    start = machine()
    flips = [float(x) for x in args.flip_rates.split(",")] if args.row == "ipl" else [0.0]
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    out = {"row": args.row, "dataset": args.dataset, "seeds": seeds,
           "steps": args.steps, "hidden": args.hidden, "n_pairs": args.n_pairs, "segment_len": args.segment_len,
           "eval_episodes": args.eval_episodes, "machine_start": start,
           "comparisons": [compare(args, f, ref) for f in flips], "machine_end": machine()}  # fmt: skip
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
