"""curves.png: training reward and held-out accuracy against step."""

from __future__ import annotations

from pathlib import Path

from ascent.logging.metrics import read_metrics


def plot_curves(metrics_path: Path, out: Path) -> Path:
    """Plot the RL reward, the warm start loss and every phase's held-out accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    rl = [r for r in rows if r["phase"] == "rl" and r.get("reward/mean") is not None]
    if rl:
        axes[0].plot([r["step"] for r in rl], [r["reward/mean"] for r in rl], label="RL reward (mean)")
    axes[0].set(xlabel="RL step", ylabel="reward", title="training reward")
    for phase in ("warmstart", "rl", "control"):
        ev = [r for r in rows if r["phase"] == phase and r.get("eval/accuracy") is not None]
        if ev:
            axes[1].plot([r["step"] for r in ev], [r["eval/accuracy"] for r in ev], marker="o", label=phase)
    axes[1].set(
        xlabel="optimizer step (per phase)", ylabel="held-out greedy accuracy", title="held-out accuracy", ylim=(0, 1)
    )
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
