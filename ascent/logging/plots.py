"""curves.png: the per-step metrics a practitioner watches, against step, for every RL-shaped phase (RL and an
RFT control), next to every phase's held-out accuracy."""

from __future__ import annotations

from pathlib import Path

from ascent.logging.metrics import read_metrics

PANELS = (
    ("reward/mean", "training reward (mean, ± std)"),
    ("reward/zero_std_groups_frac", "groups with no signal"),
    ("kl/ref_k3", "KL to the start (k3)"),
    ("policy/entropy", "entropy (sampled tokens)"),
    ("rollout/completion_len_mean", "completion length (tokens)"),
    ("loss/clip_frac", "clip fraction"),
    ("loss/grad_norm", "grad norm"),
)
"""(metric, title) of the per-step panels; a panel whose metric no phase logged stays empty."""


def plot_curves(metrics_path: Path, out: Path) -> Path:
    """Plot each per-step metric of `PANELS` for the RL phase (and an RL-shaped control), and every phase's
    held-out greedy accuracy (strict, and lenient dashed where the task has a lenient grader)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    fig, axes = plt.subplots(2, 4, figsize=(18, 7))
    flat = axes.ravel()
    for ax, (metric, title) in zip(flat, PANELS):
        for phase, color in (("rl", "C0"), ("control", "C3")):
            pts = [r for r in rows if r["phase"] == phase and r.get(metric) is not None]
            if not pts:
                continue
            steps, values = [r["step"] for r in pts], [r[metric] for r in pts]
            ax.plot(steps, values, color=color, label=phase)
            if metric == "reward/mean" and all(r.get("reward/std") is not None for r in pts):
                lo = [v - r["reward/std"] for v, r in zip(values, pts)]
                hi = [v + r["reward/std"] for v, r in zip(values, pts)]
                ax.fill_between(steps, lo, hi, color=color, alpha=0.15)
        ax.set(xlabel="step", title=title)
    acc = flat[-1]
    for i, phase in enumerate(("warmstart", "rl", "control")):
        for key, style in (("eval/accuracy", "-"), ("eval/accuracy_lenient", "--")):
            ev = [r for r in rows if r["phase"] == phase and r.get(key) is not None]
            if ev:
                label = phase + (" (lenient)" if key.endswith("lenient") else "")
                acc.plot([r["step"] for r in ev], [r[key] for r in ev], style, color=f"C{i}", marker="o", label=label)
    acc.set(xlabel="optimizer step (per phase)", title="held-out greedy accuracy", ylim=(0, 1))
    for ax in flat:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def plot_panels(metrics_path: Path, out: Path, panels: tuple[tuple[str, str], ...], phase: str, xlabel: str) -> Path:
    """One panel per (metric, title) of `panels`, the metric of `phase` against its step (a panel whose metric
    was never logged stays empty); used by runs whose metrics are not the language-model ones (classic RL)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_metrics(metrics_path) if r["phase"] == phase]
    cols = min(4, len(panels))
    fig, axes = plt.subplots(-(-len(panels) // cols), cols, figsize=(4.5 * cols, 3.5 * -(-len(panels) // cols)))
    flat = axes.ravel() if hasattr(axes, "ravel") else [axes]
    for ax, (metric, title) in zip(flat, panels):
        pts = [r for r in rows if r.get(metric) is not None]
        if pts:
            ax.plot([r["step"] for r in pts], [r[metric] for r in pts], marker="o" if len(pts) < 20 else None)
        ax.set(xlabel=xlabel, title=title)
        ax.grid(alpha=0.3)
    for ax in flat[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
