"""Seeds of one recipe side by side: a markdown table of held-out accuracy (strict and lenient), pass@k and mean
completion length before RL, after RL and for the control (mean and spread over seeds); RL - control per seed with
its mean, standard deviation and 95% intervals over seeds (paired bootstrap and Student t), strict and lenient; the
share of sampled completions cut at the length cap (`rollout/truncated_frac`) at the last step of each phase, and
its largest value over the phase; and a plot of held-out greedy accuracy against optimizer step for RL and the
control.

    python benchmarks/seeds_report.py runs/arith-s0 runs/arith-s1 runs/arith-s2 --plot docs/img/smollm2_arith.png

Each run directory needs summary.json and metrics.jsonl (`ascent train` writes both). Step 0 of both curves is
the accuracy before RL; the last point is the final evaluation.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PHASES = (("before_rl", "base"), ("after_rl", "RL"), ("control", "control"))


def load(run: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((run / "summary.json").read_text())
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return summary, lines


def spread(values: list[float]) -> str:
    """'mean ± std (min-max)' in points, or the value alone for one seed."""
    pts = [100 * v for v in values]
    if len(pts) == 1:
        return f"{pts[0]:.1f}"
    return f"{statistics.mean(pts):.1f} ± {statistics.stdev(pts):.1f} ({min(pts):.1f}-{max(pts):.1f})"


def table(summaries: list[dict]) -> str:
    metrics = [("strict accuracy", "accuracy_{}"), ("lenient accuracy", "accuracy_{}_lenient")]
    passes = sorted({k.split("_")[0] for k in summaries[0] if k.startswith("pass@")}, key=lambda p: int(p[5:]))
    metrics += [(p, p + "_{}") for p in passes]
    kind = summaries[0].get("control_kind", "control")
    out = [f"| metric (points, {len(summaries)} seeds) | base | RL | control ({kind}) |", "|---|---|---|---|"]
    for label, pattern in metrics:
        cells = []
        for key, _ in PHASES:
            vals = [s[pattern.format(key)] for s in summaries if pattern.format(key) in s]
            cells.append(spread(vals) if vals else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    lens = []
    for key, _ in PHASES:
        vals = [s[f"completion_len_{key}"] for s in summaries if f"completion_len_{key}" in s]
        lens.append(f"{statistics.mean(vals):.1f}" if vals else "-")
    out.append("| mean completion tokens | " + " | ".join(lens) + " |")
    per_seed = ["", "| seed | base strict / lenient | RL strict / lenient | control strict / lenient | RL - control |"]
    per_seed.append("|---|---|---|---|---|")
    for s in summaries:
        nan = float("nan")
        cells = [
            f"{100 * s.get(f'accuracy_{k}', nan):.1f} / {100 * s.get(f'accuracy_{k}_lenient', nan):.1f}"
            for k, _ in PHASES
        ]
        gap = 100 * (s["accuracy_after_rl"] - s.get("accuracy_control", float("nan")))
        per_seed.append(f"| {s['seed']} | " + " | ".join(cells) + f" | {gap:+.1f} |")
    return "\n".join(out + per_seed)


def difference(summaries: list[dict], suffix: str = "") -> str:
    """One line: RL - control over the seeds (points), mean ± sd, the paired bootstrap 95% interval of the mean
    (`ascent.app.stats.bootstrap_difference`) and the Student-t 95% interval (`ascent.app.report.interval95`);
    '' for fewer than two seeds."""
    pairs = [
        (100 * s[f"accuracy_control{suffix}"], 100 * s[f"accuracy_after_rl{suffix}"])
        for s in summaries
        if f"accuracy_control{suffix}" in s
    ]
    if len(pairs) < 2:
        return ""
    from ascent.app.report import interval95
    from ascent.app.stats import bootstrap_difference

    gaps = [rl - ctl for ctl, rl in pairs]
    d = bootstrap_difference([c for c, _ in pairs], [r for _, r in pairs], paired=True)
    mean, sd, n = statistics.mean(gaps), statistics.stdev(gaps), len(gaps)
    lo, hi = interval95(mean, sd, n)
    grader = "lenient" if suffix else "strict"
    return (
        f"RL - control, {grader}, {n} seeds: {', '.join(f'{g:+.1f}' for g in gaps)}; mean {mean:+.2f} ± {sd:.2f} "
        f"(sd), 95% paired bootstrap [{d.lo:+.2f}, {d.hi:+.2f}], 95% t [{lo:+.2f}, {hi:+.2f}]"
    )


def truncation(summary: dict, lines: list[dict]) -> str:
    """One table row: `rollout/truncated_frac` at the last logged step of the RL and control phases, and the
    largest value of each phase ('-' where the run logged none)."""
    cells = []
    for phase in ("rl", "control"):
        vals = [x["rollout/truncated_frac"] for x in lines if x.get("phase") == phase and "rollout/truncated_frac" in x]
        cells.append(f"{vals[-1]:.2f} (max {max(vals):.2f})" if vals else "-")
    return f"| {summary['seed']} | " + " | ".join(cells) + " |"


def curve(summary: dict, lines: list[dict], phase: str, key: str) -> tuple[list[int], list[float]]:
    final = "after_rl" if phase == "rl" else "control"
    metric = "eval/accuracy" if key == "accuracy" else f"eval/{key}"
    steps, values = [0], [summary[f"accuracy_before_rl{'' if key == 'accuracy' else '_lenient'}"]]
    for x in lines:
        if x["phase"] == phase and metric in x:
            steps.append(x["step"])
            values.append(x[metric])
    steps.append(summary["steps"])
    values.append(summary[f"accuracy_{final}{'' if key == 'accuracy' else '_lenient'}"])
    return steps, values


def plot(runs: list[tuple[dict, list[dict]]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    kind = runs[0][0].get("control_kind", "control")
    for ax, key, name in ((axes[0], "accuracy", "strict (reward's grader)"), (axes[1], "accuracy_lenient", "lenient")):
        for phase, color, label in (("rl", "C0", "GRPO"), ("control", "C3", f"control ({kind})")):
            for i, (summary, lines) in enumerate(runs):
                steps, values = curve(summary, lines, phase, key)
                ax.plot(steps, values, color=color, marker="o", alpha=0.8, label=label if i == 0 else None)
        ax.set(xlabel="optimizer step", title=f"held-out greedy accuracy, {name}")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("accuracy (300 held-out problems)")
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run directories (one per seed)")
    p.add_argument("--plot", type=Path, help="write the accuracy-against-step plot here")
    p.add_argument("--title", default="", help="plot title")
    args = p.parse_args()
    runs = [load(r) for r in args.runs]
    summaries = [s for s, _ in runs]
    print(table(summaries))
    gaps = [line for line in (difference(summaries), difference(summaries, "_lenient")) if line]
    if gaps:
        print("\n" + "\n".join(gaps))
    print("\n| seed | truncated share, last RL step | last control step |\n|---|---|---|")
    print("\n".join(truncation(s, lines) for s, lines in runs))
    if args.plot:
        default = (
            f"{runs[0][0]['name']}"
            if len(runs) == 1
            else f"{len(runs)} seeds (" + ", ".join(s["name"] for s, _ in runs) + ")"
        )
        plot(runs, args.plot, args.title or default)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
