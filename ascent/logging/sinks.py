"""Experiment trackers beside metrics.jsonl: Weights & Biases (`logging.wandb=true`) and MLflow
(`logging.mlflow=true`).

Both log every metric line as `<phase>/<metric>` against that phase's own step (warm start, RL and control
each count from 1), the resolved config, and at the end of the run the summary, the sample log as a table and
report.html as an artifact. Both work without a network: W&B in offline mode by default
(`logging.wandb_mode`; `wandb sync RUN_DIR/wandb/offline-run-*` uploads later), MLflow to a local file store
under the run directory (MLflow 3 keeps that store in maintenance mode; ascent sets its opt-out
`MLFLOW_ALLOW_FILE_STORE=true`) unless `logging.mlflow_uri` names a server or a
database. A resumed run continues the same W&B run
and the same MLflow run (their ids are kept in the run directory).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any, Optional


class SinkError(RuntimeError):
    """A tracker was asked for but cannot be used (package missing)."""


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def _import(name: str, extra: str):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise SinkError(f"logging.{extra}=true needs the {name} package: pip install 'ascent[tracking]'") from exc


class WandbSink:
    """One W&B run per ascent run (offline by default)."""

    def __init__(self, run_dir: Path, name: str, config: dict[str, Any], project: str, mode: str) -> None:
        wandb = _import("wandb", "wandb")
        self.wandb = wandb
        id_file = Path(run_dir) / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
        id_file.write_text(run_id)
        self.run = wandb.init(
            project=project,
            name=name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
            mode=mode,
            settings=wandb.Settings(silent=True, console="off"),
        )
        self.phases: set[str] = set()

    def log(self, phase: str, step: int, metrics: dict[str, Optional[float]]) -> None:
        if phase not in self.phases:  # each phase's metrics against its own step counter
            self.run.define_metric(f"{phase}/step")
            self.run.define_metric(f"{phase}/*", step_metric=f"{phase}/step")
            self.phases.add(phase)
        row = {f"{phase}/{k}": v for k, v in metrics.items() if v is not None}
        self.run.log({f"{phase}/step": step, **row})

    def finish(self, run_dir: Path, summary: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        self.run.summary.update(summary)
        if samples:
            cols = [
                "phase",
                "step",
                "group",
                "sample",
                "reward",
                "advantage",
                "completion_tokens",
                "prompt",
                "completion",
            ]
            self.run.log({"samples": self.wandb.Table(columns=cols, data=[[s.get(c) for c in cols] for s in samples])})
        report = Path(run_dir) / "report.html"
        if report.exists():
            art = self.wandb.Artifact(f"report-{self.run.id}", type="report")
            art.add_file(str(report))
            self.run.log_artifact(art)

    def close(self) -> None:
        self.run.finish()
        if self.wandb.run is None:
            # finish() can return before wandb-core has flushed the offline transaction log; teardown waits for
            # it. Its atexit hook would too, but not in a multiprocessing child (`ascent compare --jobs N`),
            # which leaves through os._exit, nor for a caller reading the run's files right after train().
            self.wandb.teardown()


class MlflowSink:
    """One MLflow run per ascent run, through `MlflowClient` (no global tracking state is touched)."""

    def __init__(self, run_dir: Path, name: str, config: dict[str, Any], uri: str, experiment: str) -> None:
        tracking = _import("mlflow.tracking", "mlflow")
        entities = _import("mlflow.entities", "mlflow")
        self.Metric, self.Param = entities.Metric, entities.Param
        if not uri:  # MLflow 3.x keeps the file store in maintenance mode behind this opt-out; it still works
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.uri = uri or (Path(run_dir) / "mlruns").resolve().as_uri()
        self.client = tracking.MlflowClient(tracking_uri=self.uri)
        got = self.client.get_experiment_by_name(experiment)
        exp_id = got.experiment_id if got is not None else self.client.create_experiment(experiment)
        id_file = Path(run_dir) / "mlflow_run_id"
        if id_file.exists():
            self.run_id = id_file.read_text().strip()
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            self.run_id = self.client.create_run(exp_id, run_name=name).info.run_id
            id_file.write_text(self.run_id)
            params = [self.Param(k[:250], json.dumps(v)[:6000]) for k, v in _flat(config).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
                self.client.log_batch(self.run_id, params=params[i : i + 100])

    def log(self, phase: str, step: int, metrics: dict[str, Optional[float]]) -> None:
        now = int(time.time() * 1000)
        batch = [self.Metric(f"{phase}/{k}", float(v), now, step) for k, v in metrics.items() if v is not None]
        for i in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[i : i + 1000])

    def finish(self, run_dir: Path, summary: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        self.client.log_dict(self.run_id, summary, "summary.json")
        for name in ("report.html", "samples.jsonl", "samples.1.jsonl", "curves.png", "config.yaml"):
            if (Path(run_dir) / name).exists():
                self.client.log_artifact(self.run_id, str(Path(run_dir) / name))

    def close(self) -> None:
        self.client.set_terminated(self.run_id)
