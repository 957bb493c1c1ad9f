"""W&B (offline) and MLflow (local file store): a short run logs its metrics, config, summary, samples and
report, and the tests read them back from what the trackers wrote; a resumed run continues the same run."""

from __future__ import annotations

import json
import sys

import pytest

from ascent.app.pipeline import train
from ascent.cli import main
from ascent.config import load_config
from ascent.logging.metrics import read_metrics
from ascent.logging.sinks import SinkError, WandbSink
from tests.trainer.test_resume import TINY


def rl_series(run_dir, key):
    return {r["step"]: r[key] for r in read_metrics(run_dir / "metrics.jsonl") if r["phase"] == "rl"}


def test_mlflow_reads_back_metrics_params_and_artifacts_and_resumes_the_same_run(tmp_path):
    pytest.importorskip("mlflow", reason="mlflow-skinny is not installed: pip install -e '.[tracking]'")
    from mlflow.tracking import MlflowClient

    over = TINY + [f"output_dir={tmp_path}", "logging.mlflow=true", "logging.samples_every=2", "name=m"]
    cfg = load_config("default", over)
    assert train(cfg, stop_at=2) is None
    run_dir = tmp_path / "m"
    first_id = (run_dir / "mlflow_run_id").read_text()
    train(run_dir=run_dir, resume=True)
    assert (run_dir / "mlflow_run_id").read_text() == first_id, "the resumed run continues the same MLflow run"
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
    run = client.get_run(first_id)
    assert run.info.status == "FINISHED" and run.data.params["train.steps"] == "4"
    assert json.loads(run.data.params["algorithm.advantage"]) == "grpo"
    for key in ("reward/mean", "loss/grad_norm"):
        history = client.get_metric_history(first_id, f"rl/{key}")
        assert {m.step: m.value for m in history} == pytest.approx(rl_series(run_dir, key))
        assert sorted(m.step for m in history) == [1, 2, 3, 4]
    names = {a.path for a in client.list_artifacts(first_id)}
    assert {"report.html", "samples.jsonl", "summary.json", "curves.png", "config.yaml"} <= names
    summary = json.loads((run_dir / "summary.json").read_text())
    logged = json.loads(open(client.download_artifacts(first_id, "summary.json", str(tmp_path))).read())
    assert logged == summary


def wandb_records(run_dir):
    """Every record of the run's offline W&B files, parsed with wandb's own reader."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal.datastore import DataStore

    out = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        ds = DataStore()
        ds.open_for_scan(str(path))
        while (data := ds.scan_data()) is not None:
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(data)
            out.append(rec)
    return out


def test_wandb_offline_reads_back_history_config_summary_samples_and_report(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed: pip install -e '.[tracking]'")
    monkeypatch.setenv("WANDB_SILENT", "true")
    over = TINY + [f"output_dir={tmp_path}", "logging.wandb=true", "logging.samples_every=2", "name=w"]
    train(load_config("default", over))
    run_dir = tmp_path / "w"
    records = wandb_records(run_dir)
    kinds = [r.WhichOneof("record_type") for r in records]
    assert "history" in kinds and "config" in kinds and "summary" in kinds
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            item = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            rows.append(item)
    logged = {int(x["rl/step"]): x["rl/reward/mean"] for x in rows if "rl/reward/mean" in x}
    assert logged == pytest.approx(rl_series(run_dir, "reward/mean"))
    tables = [x["samples"] for x in rows if "samples" in x]
    assert tables and tables[-1]["_type"] == "table-file" and tables[-1]["nrows"] == 2 * 16
    config = {
        (i.key or "/".join(i.nested_key)): json.loads(i.value_json)
        for r in records
        if r.HasField("config")
        for i in r.config.update
    }
    assert config["train"]["value"]["steps"] == 4
    summary = json.loads((run_dir / "summary.json").read_text())
    final = {}
    for r in records:
        if r.HasField("summary"):
            final.update({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.summary.update})
    assert final["accuracy_after_rl"] == pytest.approx(summary["accuracy_after_rl"])
    artifacts = [r.artifact for r in records if r.HasField("artifact")]
    assert any(a.type == "report" and any(e.path == "report.html" for e in a.manifest.contents) for a in artifacts)


def test_a_missing_tracker_package_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(
        SinkError, match=r"logging.wandb=true needs the wandb package: pip install 'ascent\[tracking\]'"
    ):
        WandbSink(tmp_path, "x", {}, "p", "offline")
    assert main(["train", "default", f"output_dir={tmp_path}", "logging.wandb=true", "train.steps=1"]) == 2
    assert "needs the wandb package" in capsys.readouterr().err
