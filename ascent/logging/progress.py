"""Progress of a run: on a terminal, a rich bar showing step, reward, accuracy and tokens/s; elsewhere (a log
file, `nohup`, `| tee`, CI) a plain metrics line every `logging.log_every` steps with the elapsed time and an
estimate of the time left. Evaluations get a bar of their own on a terminal."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ascent.logging.metrics import console


def clock(seconds: float) -> str:
    """H:MM:SS.

    >>> clock(0), clock(61.4), clock(3 * 3600 + 5)
    ('0:00:00', '0:01:01', '3:00:05')
    """
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def metrics_line(
    label: str, step: int, total: int, fields: dict[str, float], elapsed: float, done: int, first: str = "reward/loss"
) -> str:
    """One plain progress line: the step, the latest metrics, the time so far and the time left at the pace of
    the `done` steps taken in this process; `first`: the name of the first field (`reward` in RL, `loss` in a
    supervised phase).

    >>> metrics_line("rl", 20, 100, {"reward": 0.5, "acc": float("nan"), "tps": 812.0}, 40.0, 20, "reward")
    'rl step 20/100  reward 0.500  tok/s 812  elapsed 0:00:40  left ~0:02:40'
    """
    parts = [f"{label} step {step}/{total}"]
    for key, name, fmt in (("reward", first, ".3f"), ("acc", "acc", ".3f"), ("tps", "tok/s", ".0f")):
        if fields.get(key) == fields.get(key):  # not NaN: a metric this phase has reported
            parts.append(f"{name} {fields[key]:{fmt}}")
    parts.append(f"elapsed {clock(elapsed)}")
    if done > 0 and step < total:
        parts.append(f"left ~{clock(elapsed / done * (total - step))}")
    return "  ".join(parts)


class Bar:
    """Update with the latest metrics; fields missing from an update keep their last value. Without a rich bar
    and with `log_every`, prints `metrics_line` every `log_every` steps and at the last step."""

    def __init__(
        self,
        progress: Progress | None,
        task: int | None,
        label: str = "",
        total: int = 0,
        start: int = 0,
        log_every: int = 0,
    ) -> None:
        self.progress, self.task = progress, task
        self.fields = {"reward": float("nan"), "acc": float("nan"), "tps": float("nan")}
        self.label, self.total, self.start, self.log_every = label, total, start, log_every
        self.t0 = time.perf_counter()
        self.first = "reward/loss"

    def update(self, step: int, metrics: dict[str, float]) -> None:
        for key, name in (
            ("reward", "reward/mean"),
            ("acc", "eval/accuracy"),
            ("tps", "rollout/tokens_per_s"),
            ("reward", "loss/nll"),
        ):
            if metrics.get(name) is not None:
                self.fields[key] = metrics[name]
                if key == "reward":
                    self.first = "loss" if name == "loss/nll" else "reward"
        if self.progress is not None:
            self.progress.update(self.task, completed=step, **self.fields)
        elif self.log_every and (step % self.log_every == 0 or step == self.total):
            elapsed = time.perf_counter() - self.t0
            line = metrics_line(self.label, step, self.total, self.fields, elapsed, step - self.start, self.first)
            console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def progress_bar(label: str, total: int, enabled: bool, start: int = 0, log_every: int = 0) -> Iterator[Bar]:
    """Context manager yielding a `Bar`: a rich bar when `enabled` and the console is a terminal; plain
    `metrics_line`s every `log_every` steps when it is not (0: none)."""
    if not enabled or not console.is_terminal:
        yield Bar(None, None, label, total, start, log_every if enabled else 0)
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


@contextmanager
def eval_progress(label: str, total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A transient bar for an evaluation of `total` rows on a terminal; yields advance(rows_done_in_batch)."""
    if not enabled or not console.is_terminal or total <= 0:
        yield lambda n: None
        return
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)
