"""The multi-turn agentic RL recipe study (Wang & Ammanabrolu 2025, arXiv:2510.01132, meow-tea-taro) as a table of
its factors on ascent's TextWorld games.

The paper splits multi-turn agent RL into three pillars and ablates each: the environment (state/action space and
solution length), the reward (dense turn-level vs sparse) and the policy (biased PPO/GRPO vs unbiased RLOO; the
SFT:RL split of a fixed budget). Here every arm starts from ONE warm start of the `textworld` recipe (the same base
weights; `--base`), runs the recipe's RL for `--steps` steps, and is judged by its held-out win rate (greedy). Per
seed the arms differ only in the factor; seeds change RL's sampling and data order. Arms (`ARMS`):

- `grpo_sparse`: the recipe (GRPO, reward `game_won`), with its control: continued imitation of the scripted player
  on as many demonstrations as RL plays episodes (`warmstart.batch_size` = RL's episodes per step), the SFT-only
  split of the same budget;
- `rloo_sparse`: RLOO instead of GRPO (`algorithm.advantage=rloo`);
- `grpo_dense`, `rloo_dense`: the dense turn-level reward: the game's progress along its shortest plan each turn
  (`data.task.textworld.reward=progress`), summed into the sequence reward `game_progress` as the paper's verl
  sums turn rewards for GRPO/RLOO.

Factors (`FACTORS`): each a paired difference over seeds (arm - control) with a 95% paired bootstrap interval
(`ascent.app.stats`): reward (dense - sparse) under GRPO and under RLOO, policy (GRPO - RLOO) under sparse and dense
rewards, the SFT:RL split (the recipe's last `steps` x 64 episodes spent on RL vs on more imitation), and the
environment: RL's gain on the small games it trained on minus its gain on held-out medium games (4 rooms, 8 objects, a
4-step quest; never trained on), and the gain on medium games alone (does training on simple games transfer).

    ascent train textworld name=study-base output_dir=W data.num_train=120 data.num_eval=40 warmstart.steps=600 \\
        train.steps=0 control.enabled=false threads=1
    python benchmarks/agent_recipe_study.py --base W/study-base/warmstart --work W/study --seeds 5 --steps 15
    python benchmarks/agent_recipe_study.py --work W/study --seeds 5 --summarize   # the table from finished runs

Runs are `ascent train textworld` subprocesses, one at a time, seeds outer and arms inner (a cut-short study has
whole seeds); a run whose summary.json exists is not rerun. `--plan` prints the commands only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.app.stats import bootstrap_difference  # noqa: E402

RECIPE = "textworld"
SHARED = (
    "threads=1",
    "data.num_train=120",
    "data.num_eval=40",
    "eval.reward=game_won",
    "warmstart.batch_size=64",
    "logging.progress=false",
)
"""Overrides every arm shares: the study's game pool, held-out win rate as the metric whatever the training reward,
and imitation batches of 64 demonstrations (the warm start is loaded, so this sizes only the control: RL plays 8
prompts x 8 samples = 64 episodes a step)."""
DENSE = ("data.task.textworld.reward=progress", "reward=game_progress")
ARMS: dict[str, tuple[str, ...]] = {
    "grpo_sparse": ("algorithm.advantage=grpo", "reward=game_won", "control.enabled=true"),
    "rloo_sparse": ("algorithm.advantage=rloo", "reward=game_won", "control.enabled=false"),
    "grpo_dense": ("algorithm.advantage=grpo", *DENSE, "control.enabled=false"),
    "rloo_dense": ("algorithm.advantage=rloo", *DENSE, "control.enabled=false"),
}
"""Arm name -> its overrides on top of SHARED (the recipe keeps ppo_clip, token-mean, 8 samples per prompt)."""


@dataclass(frozen=True)
class Factor:
    """One row of the table: the paired difference arm - control of one metric each, per seed."""

    pillar: str
    name: str
    arm: tuple[str, str]
    """(arm name, metric key) of the side the paper favours."""
    control: tuple[str, str]
    claim: str
    """The paper's claim, in a few words."""


