"""`ascent eval` beyond run directories: any Hugging Face model folder (a base model, an exported run, a model the
user brings) or a recipe's own starting model, on any task, with both graders, pass@k and mean completion length.

    ascent eval runs/export --task gsm8k                          # an exported run on GSM8K test
    ascent eval --recipe smollm2-gsm8k --by steps --out base.json  # the recipe's base model, per step count
    ascent eval path/to/hf_folder --task "hf(path=data.jsonl, prompt=question, answer=answer)" eval.pass_k=8

What is evaluated is configured as a run would be: a recipe (`--recipe`, default `default`) gives the task,
prompt encoding, sampling and evaluation settings; a model folder replaces its model (`model.source=hf`, no LoRA:
an exported run's adapters are merged), and an export's `ascent_export.json` supplies how that run encoded prompts
(chat template, system prompt) and its completion length; `--task SPEC` (the same specs as `data.task`) replaces
the task; key=value overrides come last. The evaluation is the trainer's own (`Evaluator`), so on an exported run
with the run's settings it gives the run's final evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.app.pipeline import make_evaluator, new_policy, seed_everything
from ascent.app.runs import RunDirError
from ascent.config.loader import load_config
from ascent.config.schema import RunConfig
from ascent.data.prompts import PromptEncoder
from ascent.logging import jsonsafe
from ascent.policy.model import Policy
from ascent.rollout.types import SamplingSettings
from ascent.runtime.memory import tune_malloc
from ascent.tasks import load_task
from ascent.trainer.checkpoint import write_text_atomic
from ascent.trainer.evaluate import Evaluator, breakdown

MANIFEST = "ascent_export.json"  # written by ascent.app.export next to an exported model


def is_model_folder(path: Path) -> bool:
    """A plain Hugging Face model folder (it holds config.json)."""
    return (Path(path) / "config.json").is_file()


def model_overrides(folder: Optional[Path], task: Optional[str]) -> list[str]:
    """The key=value overrides that point a recipe at `folder` (and its export manifest) and at `task`."""
    out: list[str] = []
    if folder is not None:
        folder = Path(folder)
        if not is_model_folder(folder):
            raise RunDirError(
                f"{folder} is neither a run directory nor a checkpoint inside one (no config.yaml found), "
                "nor a Hugging Face model folder (no config.json)"
            )
        out += ["model.source=hf", f"model.path={json.dumps(str(folder.resolve()))}", "model.lora.enabled=false"]
        manifest = folder / MANIFEST
        if manifest.is_file():
            m = json.loads(manifest.read_text())
            out += [f"data.chat_template={json.dumps(m['chat_template'])}"]
            out += [f"data.system_prompt={json.dumps(m['system_prompt'])}"]
            out += [f"rollout.max_new_tokens={int(m['max_new_tokens'])}"]
    if task is not None:
        out += [f"data.task={task}", "data.train=null", "data.eval=null"]
    return out


def model_config(folder: Optional[Path], recipe: Optional[str], task: Optional[str], overrides: list[str]) -> RunConfig:
    """The checked config of an evaluation: recipe < model folder and its manifest < `task` < overrides."""
    return load_config(recipe or "default", model_overrides(folder, task) + list(overrides))


def build_evaluator(cfg: RunConfig) -> tuple[Evaluator, Policy]:
    """The task, policy and held-out evaluator `cfg` describes, built as a run builds them."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    tune_malloc(cfg.malloc)
    seed_everything(cfg.seed)
    task = load_task(cfg.data, cfg.seed if cfg.data.split_seed is None else cfg.data.split_seed)
    policy = new_policy(cfg, task)
    encoder = PromptEncoder(policy.tokenizer, cfg.data.chat_template, cfg.data.system_prompt)
    r = cfg.rollout
    settings = SamplingSettings(
        r.max_new_tokens, policy.eos_id, policy.pad_id, r.temperature, r.top_p, r.top_k, r.ignore_eos
    )
    return make_evaluator(cfg, task, encoder, settings), policy


def run_evaluation(evaluator: Evaluator, policy: Policy, cfg: RunConfig, by: Optional[str] = None) -> dict[str, Any]:
    """The run's evaluation (`ascent.app.pipeline.evaluate`: greedy accuracy with both graders, completion length,
    pass@k at the rollout temperature from the run seed), plus a breakdown by the rows' field `by`."""
    result, ok, loose = evaluator.report(policy, cfg.eval.pass_k, cfg.rollout.temperature or 1.0, cfg.seed)
    out: dict[str, Any] = {"rows": len(evaluator.rows), **result}
    if by:
        out[f"by_{by}"] = breakdown(evaluator.rows, ok, loose, by, option="--by")
    return out


def evaluate_model(cfg: RunConfig, by: Optional[str] = None) -> dict[str, Any]:
    """Evaluate the model `cfg` names on its task (see the module docstring)."""
    evaluator, policy = build_evaluator(cfg)
    return {
        "model": cfg.model.path or cfg.model.source,
        "task": cfg.data.task,
        **run_evaluation(evaluator, policy, cfg, by),
    }


def print_table(result: dict[str, Any]) -> None:
    """The evaluation as a table on stderr (stdout carries the JSON): overall metrics, then one line per group of a
    breakdown."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result.get('model', '')} on {result.get('task', '')}")
    table.add_column("rows")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.items():
        if isinstance(value, float):
            table.add_row("all", key, f"{value:.4f}")
    for key, groups in result.items():
        if key.startswith("by_"):
            for group, entry in groups.items():
                metrics = ", ".join(f"{k} {v:.4f}" for k, v in entry.items() if k != "n")
                table.add_row(f"{key[3:]}={group} (n={entry['n']})", "", metrics)
    Console(stderr=True, highlight=False).print(table)


def write_result(result: dict[str, Any], out: Optional[Path]) -> None:
    """Write the result as JSON to `out` (atomically) when given."""
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(Path(out), jsonsafe.dumps(result, indent=2) + "\n")
