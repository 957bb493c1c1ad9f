"""`ascent compare`: the same task, the same warm-start checkpoint, several algorithm variants x seeds.

The method of "Tricks or Traps?" (Liu et al., 2025, arXiv:2508.08221): change ONE piece at a time and compare
on the same task from the same starting point. Layout of `compare/<name>/`:

    plan.json        the recipe, shared overrides, variants and seeds (a rerun must match it)
    warmstart/       one run that trains the shared warm start (train.steps=0)
    runs/<variant>__seed<k>/   an ordinary run directory per variant and seed
    results.json     per-run summaries and per-variant aggregates, with bootstrap intervals and differences
    table.md         held-out greedy accuracy, pass@1 and every pass@k as mean [95% bootstrap interval] over seeds,
                     the difference to the first variant (paired bootstrap over seeds, `*`: significant), s/step,
                     peak memory
    curves.png       held-out accuracy and training reward against RL step, mean over seeds
    pass_at_k.png    pass@k against k after RL, mean over seeds with its bootstrap interval as a band
    report.html      the table with 95% intervals, accuracy-vs-step and pass@k charts, links to each run's report

Every run is a subprocess `python -m ascent.cli train ...` (so runs cannot share state, and peak memory is
per run). A killed comparison resumes where it stopped: finished runs are skipped, interrupted ones are
continued from their latest checkpoint with `--resume`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ascent.app.report import write_comparison_report
from ascent.app.runs import make_private_dir, remove_marked_dir
from ascent.app.stats import LEVEL, RESAMPLES, SEED, bootstrap_difference, bootstrap_interval
from ascent.config.loader import ConfigError, check_run_name, load_config, parse_overrides
from ascent.logging import jsonsafe
from ascent.logging.metrics import read_metrics
from ascent.trainer.checkpoint import write_text_atomic
from ascent.typed import split_top_level


class CompareError(RuntimeError):
    """A run of the comparison failed; the message names it and shows the end of its output."""


@dataclass(frozen=True)
class Variant:
    """One arm of the comparison: a name and the overrides that define it."""

    name: str
    overrides: tuple[str, ...]


@dataclass
class Plan:
    """What a comparison runs; stored as plan.json so a resumed comparison checks it is the same one."""

    recipe: str
    overrides: list[str]
    variants: list[Variant]
    seeds: list[int]
    split_seed: int
    jobs: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self) -> dict[str, Any]:
        key = {
            "recipe": self.recipe,
            "overrides": self.overrides,
            "variants": [asdict(v) for v in self.variants],
            "seeds": self.seeds,
        }
        return json.loads(json.dumps(key))  # the form it has when read back from plan.json


def parse_vary(items: list[str]) -> list[Variant]:
    """`--vary KEY=V1,V2` (repeatable) -> the cartesian product of the values, one Variant each. Values are split
    at top-level commas only, so a piece spec with parameters is one value.

    >>> [v.name for v in parse_vary(["algorithm.advantage=grpo,rloo", "algorithm.loss=ppo_clip,gspo"])]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['advantage=grpo,loss=ppo_clip', 'advantage=grpo,loss=gspo',
     'advantage=rloo,loss=ppo_clip', 'advantage=rloo,loss=gspo']
    >>> [v.overrides for v in parse_vary(["algorithm.advantage=grpo, taco(alpha=0.5, floor=0.2)"])]
    [('algorithm.advantage=grpo',), ('algorithm.advantage=taco(alpha=0.5, floor=0.2)',)]
    """
    axes: list[list[tuple[str, str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ConfigError(f"--vary {item!r}: write KEY=V1,V2,... (e.g. algorithm.advantage=grpo,rloo)")
        axes.append([(key.strip(), v.strip()) for v in split_top_level(values) if v.strip()])
    out = []
    for combo in itertools.product(*axes):
        name = ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in combo)
        out.append(Variant(name, tuple(f"{k}={v}" for k, v in combo)))
    return out


def read_variants(path: str | Path) -> list[Variant]:
    """A YAML file mapping variant name -> {dotted.key: value} (for arms that change several keys)."""
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, (dict, type(None))) for v in raw.values()):
        raise ConfigError(f"{path}: expected a mapping of variant name -> {{key: value}}")
    value = lambda v: v if isinstance(v, str) else json.dumps(v)  # noqa: E731 - overrides are parsed as YAML
    return [Variant(str(name), tuple(f"{k}={value(v)}" for k, v in (over or {}).items())) for name, over in raw.items()]


def slug(name: str) -> str:
    """A directory-safe form of a variant name."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_") or "variant"


