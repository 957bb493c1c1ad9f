"""Metric sinks (jsonl, TensorBoard, console) and plots."""

from ascent.logging.metrics import MetricsLogger, console, read_metrics
from ascent.logging.plots import plot_curves

__all__ = ["MetricsLogger", "console", "plot_curves", "read_metrics"]
