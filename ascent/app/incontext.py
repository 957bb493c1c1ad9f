"""In-context RL runs: `ascent train ad-darkroom` (histories, training and in-context evaluation in one run) and
`ascent eval-in-context RUN_DIR` (the saved models, evaluated again on held-out tasks with frozen weights).

A run directory holds config.yaml (the `incontext:` section), models/<arm>-seed<S>.safetensors, returns.npz (every
seed's (tasks, episodes) returns per arm), summary.json and curves.png. summary.json:

    return_optimal              mean return of the optimal policy on the held-out tasks
    return_first5_<arm>         mean return over in-context episodes 1-5 (held-out tasks, then seeds)
    return_last5_<arm>          the same over the last 5 episodes (AD's bar: >= 0.8 of optimal)
    return_*_<arm>_ci95         95% t-interval over seeds
    curves                      per arm, per episode index: [mean, lo, hi] over seeds
    seconds_<arm>               [data, training, evaluation] seconds, summed over seeds
    loss_last_<arm>             training loss over the last 50 steps, mean over seeds
    train_seconds, threads

The arms are named in the config (`ad`, `ed`, `ad_eps` by default; `source` is the first arm's source algorithm
run on the held-out tasks itself).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
import yaml

from ascent.app.runs import make_private_dir, remove_marked_dir
from ascent.config.loader import check_run_name
from ascent.incontext.experiment import InContextConfig, arm_specs, run_seed, summarise
from ascent.incontext.model import InContextTransformer
from ascent.incontext.recipes import is_incontext_recipe, recipe_path  # noqa: F401  (re-exported)
from ascent.incontext.tasks import make_family
from ascent.incontext.train import evaluate_in_context
from ascent.typed import ConfigError, build


def set_key(raw: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        raw = raw.setdefault(k, {})
    raw[keys[-1]] = value


def load(recipe: str, overrides: list[str]) -> tuple[str, str, InContextConfig]:
    """(name, output_dir, config) of an in-context recipe with `key=value` overrides (`incontext.` optional)."""
    path = recipe_path(recipe)
    raw = yaml.safe_load(path.read_text()) or {}
    for item in overrides:
        key, _, text = item.partition("=")
        key = key if key.split(".")[0] in ("name", "output_dir", "incontext") else f"incontext.{key}"
        set_key(raw, key, yaml.safe_load(text) if text else text)
    unknown = set(raw) - {"name", "output_dir", "incontext", "description"}
    if unknown:
        raise ConfigError(
            f"unknown top-level key(s) {sorted(unknown)} in an in-context recipe; valid: name, output_dir, incontext"
        )
    cfg = build(InContextConfig, raw.get("incontext"), prefix="incontext")
    return str(raw.get("name", path.stem)), str(raw.get("output_dir", "runs")), cfg


def to_raw(cfg: InContextConfig) -> dict:
    import dataclasses

    return dataclasses.asdict(cfg)


def train_incontext(recipe: str, overrides: list[str], overwrite: bool = False) -> dict:
    """Run an in-context recipe into output_dir/name; returns the summary."""
    name, out, cfg = load(recipe, overrides)
    check_run_name(name)  # one folder under output_dir: name=.. with --overwrite must not delete the project
    run_dir = Path(out) / name
    if (run_dir / "summary.json").exists() or (run_dir / "config.yaml").exists():
        if not overwrite:
            raise ConfigError(f"{run_dir} already holds a run: pass --overwrite or choose another name=...")
        remove_marked_dir(run_dir, "a run")
    make_private_dir(run_dir, "run")
    (run_dir / "models").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"name": name, "incontext": to_raw(cfg)}, sort_keys=False))
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    per_seed = []
    for seed in cfg.seeds:
        models: dict[str, InContextTransformer] = {}
        per_seed.append(run_seed(cfg, seed, models=models))
        for arm, model in models.items():
            from safetensors.torch import save_file

            save_file(model.state_dict(), str(run_dir / "models" / f"{arm}-seed{seed}.safetensors"))
    summary = summarise(cfg, per_seed)
    summary["train_seconds"] = round(time.perf_counter() - t0, 1)
    summary["threads"] = torch.get_num_threads()
    np.savez(
        run_dir / "returns.npz",
        **{
            f"{k}-seed{s}": np.asarray(v)
            for s, d in zip(cfg.seeds, per_seed)
            for k, v in d.items()
            if not k.startswith(("loss_", "seconds_"))
        },
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(summary, run_dir / "curves.png")
    print_table(summary)
    return summary


def evaluate_run(run_dir: Path, overrides: list[str]) -> dict:
    """`ascent eval-in-context RUN_DIR`: every saved model, evaluated again on the held-out tasks."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists() or not (run_dir / "models").is_dir():
        raise ConfigError(f"{run_dir} is not an in-context run directory (no config.yaml and models/)")
    _, _, cfg = load(str(run_dir / "config.yaml"), overrides)
    torch.set_num_threads(cfg.threads)
    family = make_family(cfg.family)
    test_tasks = family.tasks("test", cfg.eval_tasks, 0)
    grid = int(np.sqrt(family.num_obs)) if family.name != "bandit" else 0
    per_seed = []
    for seed in cfg.seeds:
        out = {}
        for arm, _ in arm_specs(cfg):
            from safetensors.torch import load_file

            model = InContextTransformer(
                family.num_obs, family.num_actions, family.horizon, cfg.train.context, cfg.model, grid=grid
            )
            model.load_state_dict(load_file(str(run_dir / "models" / f"{arm}-seed{seed}.safetensors")))
            out[arm] = evaluate_in_context(model, family, test_tasks, cfg.eval_episodes, seed + 1000, cfg.greedy)
        per_seed.append(out)
    import dataclasses

    summary = summarise(dataclasses.replace(cfg, source_control=False), per_seed)
    print_table(summary)
    return summary


def print_table(summary: dict) -> None:
    """Return per in-context episode index, one column per arm: mean over seeds [95% interval]."""
    arms = list(summary["curves"])
    print(f"optimal return on the held-out tasks: {summary['return_optimal']:.2f}")
    print("episode  " + "  ".join(f"{a:>22}" for a in arms))
    n = len(summary["curves"][arms[0]])
    for e in range(n):
        cells = [summary["curves"][a][e] for a in arms]
        print(f"{e + 1:>7}  " + "  ".join(f"{m:7.2f} [{lo:6.2f},{hi:6.2f}]" for m, lo, hi in cells))


def plot(summary: dict, path: Path, title: Optional[str] = None) -> None:
    """Return per in-context episode with 95% bands, one line per arm, the optimal return dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, pts in summary["curves"].items():
        a = np.asarray(pts)
        x = np.arange(1, len(a) + 1)
        ax.plot(x, a[:, 0], label=arm)
        ax.fill_between(x, a[:, 1], a[:, 2], alpha=0.2)
    ax.axhline(summary["return_optimal"], ls="--", c="k", lw=1, label="optimal")
    ax.set_xlabel("in-context episode (held-out tasks, frozen weights)")
    ax.set_ylabel("return")
    ax.set_title(title or summary["family"])
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