def check_variants(plan: Plan) -> None:
    """Every variant must give a valid config: fail before any training starts."""
    names = [v.name for v in plan.variants]
    if not plan.variants:
        raise ConfigError("nothing to compare: give --vary KEY=V1,V2 or --variants FILE")
    if len(set(map(slug, names))) != len(names):
        raise ConfigError(f"variant names must be distinct: {names}")
    for v in plan.variants:
        try:
            load_config(plan.recipe, plan.overrides + list(v.overrides))
        except ConfigError as err:
            raise ConfigError(f"variant {v.name!r}: {err}") from err


class Comparison:
    """Runs a Plan under `root`; `run()` is resumable."""

    def __init__(self, plan: Plan, root: Path, log: Callable[[str], None] = print) -> None:
        self.plan, self.root, self.log = plan, Path(root), log

    # -- plan ---------------------------------------------------------------------------------------
    def open(self, overwrite: bool) -> None:
        plan_file = self.root / "plan.json"
        if plan_file.exists():
            old = json.loads(plan_file.read_text())
            if old != self.plan.key() and not overwrite:
                raise ConfigError(
                    f"{self.root} holds a different comparison (plan.json differs); use another --name or --overwrite"
                )
            if old != self.plan.key():
                remove_marked_dir(self.root, "a comparison")
        make_private_dir(self.root, "comparison")
        write_text_atomic(plan_file, json.dumps(self.plan.key(), indent=2))

    # -- runs ---------------------------------------------------------------------------------------
    def base_cfg(self):
        return load_config(self.plan.recipe, self.plan.overrides)

    def threads(self) -> int:
        return max(1, (os.cpu_count() or 1) // self.plan.jobs)

    def command(self, run_dir: Path, overrides: list[str]) -> list[str]:
        """The `ascent` arguments of one run. `threads` is cpu_count / jobs unless the overrides set it: a
        `threads=` the user wrote wins (the resumed run then keeps the one its saved config has)."""
        own = any(o.split("=", 1)[0].strip() == "threads" for o in overrides)
        threads = [] if own else [f"threads={self.threads()}"]
        if (run_dir / "state.json").exists():
            return ["train", "--resume", str(run_dir), *threads]
        return [
            "train",
            self.plan.recipe,
            *threads,
            *overrides,
            f"name={run_dir.name}",
            f"output_dir={run_dir.parent}",
            "logging.progress=false",
            "--overwrite",
        ]

    def train(self, run_dir: Path, overrides: list[str]) -> None:
        """One `ascent train` subprocess; resumes a run directory that a killed comparison left behind."""
        if (run_dir / "summary.json").exists():
            return
        cmd = self.command(run_dir, overrides)
        make_private_dir(run_dir, "run")  # marked as ascent's: its stdout.txt does not make it a stranger's folder
        with open(run_dir / "stdout.txt", "a") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "ascent.cli", *cmd],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        if proc.returncode != 0 or not (run_dir / "summary.json").exists():
            tail = (run_dir / "stdout.txt").read_text().strip().splitlines()[-5:]
            raise CompareError(
                f"run {run_dir} failed (exit {proc.returncode}); its output ends:\n  "
                + "\n  ".join(tail)
                + "\nfix it and rerun the same command: finished runs are kept"
            )

    def warmstart_dir(self) -> Optional[Path]:
        """Train the shared warm start once (None when the recipe has none)."""
        cfg = self.base_cfg()
        if cfg.warmstart.init_from:
            return Path(cfg.warmstart.init_from).resolve()
        if not cfg.warmstart.steps:
            return None
        run_dir = self.root / "warmstart"
        self.log(f"warm start -> {run_dir}")
        self.train(
            run_dir,
            [
                *self.plan.overrides,
                "train.steps=0",
                "control.enabled=false",
                f"seed={self.plan.split_seed}",
                f"data.split_seed={self.plan.split_seed}",
            ],
        )
        return (run_dir / "warmstart").resolve()

    def run_dirs(self) -> list[tuple[Variant, int, Path]]:
        return [
            (v, s, self.root / "runs" / f"{slug(v.name)}__seed{s}") for v in self.plan.variants for s in self.plan.seeds
        ]

    def run(self) -> dict[str, Any]:
        """Train everything not yet done (jobs in parallel), then write results.json, table.md, curves.png."""
        start = self.warmstart_dir()
        shared = [*self.plan.overrides, f"data.split_seed={self.plan.split_seed}", "control.enabled=false"]
        if start is not None:
            shared.append(f"warmstart.init_from={start}")
        todo = [(v, s, d) for v, s, d in self.run_dirs() if not (d / "summary.json").exists()]
        self.log(f"{len(self.run_dirs()) - len(todo)} runs done, {len(todo)} to go, {self.plan.jobs} at a time")
        t0 = time.perf_counter()

        def one(item: tuple[Variant, int, Path]) -> None:
            v, seed, run_dir = item
            self.train(run_dir, [*shared, *v.overrides, f"seed={seed}"])
            summary = json.loads((run_dir / "summary.json").read_text())
            self.log(
                f"  {v.name} seed {seed}: accuracy {summary['accuracy_after_rl']:.3f} ({time.perf_counter() - t0:.0f}s)"
            )

        with ThreadPoolExecutor(max_workers=self.plan.jobs) as pool:
            list(pool.map(one, todo))
        return self.report()

    # -- results ------------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        runs = []
        for v, seed, run_dir in self.run_dirs():
            summary = json.loads((run_dir / "summary.json").read_text())
            runs.append({"variant": v.name, "seed": seed, "dir": str(run_dir), **summary, **eval_points(run_dir)})
        warm = self.root / "warmstart" / "summary.json"
        befores = [r["accuracy_before_rl"] for r in runs if "accuracy_before_rl" in r]
        baseline = (
            json.loads(warm.read_text()).get("accuracy_before_rl")
            if warm.exists()
            else (befores[0] if befores else None)
        )
        aggregates = aggregate_runs(runs, [v.name for v in self.plan.variants])
        results = {
            "plan": self.plan.key(),
            "warm_start_accuracy": baseline,
            "bootstrap": {"resamples": RESAMPLES, "level": LEVEL, "seed": SEED},
            "variants": aggregates,
            "runs": runs,
        }
        write_text_atomic(self.root / "results.json", jsonsafe.dumps(results, indent=2))
        write_text_atomic(self.root / "table.md", results_table(aggregates, baseline))
        plot_comparison(self.run_dirs(), self.root / "curves.png")
        plot_pass_at_k(aggregates, self.root / "pass_at_k.png")
        write_comparison_report(self.root, results)
        return results


