"""A rich progress bar showing step, reward, accuracy and tokens/s (silent when disabled or not a TTY)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ascent.logging.metrics import console


class Bar:
    """Update with the latest metrics; fields missing from an update keep their last value."""

    def __init__(self, progress: Progress | None, task: int | None) -> None:
        self.progress, self.task = progress, task
        self.fields = {"reward": float("nan"), "acc": float("nan"), "tps": float("nan")}

    def update(self, step: int, metrics: dict[str, float]) -> None:
        for key, name in (
            ("reward", "reward/mean"),
            ("acc", "eval/accuracy"),
            ("tps", "rollout/tokens_per_s"),
            ("reward", "loss/nll"),
        ):
            if metrics.get(name) is not None:
                self.fields[key] = metrics[name]
        if self.progress is not None:
            self.progress.update(self.task, completed=step, **self.fields)


@contextmanager
def progress_bar(label: str, total: int, enabled: bool, start: int = 0) -> Iterator[Bar]:
    """Context manager yielding a `Bar`."""
    if not enabled:
        yield Bar(None, None)
        return
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reward/loss {task.fields[reward]:.3f}  acc {task.fields[acc]:.3f}  tok/s {task.fields[tps]:.0f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(
            label, total=total, completed=start, reward=float("nan"), acc=float("nan"), tps=float("nan")
        )
        yield Bar(progress, task)
