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


def read_wandb_log(data: bytes) -> list[bytes]:
    """The records of a .wandb file: a 7-byte header (":W&B", magic 0xBEE1, version), then the LevelDB log
    format — 32 KiB blocks of chunks, each with a 7-byte header (CRC-32C, length, type: 1 full, 2 first,
    3 middle, 4 last). wandb >= 0.20 writes it from Go and ships no Python reader, so the test reads it here."""
    assert data[:4] == b":W&B" and data[4:6] == b"\xe1\xbe", "not a W&B transaction log"
    pos, block, records, parts = 7, 32768, [], []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            records.append(chunk)
        elif kind == 2:
            parts = [chunk]
        elif kind == 3:
            parts.append(chunk)
        elif kind == 4:
            records.append(b"".join(parts + [chunk]))
    return records


def wandb_records(run_dir):
    """Every record of the run's offline W&B files, as wandb's protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2

    out = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        for data in read_wandb_log(path.read_bytes()):
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
    assert "history" in kinds and "run" in kinds and "summary" in kinds
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            item = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            rows.append(item)
    logged = {int(x["rl/step"]): x["rl/reward/mean"] for x in rows if "rl/reward/mean" in x}
    assert logged == pytest.approx(rl_series(run_dir, "reward/mean"))
    tables = [x for x in rows if x.get("samples/_type") == "table-file"]
    assert tables and tables[-1]["samples/nrows"] == 2 * 16  # steps 2 and 4, 16 samples each
    (table_file,) = run_dir.glob(f"wandb/offline-run-*/files/{tables[-1]['samples/path']}")
    table = json.loads(table_file.read_text())
    logged_samples = [dict(zip(table["columns"], row)) for row in table["data"]]
    ours = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [(s["step"], s["completion"], s["reward"]) for s in logged_samples] == [
        (s["step"], s["completion"], s["reward"]) for s in ours
    ]
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    config = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert (config["train"].get("value") or config["train"])["steps"] == 4
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