def eval_points(run_dir: Path) -> dict[str, float]:
    """`accuracy_at_step_K` for every periodic held-out evaluation of the RL phase (learning speed)."""
    rows = read_metrics(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").exists() else []
    return {
        f"accuracy_at_step_{r['step']}": r["eval/accuracy"]
        for r in rows
        if r["phase"] == "rl" and r.get("eval/accuracy") is not None
    }


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample std (0 for one value).

    >>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)
    """
    m = sum(values) / len(values)
    sd = math.sqrt(sum((x - m) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, sd


def pass_k_of(key: str) -> Optional[int]:
    """k of a `pass@k_after_rl` key, else None.

    >>> pass_k_of("pass@16_after_rl"), pass_k_of("pass@4_control"), pass_k_of("accuracy_after_rl")
    (16, None, None)
    """
    m = re.fullmatch(r"pass@(\d+)_after_rl", key)
    return int(m.group(1)) if m else None


def bootstrapped_keys(keys: Any) -> list[str]:
    """The metrics that get bootstrap intervals and a significance test: greedy accuracy, every pass@k and every
    further grader's score (`eval.metrics`) after RL.

    >>> bootstrapped_keys({"score_meta_tags_after_rl", "pass@4_after_rl", "accuracy_after_rl", "tool_calls_after_rl"})
    ['accuracy_after_rl', 'pass@4_after_rl', 'score_meta_tags_after_rl']
    """
    passk = sorted((k for k in keys if pass_k_of(k) is not None), key=pass_k_of)
    scores = sorted(k for k in keys if k.startswith("score_") and k.endswith("_after_rl"))
    return (["accuracy_after_rl"] if "accuracy_after_rl" in keys else []) + passk + scores


def difference_to(base: list[dict[str, Any]], mine: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """mean(mine) - mean(base) of `key` over seeds with its bootstrap interval; paired by seed when both ran the same
    seeds (same seed: same data order and sampling), otherwise each side resampled on its own."""
    a = {r["seed"]: float(r[key]) for r in base if key in r}
    b = {r["seed"]: float(r[key]) for r in mine if key in r}
    paired = set(a) == set(b)
    seeds = sorted(a)
    left, right = ([a[s] for s in seeds], [b[s] for s in seeds]) if paired else (list(a.values()), list(b.values()))
    return asdict(bootstrap_difference(left, right, paired))


def aggregate_runs(runs: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Per variant: mean and std over seeds of every numeric summary field; for greedy accuracy and every pass@k
    after RL also the 95% bootstrap interval (`lo`, `hi`) and, after the first variant, `vs_first`: the difference
    to the first variant with its interval and whether it is significant."""
    out = []
    first = [r for r in runs if r["variant"] == order[0]] if order else []
    for name in order:
        mine = [r for r in runs if r["variant"] == name]
        keys = sorted(
            {k for r in mine for k, v in r.items() if isinstance(v, (int, float)) and k not in ("seed", "steps")}
        )
        agg: dict[str, Any] = {"variant": name, "seeds": [r["seed"] for r in mine]}
        for k in keys:
            values = [float(r[k]) for r in mine if k in r]
            m, sd = mean_std(values)
            agg[k] = {"mean": m, "std": sd}
        for k in bootstrapped_keys(keys):
            ci = bootstrap_interval([float(r[k]) for r in mine if k in r])
            agg[k].update(lo=ci.lo, hi=ci.hi)
        if name != order[0]:
            agg["vs_first"] = {
                k: difference_to(first, mine, k) for k in bootstrapped_keys(keys) if any(k in r for r in first)
            }
        out.append(agg)
    return out


