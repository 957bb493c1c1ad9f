"""Metric sinks: jsonl lines, resume truncation, TensorBoard events, curves.png."""

from __future__ import annotations

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ascent.logging import MetricsLogger, plot_curves, read_metrics


def test_jsonl_truncate_tensorboard_and_plot(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=True)
    for step in range(1, 6):
        log.log("rl", step, {"reward/mean": step / 10, "eval/accuracy": step / 5 if step % 2 == 0 else float("nan")})
    log.log("warmstart", 1, {"loss/nll": 1.0, "eval/accuracy": 0.5})
    log.truncate_after("rl", 3)  # a resumed run drops what came after its checkpoint
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["phase"], r["step"]) for r in rows] == [("rl", 1), ("rl", 2), ("rl", 3), ("warmstart", 1)]
    assert rows[0]["eval/accuracy"] is None and rows[1]["eval/accuracy"] == 0.4  # NaN written as null
    log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    scalars = {tag: [(e.step, round(e.value, 6)) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert scalars == {  # every value as logged (TensorBoard keeps the truncated steps), NaN left out, tags phase/key
        "rl/reward/mean": [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4), (5, 0.5)],
        "rl/eval/accuracy": [(2, 0.4), (4, 0.8)],
        "warmstart/loss/nll": [(1, 1.0)],
        "warmstart/eval/accuracy": [(1, 0.5)],
    }
    png = plot_curves(tmp_path / "metrics.jsonl", tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