AFTER = "accuracy_after_rl"
FACTORS = (
    Factor("reward", "dense - sparse (GRPO)", ("grpo_dense", AFTER), ("grpo_sparse", AFTER), "dense turn rewards help"),
    Factor("reward", "dense - sparse (RLOO)", ("rloo_dense", AFTER), ("rloo_sparse", AFTER), "dense turn rewards help"),
    Factor("policy", "GRPO - RLOO (sparse)", ("grpo_sparse", AFTER), ("rloo_sparse", AFTER), "biased beats unbiased"),
    Factor("policy", "GRPO - RLOO (dense)", ("grpo_dense", AFTER), ("rloo_dense", AFTER), "biased beats unbiased"),
    Factor(
        "policy",
        "SFT+RL - SFT only (equal episodes)",
        ("grpo_sparse", AFTER),
        ("grpo_sparse", "accuracy_control"),
        "some of a fixed budget on RL beats all on SFT",
    ),
    Factor(
        "environment",
        "RL gain: small - medium games",
        ("grpo_sparse", "gain_small"),
        ("grpo_sparse", "gain_medium"),
        "RL gains shrink as games grow",
    ),
    Factor(
        "environment",
        "medium games: after - before RL",
        ("grpo_sparse", "medium_after"),
        ("grpo_sparse", "medium_before"),
        "training on simple games transfers to harder ones",
    ),
)