def cell(a: dict[str, Any], key: str, digits: int = 3) -> str:
    """`mean [lo, hi]` (bootstrap interval) where the aggregate has one, else `mean ± std`; `*` after a pass@k whose
    difference to the first variant is significant; `–` when the variant lacks the metric.

    >>> cell({"pass@4_after_rl": {"mean": 0.7, "std": 0.1, "lo": 0.62, "hi": 0.78},
    ...       "vs_first": {"pass@4_after_rl": {"significant": True}}}, "pass@4_after_rl")
    '0.700 [0.620, 0.780] *'
    >>> cell({"peak_rss_mb": {"mean": 812.0, "std": 3.1}}, "peak_rss_mb", 0), cell({}, "peak_rss_mb")
    ('812 ± 3', '–')
    """
    if key not in a:
        return "–"
    m = a[key]
    if "lo" not in m:
        return f"{m['mean']:.{digits}f} ± {m['std']:.{digits}f}"
    star = " *" if pass_k_of(key) is not None and a.get("vs_first", {}).get(key, {}).get("significant") else ""
    return f"{m['mean']:.{digits}f} [{m['lo']:.{digits}f}, {m['hi']:.{digits}f}]{star}"


def diff_cell(d: Optional[dict[str, Any]]) -> str:
    """`+diff [lo, hi]`, and ` *` when the interval excludes 0.

    >>> diff_cell({"diff": 0.05, "lo": 0.01, "hi": 0.09, "significant": True}), diff_cell(None)
    ('+0.050 [+0.010, +0.090] *', '–')
    """
    if d is None:
        return "–"
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]" + (" *" if d["significant"] else "")


