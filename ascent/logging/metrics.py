"""Metric sinks: `metrics.jsonl` (one line per step, namespaced keys), optional TensorBoard, console."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

console = Console(stderr=False, highlight=False)


class MetricsLogger:
    """Appends `{"phase", "step", **metrics}` lines to run_dir/metrics.jsonl; mirrors them to TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = False, sinks: Sequence[Any] = ()) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sinks = list(sinks)
        """Experiment trackers (`ascent.logging.sinks`): log(phase, step, metrics), finish(...), close()."""
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def log(self, phase: str, step: int, metrics: dict[str, float]) -> None:
        clean = {
            k: (float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None) for k, v in metrics.items()
        }
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"phase": phase, "step": step, **clean}) + "\n")
        if self._tb is not None:
            for k, v in clean.items():
                if v is not None:
                    self._tb.add_scalar(f"{phase}/{k}", v, step)
        for sink in self.sinks:
            sink.log(phase, step, clean)

    def finish(self, run_dir: Path, summary: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        """The end of a run: the trackers get the summary, the samples and the report."""
        for sink in self.sinks:
            sink.finish(run_dir, summary, samples)

    def truncate_after(self, phase: str, step: int) -> None:
        """Drop lines of `phase` past `step` (a resumed run rewrites them)."""
        if not self.path.exists():
            return
        keep = [
            line
            for line in self.path.read_text().splitlines()
            if line.strip() and not _after(json.loads(line), phase, step)
        ]
        self.path.write_text("".join(line + "\n" for line in keep))

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        for sink in self.sinks:
            sink.close()
        self.sinks = []


def _after(row: dict[str, Any], phase: str, step: int) -> bool:
    return row.get("phase") == phase and row.get("step", 0) > step


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All lines of a metrics.jsonl."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