def arm_overrides(arm: str, seed: int, base: str, steps: int, work: Path) -> list[str]:
    """The `ascent train` arguments of one arm and seed: the recipe, SHARED, the arm's own keys, the base warm
    start, RL's steps (one checkpoint at the end) and the run's name and folder."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; valid: {', '.join(ARMS)}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return [
        RECIPE,
        *SHARED,
        *ARMS[arm],
        f"warmstart.init_from={base}",
        f"train.steps={steps}",
        f"train.checkpoint_every={steps}",
        f"seed={seed}",
        f"name={run_name(arm, seed)}",
        f"output_dir={work}",
    ]


def run_name(arm: str, seed: int) -> str:
    return f"{arm}-s{seed}"


def record(summary: dict[str, Any], medium: Optional[dict[str, float]] = None) -> dict[str, float]:
    """The metrics of one run the factors read: its summary's accuracies, RL's gain on the small games and, with the
    medium-game evaluation {before, after}, the same on medium games."""
    out = {k: float(summary[k]) for k in (AFTER, "accuracy_before_rl", "accuracy_control") if k in summary}
    out["gain_small"] = out[AFTER] - out["accuracy_before_rl"]
    if medium is not None:
        out |= {"medium_before": medium["before"], "medium_after": medium["after"]}
        out["gain_medium"] = medium["after"] - medium["before"]
    return out


def factor_table(records: dict[str, dict[int, dict[str, float]]], factors=FACTORS) -> list[dict[str, Any]]:
    """Per factor, over the seeds both sides have: the two means and the paired difference (arm - control) with its
    95% bootstrap interval; `shown` is "yes" when the interval is above 0, "opposite" below 0, else "not shown".
    `records[arm][seed]` holds `record`'s metrics; a factor with no complete seed is left out."""
    rows = []
    for f in factors:
        (a_arm, a_key), (c_arm, c_key) = f.arm, f.control
        seeds = sorted(
            s
            for s in records.get(a_arm, {})
            if a_key in records[a_arm][s] and c_key in records.get(c_arm, {}).get(s, {})
        )
        if not seeds:
            continue
        a = [records[a_arm][s][a_key] for s in seeds]
        c = [records[c_arm][s][c_key] for s in seeds]
        d = bootstrap_difference(c, a, paired=True)
        shown = "yes" if d.lo > 0 else "opposite" if d.hi < 0 else "not shown"
        rows.append(
            {
                "pillar": f.pillar,
                "factor": f.name,
                "claim": f.claim,
                "seeds": len(seeds),
                "arm_mean": round(statistics.mean(a), 4),
                "control_mean": round(statistics.mean(c), 4),
                "diff": round(d.diff, 4),
                "ci95": [round(d.lo, 4), round(d.hi, 4)],
                "shown": shown,
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The factor table as Markdown."""
    lines = [
        "| pillar | factor (arm - control) | paper's claim | seeds | arm | control | diff [95% CI] | shown |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"| {r['pillar']} | {r['factor']} | {r['claim']} | {r['seeds']} | {r['arm_mean']:.3f} | "
            f"{r['control_mean']:.3f} | {r['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] | {r['shown']} |"
        )
    return "\n".join(lines)


def medium_eval(weights: Path, games: int, max_turns: int) -> float:
    """Held-out win rate (greedy) of the policy in `weights` on `games` medium TextWorld games (seeds 500000.., never
    trained on), with the study's small-game tokenizer and `max_turns` turns (the paper's ~2x the plan)."""
    import tempfile

    from ascent.app.pipeline import make_evaluator, prepare
    from ascent.config.loader import load_config
    from ascent.tasks.base import task_piece
    from ascent.tasks.textworld import TextWorldGames
    from ascent.trainer.checkpoint import load_weights

    cfg = load_config(RECIPE, [*SHARED, "warmstart.steps=0", "control.enabled=false", f"agent.max_turns={max_turns}"])
    with tempfile.TemporaryDirectory() as tmp:
        run, policy = prepare(cfg, Path(tmp), {})
    params = replace(task_piece(cfg.data).params, size="medium")
    rows = TextWorldGames(params).rows(games, range(500_000, 1_000_000), set())
    task = replace(run.task, eval=rows)
    load_weights(policy.model, Path(weights))
    policy.model.eval()
    return float(make_evaluator(cfg, task, run.encoder, run.settings)(policy)["accuracy"])


def train_one(args: list[str], log: Path) -> float:
    """Run `ascent train` with `args` (one torch thread), its output to `log`; the wall seconds."""
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run([sys.executable, "-m", "ascent.cli", "train", *args], stdout=out, stderr=out, env=env)
    if rc.returncode != 0:
        raise SystemExit(f"ascent train failed (exit {rc.returncode}); see {log}")
    return time.perf_counter() - t0


def collect(work: Path, seeds: int) -> dict[str, dict[int, dict[str, float]]]:
    """`record`s of the finished runs under `work` (medium-game results where written)."""
    base_medium = work / "base_medium.json"
    before = json.loads(base_medium.read_text())["accuracy"] if base_medium.exists() else None
    out: dict[str, dict[int, dict[str, float]]] = {}
    for arm in ARMS:
        for seed in range(seeds):
            folder = work / run_name(arm, seed)
            if not (folder / "summary.json").exists():
                continue
            medium = None
            if before is not None and (folder / "medium.json").exists():
                medium = {"before": before, "after": json.loads((folder / "medium.json").read_text())["accuracy"]}
            out.setdefault(arm, {})[seed] = record(json.loads((folder / "summary.json").read_text()), medium)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="", help="the shared warm start (a run's warmstart/ folder)")
    ap.add_argument("--work", required=True, help="folder of the study's runs")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=15, help="RL steps per arm")
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms to run")
    ap.add_argument("--medium-games", type=int, default=30, help="held-out medium games (0: no environment factor)")
    ap.add_argument("--medium-turns", type=int, default=8)
    ap.add_argument("--plan", action="store_true", help="print the commands and exit")
    ap.add_argument("--summarize", action="store_true", help="only print the table of the finished runs")
    args = ap.parse_args()
    work = Path(args.work)
    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"unknown arm(s) {', '.join(bad)}; valid: {', '.join(ARMS)}")
    if not args.summarize:
        if not args.base or not Path(args.base).is_dir():
            raise SystemExit(f"--base must be a warm-start folder, got {args.base!r}")
        run_all(args, work, arms)
    rows = factor_table(collect(work, args.seeds))
    print(markdown(rows))
    (work / "table.json").write_text(json.dumps(rows, indent=1))


def run_all(args: argparse.Namespace, work: Path, arms: list[str]) -> None:
    import torch

    from ascent.trainer.checkpoint import resolve_model_folder
    from benchmarks.common import load, print_machine

    torch.set_num_threads(1)
    print_machine()
    work.mkdir(parents=True, exist_ok=True)
    if args.medium_games and not (work / "base_medium.json").exists() and not args.plan:
        acc = medium_eval(Path(args.base), args.medium_games, args.medium_turns)
        (work / "base_medium.json").write_text(json.dumps({"accuracy": acc, "games": args.medium_games}))
    for seed in range(args.seeds):
        for arm in arms:
            folder = work / run_name(arm, seed)
            argv = arm_overrides(arm, seed, args.base, args.steps, work)
            if args.plan:
                print("ascent train " + " ".join(argv))
                continue
            if not (folder / "summary.json").exists():
                wall = train_one([*argv, "--overwrite"], work / f"{run_name(arm, seed)}.log")
                s = json.loads((folder / "summary.json").read_text())
                print(json.dumps({"arm": arm, "seed": seed, "wall_s": round(wall, 1), "load": load()} | record(s)))
            if arm == "grpo_sparse" and args.medium_games and not (folder / "medium.json").exists():
                acc = medium_eval(resolve_model_folder(folder)[1], args.medium_games, args.medium_turns)
                (folder / "medium.json").write_text(json.dumps({"accuracy": acc, "games": args.medium_games}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