def differences_table(aggregates: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: per later variant, its difference to the first for every tested metric (empty without any)."""
    keys = bootstrapped_keys({k for a in aggregates for k in a.get("vs_first", {})})
    if not keys:
        return []
    first = aggregates[0]["variant"]
    head = ["variant", *[("greedy acc" if k == "accuracy_after_rl" else k.removesuffix("_after_rl")) for k in keys]]
    lines = [f"\nDifference to {first} (mean over seeds, 95% bootstrap interval; `*`: the interval excludes 0):\n"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in aggregates[1:]:
        vs = a.get("vs_first", {})
        lines.append("| " + " | ".join([a["variant"], *[diff_cell(vs.get(k)) for k in keys]]) + " |")
    unpaired = [a["variant"] for a in aggregates[1:] if not all(d["paired"] for d in a.get("vs_first", {}).values())]
    note = f"; unpaired (other seeds than {first}): {', '.join(unpaired)}" if unpaired else ""
    lines.append(f"\nDifferences: bootstrap over seeds, paired by seed (same seed: same data order){note}.")
    return lines


def results_table(aggregates: list[dict[str, Any]], warm: Optional[float]) -> str:
    """Markdown: one row per variant, the first variant being the baseline the deltas refer to; then the differences
    to it with their intervals (when the aggregates carry them, see `aggregate_runs`)."""
    pass_keys = [k for k in bootstrapped_keys({k for a in aggregates for k in a}) if k != "accuracy_after_rl"]
    early = sorted(
        {k for a in aggregates for k in a if k.startswith("accuracy_at_step_")}, key=lambda k: int(k.rsplit("_", 1)[1])
    )[:1]
    agent = [
        k for k in ("tool_calls_after_rl", "unsupported_answer_rate_after_rl") if any(k in a for a in aggregates)
    ]  # agent tasks
    head = [
        "variant",
        "greedy acc",
        "Δ vs " + aggregates[0]["variant"],
        *[f"acc @ step {k.rsplit('_', 1)[1]}" for k in early],
        *[k.removesuffix("_after_rl") for k in pass_keys],
        *[k.removesuffix("_after_rl").replace("_", " ") for k in agent],
        *(["tool calls vs " + aggregates[0]["variant"]] if "tool_calls_after_rl" in agent else []),
        "s/step",
        "peak RSS MiB",
        "seeds",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = aggregates[0]["accuracy_after_rl"]["mean"]
    for a in aggregates:
        vs = a.get("vs_first", {}).get("accuracy_after_rl")
        delta = diff_cell(vs) if vs else f"{a['accuracy_after_rl']['mean'] - base:+.3f}"
        calls = []
        if "tool_calls_after_rl" in agent:
            b, c = (
                aggregates[0].get("tool_calls_after_rl", {}).get("mean"),
                a.get("tool_calls_after_rl", {}).get("mean"),
            )
            calls = [f"{100 * (c - b) / b:+.0f}%" if b and c is not None else "–"]
        cells = [
            a["variant"],
            cell(a, "accuracy_after_rl"),
            delta,
            *[cell(a, k) for k in early],
            *[cell(a, k) for k in pass_keys],
            *[cell(a, k, 2) for k in agent],
            *calls,
            cell(a, "seconds_per_rl_step", 3),
            cell(a, "peak_rss_mb", 0),
            str(len(a["seeds"])),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += differences_table(aggregates)
    if any("lo" in a.get("accuracy_after_rl", {}) for a in aggregates):
        lines.append(
            f"\n[lo, hi]: {LEVEL:.0%} percentile bootstrap interval of the mean over seeds "
            f"({RESAMPLES:,} resamples, seed {SEED})."
        )
        if min(len(a["seeds"]) for a in aggregates) < 5:
            lines.append("Fewer than 5 seeds: the intervals are too narrow to trust; run more seeds (--seeds).")
    if warm is not None:
        lines.append(f"\nWarm start (the shared starting checkpoint): greedy accuracy {warm:.3f}.")
    return "\n".join(lines) + "\n"


def plot_pass_at_k(aggregates: list[dict[str, Any]], out: Path) -> Optional[Path]:
    """pass@k after RL against k (log scale): per variant the mean over seeds, its bootstrap interval as a band.
    Nothing is written when no variant was evaluated for pass@k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [(a["variant"], [k for k in bootstrapped_keys(set(a)) if pass_k_of(k) is not None], a) for a in aggregates]
    if not any(keys for _, keys, _ in curves):
        return None
    many = len(curves) > 8  # a legend of many arms goes beside the axes, in columns, not over the curves
    fig, ax = plt.subplots(figsize=(7 + 2.2 * (1 + len(curves) // 16) if many else 7, 5))
    colours = plt.get_cmap("tab10" if len(curves) <= 10 else "tab20").colors  # tab10: bands stay distinguishable
    for i, (name, keys, a) in enumerate(curves):
        if not keys:
            continue
        style = {"color": colours[i % len(colours)], "linestyle": ("-", "--", ":")[(i // len(colours)) % 3]}
        ks = [pass_k_of(k) for k in keys]
        ax.plot(ks, [a[k]["mean"] for k in keys], marker="o", label=name, **style)
        if all("lo" in a[k] for k in keys):
            ax.fill_between(
                ks, [a[k]["lo"] for k in keys], [a[k]["hi"] for k in keys], color=style["color"], alpha=0.15
            )
    ax.set_xscale("log", base=2)
    ticks = sorted({pass_k_of(k) for _, keys, _ in curves for k in keys})
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.set(
        xlabel="k (samples per prompt)",
        ylabel="pass@k",
        title=f"pass@k after RL (mean over seeds, {LEVEL:.0%} bootstrap band)",
    )
    ax.grid(alpha=0.3, which="both")
    if many:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + len(curves) // 16)
    else:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_comparison(run_dirs: list[tuple[Variant, int, Path]], out: Path) -> None:
    """Held-out accuracy (eval points and the final evaluation) and training reward, mean over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    names = list(dict.fromkeys(v.name for v, _, _ in run_dirs))
    colours = plt.get_cmap("tab20").colors
    for i, name in enumerate(names):
        style = {"color": colours[i % len(colours)], "linestyle": ("-", "--", ":")[(i // len(colours)) % 3]}
        acc: dict[int, list[float]] = {}
        reward: dict[int, list[float]] = {}
        for v, _, d in run_dirs:
            if v.name != name or not (d / "metrics.jsonl").exists():
                continue
            rows = [r for r in read_metrics(d / "metrics.jsonl") if r["phase"] == "rl"]
            for r in rows:
                if r.get("eval/accuracy") is not None:
                    acc.setdefault(r["step"], []).append(r["eval/accuracy"])
                if r.get("reward/mean") is not None:
                    reward.setdefault(r["step"], []).append(r["reward/mean"])
            summary = d / "summary.json"
            if summary.exists() and rows:
                final = json.loads(summary.read_text())
                if "accuracy_before_rl" in final:  # absent with eval.before=false
                    acc.setdefault(0, []).append(final["accuracy_before_rl"])
                acc.setdefault(rows[-1]["step"], []).append(final["accuracy_after_rl"])
        if acc:
            steps = sorted(acc)
            axes[0].plot(steps, [sum(acc[s]) / len(acc[s]) for s in steps], marker="o", label=name, **style)
        if reward:
            steps = sorted(reward)
            vals = [sum(reward[s]) / len(reward[s]) for s in steps]
            k = max(1, len(vals) // 20)  # moving average over ~5% of the run
            smooth = [
                sum(vals[max(0, i - k + 1) : i + 1]) / len(vals[max(0, i - k + 1) : i + 1]) for i in range(len(vals))
            ]
            axes[1].plot(steps, smooth, label=name, **style)
    axes[0].set(
        xlabel="RL step (0: the shared warm start)",
        ylabel="held-out greedy accuracy",
        title="held-out accuracy (mean over seeds)",
    )
    axes[1].set(xlabel="RL step", ylabel="reward", title="training reward (mean over seeds, smoothed)")
    for ax in axes:
        ax.grid(alpha=0.3)
    if names:
        if len(names) > 8:
            axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + len(names) // 16)
        else:
            axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def compare(
    recipe: str,
    overrides: list[str],
    vary: list[str],
    variants_file: Optional[str],
    seeds: int,
    name: Optional[str],
    jobs: int,
    output_dir: str = "compare",
    overwrite: bool = False,
) -> dict[str, Any]:
    """Build the plan, check every variant's config, run what is missing, write the results."""
    variants = (read_variants(variants_file) if variants_file else []) + (parse_vary(vary) if vary else [])
    parse_overrides(overrides)  # fail early on a malformed override
    base = load_config(recipe, overrides)
    if base.classic is not None:
        raise ConfigError(
            f"ascent compare tables held-out accuracy of language-model runs; {recipe!r} is a classic Gymnasium run: "
            "run its seeds with `ascent train RECIPE seed=N name=...` (summary.json final_return) or "
            "benchmarks/classic_vs_sb3.py"
        )
    if seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {seeds}")
    plan = Plan(recipe, list(overrides), variants, [base.seed + i for i in range(seeds)], base.seed, max(1, jobs))
    check_variants(plan)
    label = name or slug(f"{Path(recipe).stem}-" + "-".join(v.name for v in variants[:3]))[:80]
    check_run_name(label, "--name")
    comparison = Comparison(plan, Path(output_dir) / label)
    comparison.open(overwrite)
    results = comparison.run()
    print((comparison.root / "table.md").read_text())
    print(f"results in {comparison.root}/ (results.json, table.md, curves.png, pass_at_k.png, report.html)")
    return results
