"""Reward over-optimisation (Gao, Schulman & Hilton 2023, arXiv:2210.10760): the proxy reward a run trains on and
the true reward it is graded by, against the KL to the starting policy, one line per run.

    python benchmarks/overoptimisation.py runs/rl-rm-kl0 runs/rl-rm-kl0.05 \\
        --proxy "reward/rm:rms/default-noise20" --true reward/exact_answer --plot docs/img/rm_overoptimisation.png

Each run trains on the proxy with the true reward logged beside it at weight 0 (`reward=[rm:PATH,exact_answer]
reward_weights=[1.0,0.0]`), so metrics.jsonl has both per step, and `kl/ref_k3` (logged when
`algorithm.kl_coef` > 0 or always, as the RL loop does). Points are smoothed over `--window` steps. Prints per run
the proxy and true reward at the start, at the proxy's best and at the end, as a markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rl_lines(run: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [x for x in lines if x.get("phase") == "rl"]


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing mean over `window` points.

    >>> smooth([0.0, 2.0, 4.0, 6.0], 2)
    [0.0, 1.0, 3.0, 5.0]
    """
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]


def series(lines: list[dict], proxy: str, true: str, window: int) -> tuple[list[float], list[float], list[float]]:
    """(KL, proxy, true) per step, smoothed; steps missing one of them are left out."""
    rows = [(x["kl/ref_k3"], x[proxy], x[true]) for x in lines if {"kl/ref_k3", proxy, true} <= set(x)]
    if not rows:
        raise SystemExit(f"no RL step logs kl/ref_k3, {proxy!r} and {true!r} together")
    kl, p, t = (smooth([r[i] for r in rows], window) for i in range(3))
    return kl, p, t


def table(runs: dict[str, tuple[list[float], list[float], list[float]]]) -> str:
    out = ["| run | proxy start → best → end | true start → at proxy's best → end | KL at end |", "|---|---|---|---|"]
    for name, (kl, p, t) in runs.items():
        best = max(range(len(p)), key=p.__getitem__)
        out.append(
            f"| {name} | {p[0]:+.2f} → {p[best]:+.2f} → {p[-1]:+.2f} | {t[0]:.3f} → {t[best]:.3f} → {t[-1]:.3f} "
            f"| {kl[-1]:.2f} |"
        )
    return "\n".join(out)


def plot(runs: dict[str, tuple[list[float], list[float], list[float]]], out: Path, proxy: str, true: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (name, (kl, p, t)) in enumerate(runs.items()):
        axes[0].plot(kl, p, color=f"C{i}", label=name)
        axes[1].plot(kl, t, color=f"C{i}", label=name)
    axes[0].set(xlabel="KL to the start (k3, smoothed)", ylabel=proxy, title="proxy reward (trained on)")
    axes[1].set(xlabel="KL to the start (k3, smoothed)", ylabel=true, title="true reward (graded by)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--proxy", required=True, help="metrics key of the reward trained on")
    ap.add_argument("--true", required=True, help="metrics key of the true reward (logged at weight 0)")
    ap.add_argument("--window", type=int, default=20, help="smoothing window in steps")
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args()
    runs = {run.name: series(rl_lines(run), args.proxy, args.true, args.window) for run in args.runs}
    print(table(runs))
    if args.plot:
        plot(runs, args.plot, args.proxy, args.true)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
