"""`ascent train | train-rm | make-pairs | eval | export | list | references | compare | plan` — the command line.

ascent train [RECIPE] [key=value ...] [--resume RUN_DIR] [--overwrite]
ascent train-rm [RECIPE] [pairs.KEY=VALUE | rm.KEY=VALUE | key=value ...]
ascent make-steps [RECIPE] [prm.KEY=VALUE | key=value ...] [--out DIR]
ascent train-prm [RECIPE] [prm.KEY=VALUE | rm.KEY=VALUE | key=value ...]
ascent train-pref [RECIPE] [pairs.KEY=VALUE | pref.KEY=VALUE | key=value ...]
ascent make-pairs [RECIPE] [pairs.KEY=VALUE | key=value ...] [--out DIR]
ascent eval [RUN_DIR | CHECKPOINT | HF_FOLDER] [key=value ...] [--task SPEC] [--recipe R] [--by FIELD] [--out FILE]
ascent export RUN_DIR_OR_CHECKPOINT OUT_DIR [--overwrite]
ascent report RUN_DIR [--out FILE]
ascent list [advantages|losses|filters|rewards|recipes|tasks|backends|preference|classic|...] [--params]
ascent references [--write | --check]
ascent collect RECIPE_OR_RUN --policy {random,run-checkpoint} [--level L] --steps N --out DIR
ascent compare [RECIPE] [key=value ...] --vary KEY=V1,V2,... [--vary ...] [--variants FILE] --seeds N
ascent plan [RUN_DIR] [--worker-batch-s S] [--learner-step-s S] [--sync-s S] [--samples-per-step N]
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
from pathlib import Path


def _user_errors() -> tuple[type[BaseException], ...]:
    from ascent.app.compare import CompareError
    from ascent.app.runs import RunDirError
    from ascent.co.problems import InstanceError
    from ascent.config.loader import ConfigError
    from ascent.logging.sinks import SinkError
    from ascent.registry import UnknownNameError
    from ascent.rewards.runner import RewardSpecError
    from ascent.tasks import DataError
    from ascent.trainer.checkpoint import CheckpointError
    from ascent.trainer.distributed import LearnerProcessError
    from ascent.trainer.rl import TrainingError

    return (
        CheckpointError,
        CompareError,
        ConfigError,
        DataError,
        InstanceError,
        LearnerProcessError,
        UnknownNameError,
        RewardSpecError,
        RunDirError,
        SinkError,
        TrainingError,
        FileNotFoundError,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from ascent.app.interrupt import StopRequested

    run_dir: list[Path] = [Path(args.resume)] if args.resume else []  # _train adds a new run's folder
    try:
        return _train(args, run_dir)
    except (StopRequested, KeyboardInterrupt) as err:
        return stopped(run_dir[0] if run_dir else None, err)


def stopped(run_dir: Path | None, err: BaseException) -> int:
    """One line for a run stopped by Ctrl-C, with the command that continues it (exit status 130, as a shell
    gives a process killed by SIGINT)."""
    where = f" at {err.where}" if getattr(err, "where", None) else ""
    if run_dir is not None and (run_dir / "config.yaml").exists():
        print(f"ascent: stopped by Ctrl-C{where}; continue with: {ascent_command()} train --resume {run_dir}")
    else:
        print(f"ascent: stopped by Ctrl-C{where}, before anything was trained; nothing to resume")
    return 130


def ascent_command() -> str:
    """How this process was started: `ascent` when that is on PATH, else the path typed (`.venv/bin/ascent`)."""
    import shutil

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "ascent"
    if os.path.basename(argv0) != "ascent":
        return "ascent"  # python -m ascent.cli, or tests
    found = shutil.which("ascent")
    return "ascent" if found and os.path.realpath(found) == os.path.realpath(argv0) else argv0


def _train(args: argparse.Namespace, run_dir: list[Path]) -> int:
    from ascent.config import ConfigError, load_config

    recipes = [a for a in args.items if "=" not in a]
    overrides = [a for a in args.items if "=" in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    if args.resume:
        if recipes:
            raise ConfigError("--resume continues a run with its own config; give only key=value overrides")
        from ascent.app.classic import is_classic_run, train_run

        if is_classic_run(Path(args.resume)):  # Gymnasium runs never import the language-model stack
            train_run(run_dir=Path(args.resume), resume=True, overrides=overrides)
            return 0
        from ascent.app.co import is_co_run
        from ascent.app.co import train_run as train_co_run

        if is_co_run(Path(args.resume)):
            train_co_run(run_dir=Path(args.resume), resume=True, overrides=overrides)
            return 0
        quiet_hf()
        from ascent.app.pipeline import train

        train(run_dir=Path(args.resume), resume=True, overrides=overrides)
        return 0
    from ascent.incontext.recipes import is_incontext_recipe

    if recipes and is_incontext_recipe(recipes[0]):  # in-context RL (ascent.incontext): its own experiment
        from ascent.app.incontext import train_incontext

        train_incontext(recipes[0], overrides, overwrite=args.overwrite)
        return 0
    cfg = load_config(recipes[0] if recipes else "default", overrides)
    run_dir.append(Path(cfg.output_dir) / cfg.name)
    from ascent.app.classic import train_run  # after the config is checked: a typo answers at once

    if cfg.classic is not None:
        train_run(cfg, overwrite=args.overwrite)
        return 0
    if cfg.co is not None:  # a routing run (ascent.co): no language-model stack either
        from ascent.app.co import train_run as train_co_run

        train_co_run(cfg, overwrite=args.overwrite)
        return 0
    quiet_hf()
    from ascent.app.pipeline import train

    train(cfg, overwrite=args.overwrite)
    return 0


def _rm_job(args: argparse.Namespace):
    from ascent.config import ConfigError
    from ascent.config.reward_model import load_rm_job

    recipes = [a for a in args.items if "=" not in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    return load_rm_job(recipes[0] if recipes else "default", [a for a in args.items if "=" in a])


def cmd_make_pairs(args: argparse.Namespace) -> int:
    from ascent.app.pairs import make_pairs, write_pairs

    job = _rm_job(args)
    out = Path(args.out) if args.out else Path("pairs") / job.run.name
    train, held = make_pairs(job)
    files = {
        "train": str(write_pairs(train, out / "pairs.train.jsonl")),
        "eval": str(write_pairs(held, out / "pairs.eval.jsonl")),
    }
    print(
        json.dumps(
            {**files, "train_pairs": len(train), "flipped": sum(p.flipped for p in train), "eval_pairs": len(held)},
            indent=2,
        )
    )
    return 0


def cmd_train_rm(args: argparse.Namespace) -> int:
    from ascent.app.train_rm import train_rm

    job = _rm_job(args)
    meta = train_rm(job)
    keys = ("pair_accuracy", "train_pairs", "flipped_pairs", "held_out_pairs", "seconds")
    print(json.dumps({"reward_model": str(job.out_dir), **{k: meta[k] for k in keys}}, indent=2))
    return 0


def _prm_job(args: argparse.Namespace):
    from ascent.config import ConfigError
    from ascent.config.process_reward import load_prm_job

    recipes = [a for a in args.items if "=" not in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    return load_prm_job(recipes[0] if recipes else "default", [a for a in args.items if "=" in a])


def cmd_make_steps(args: argparse.Namespace) -> int:
    from ascent.app.train_prm import make_steps, write_steps

    job = _prm_job(args)
    out = Path(args.out) if args.out else Path("steps") / job.run.name
    train, held = make_steps(job)
    files = {
        "train": str(write_steps(train, out / "steps.train.jsonl")),
        "eval": str(write_steps(held, out / "steps.eval.jsonl")),
    }
    counts = {"train_trajectories": len(train), "eval_trajectories": len(held)}
    print(json.dumps({**files, **counts, "train_steps": sum(len(r.ends) for r in train)}, indent=2))
    return 0


def cmd_train_prm(args: argparse.Namespace) -> int:
    from ascent.app.train_prm import train_prm

    job = _prm_job(args)
    meta = train_prm(job)
    keys = ("step_accuracy", "step_auroc", "train_trajectories", "train_steps", "held_out_steps", "seconds")
    print(json.dumps({"process_reward_model": str(job.out_dir), **{k: meta[k] for k in keys}}, indent=2))
    return 0


def cmd_train_pref(args: argparse.Namespace) -> int:
    from ascent.app.train_pref import train_pref
    from ascent.config import ConfigError
    from ascent.config.preference import load_pref_job

    recipes = [a for a in args.items if "=" not in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    job = load_pref_job(recipes[0] if recipes else "default", [a for a in args.items if "=" in a])
    summary = train_pref(job)
    keys = ("loss", "accuracy_before", "accuracy_after", "pair_accuracy_before", "pair_accuracy_after", "wall_seconds")
    print(json.dumps({"run": str(job.out_dir), **{k: summary[k] for k in keys}}, indent=2))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from ascent.config import ConfigError, load_config
    from ascent.config.reference import config_reference

    recipes = [a for a in args.items if "=" not in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    recipe = recipes[0] if recipes else "default"
    overrides = [a for a in args.items if "=" in a]
    cfg = load_config(recipe, overrides)
    print(config_reference(cfg, " ".join([f"recipe {recipe}", *overrides])), end="")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from ascent.app import model_eval
    from ascent.app.classic import evaluate_checkpoint, is_classic_run
    from ascent.app.co import evaluate_checkpoint as evaluate_co
    from ascent.app.co import is_co_run
    from ascent.app.pipeline import load_companions, prepare
    from ascent.app.runs import RunDirError, find_config, read_run_config
    from ascent.trainer.checkpoint import load_weights

    target, overrides = args.target, list(args.overrides)
    if target is not None and "=" in target and not Path(target).exists():  # `ascent eval key=value ...`
        target, overrides = None, [target, *overrides]
    try:
        run_dir, model_dir = find_config(Path(target)) if target is not None else (None, None)
    except FileNotFoundError:
        run_dir, model_dir = None, Path(target)  # not a run: a Hugging Face model folder (checked by model_eval)
    if run_dir is None:  # a model folder, or (no target) the recipe's own model
        cfg = model_eval.model_config(model_dir, args.recipe, args.task, overrides)
        result = model_eval.evaluate_model(cfg, args.by)
    elif args.recipe is not None:
        raise RunDirError(
            f"{run_dir} is a run: it is evaluated with its own config.yaml; --recipe is for a model folder"
        )
    elif is_classic_run(run_dir):  # a Gymnasium run: deterministic episodes of the checkpoint's policy
        print(json.dumps(evaluate_checkpoint(run_dir, model_dir, overrides), indent=2))
        return 0
    elif is_co_run(run_dir):  # a routing run: test-set gaps of the checkpoint's policy
        print(json.dumps(evaluate_co(run_dir, model_dir, overrides), indent=2))
        return 0
    else:
        cfg = read_run_config(run_dir, model_eval.model_overrides(None, args.task) + overrides)
        run, policy = prepare(cfg, run_dir, {})
        load_weights(policy.model, model_dir)
        load_companions(run, model_dir)  # a trained retriever (search_world retriever=plackett_luce)
        result = {"checkpoint": str(model_dir), **model_eval.run_evaluation(run.evaluator, policy, cfg, args.by)}
    model_eval.print_table(result)
    model_eval.write_result(result, args.out)
    print(json.dumps(result, indent=2))
    return 0


def cmd_eval_in_context(args: argparse.Namespace) -> int:
    from ascent.app.incontext import evaluate_run

    evaluate_run(Path(args.run_dir), args.overrides)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ascent.app.classic import is_classic_run
    from ascent.app.export import MANIFEST, export
    from ascent.app.runs import RunDirError, find_config

    try:
        classic = is_classic_run(find_config(Path(args.target))[0])
    except FileNotFoundError:
        classic = False  # export() names what is wrong with the target
    if classic:
        raise RunDirError(
            "ascent export writes language models; a classic run's networks are already plain safetensors: "
            "checkpoints/step_N/model.safetensors (keys actor.*, critic.*, q.*, ...)"
        )

    out = export(Path(args.target), Path(args.out_dir), args.overwrite)
    print(json.dumps({"exported": str(out), **json.loads((out / MANIFEST).read_text())}, indent=2))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ascent.app.report import write_report
    from ascent.app.runs import RunDirError

    run_dir = Path(args.run_dir)
    if not (run_dir / "metrics.jsonl").exists() and not (run_dir / "summary.json").exists():
        raise RunDirError(f"{run_dir} is not a run directory (no metrics.jsonl or summary.json)")
    print(write_report(run_dir, Path(args.out) if args.out else None))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ascent.app.compare import compare
    from ascent.config import ConfigError

    recipes = [a for a in args.items if "=" not in a]
    overrides = [a for a in args.items if "=" in a]
    if len(recipes) > 1:
        raise ConfigError(f"one recipe at most, got {recipes}; overrides are key=value")
    compare(
        recipes[0] if recipes else "default",
        overrides,
        args.vary,
        args.variants,
        args.seeds,
        args.name,
        args.jobs,
        args.output_dir,
        args.overwrite,
    )
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from ascent.app.collect import collect

    result = collect(
        args.target, args.policy, args.steps, args.out, args.level, args.seed, args.name, args.eval_episodes,
        args.overrides,
    )  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from ascent.app.references import registries as all_registries
    from ascent.config.loader import read_recipe, recipe_names

    registries = all_registries()
    kinds = [args.kind] if args.kind else LIST_KINDS
    for kind in kinds:
        print(f"{kind}:")
        if kind == "recipes":
            for name in recipe_names():
                print(f"  {name:<22} {read_recipe(name).get('description', '')}")
            continue
        for entry in registries[kind].entries():
            print(f"  {entry.name:<22} {entry.description}")
            if args.params:
                for line in params_lines(registries[kind].params_help(entry.name)):
                    print(f"      {line}")
                prov = entry.provenance.lines() if entry.provenance else ["provenance: not declared"]
                for line in prov:
                    print(f"      {line}")
    return 0


def cmd_references(args: argparse.Namespace) -> int:
    from ascent.app.references import references_command

    return references_command(args.write, args.check)


def params_lines(params: list[tuple[str, str, object, str]]) -> list[str]:
    """One line per parameter of a piece: name, type, default and help (from `Registry.params_help`).

    >>> params_lines([("alpha", "float", 0.01, "Tail-risk strictness."), ("window", "int", 16, "")])
    ['alpha      float  = 0.01  Tail-risk strictness.', 'window     int    = 16']
    """
    name_w = max((len(p[0]) for p in params), default=0)
    type_w = max((len(p[1]) for p in params), default=0)
    default_w = max((len(repr(p[2])) for p in params), default=0)
    return [
        f"{name:<{max(name_w, 10)}} {kind:<{max(type_w, 6)}} = {default!r:<{default_w}}  {text}".rstrip()
        for name, kind, default, text in params
    ]


LIST_KINDS = [
    "advantages",
    "losses",
    "filters",
    "samplers",
    "explorers",
    "agent_decoders",
    "experience_extractors",
    "drafters",
    "speculation_k",
    "rewards",
    "recipes",
    "tasks",
    "backends",
    "preference",
    "warmstart-data",
    "classic",
    "classic_wrappers",
    "constraints",
    "runtimes",
    "incontext_families",
    "incontext_sources",
    "incontext_agents",
    "meta_methods",
    "co_policies",
    "co_losses",
    "co_problems",
    "co_rmab_policies",
    "router_objectives",
    "inventory_methods",
    "driving_rewards",
    "retrievers",
    "generative",
    "rank_methods",
    "reward_completers",
    "preference_interfaces",
    "irl_methods",
    "br_oracles",
    "csro_oracles",
    "subtask_learners",
]


def cmd_plan(args: argparse.Namespace) -> int:
    from ascent.runtime.plan import plan_command

    overrides = {
        "samples_per_step": args.samples_per_step,
        "worker_batch_s": args.worker_batch_s,
        "learner_step_s": args.learner_step_s,
        "sync_s": args.sync_s,
        "learner_ranks": args.learner_ranks,
        "learner_params": args.learner_params,
        "learner_shard": args.learner_shard,
    }
    return plan_command(args.run_dir, overrides, args.max_staleness, args.json)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ascent", description="RL post-training of language models, from a laptop CPU to a GPU cluster."
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser(
        "train",
        help="train a recipe (warm start, RL, control)",
        description="Train a recipe: warm start, evaluate, RL, evaluate, control. Every config key can be set "
        "as key=value; `ascent config RECIPE` prints them all with their help.",
        epilog=TRAIN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "items",
        nargs="*",
        metavar="RECIPE|key=value",
        help=(
            "a shipped recipe name or YAML path (default: default), "
            "then key=value overrides with dotted keys (train.steps=100)"
        ),
    )
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory of the same name")
    t.set_defaults(fn=cmd_train)
    rm_items = dict(
        nargs="*",
        metavar="RECIPE|key=value",
        help="a recipe (its task, model and seed; default: default), then pairs.* / rm.* and recipe overrides",
    )
    mp = sub.add_parser("make-pairs", help="preference pairs from a task's verifier (optionally with flipped labels)")
    mp.add_argument("items", **rm_items)
    mp.add_argument("--out", help="folder for pairs.train.jsonl and pairs.eval.jsonl (default pairs/<recipe name>)")
    mp.set_defaults(fn=cmd_make_pairs)
    rm = sub.add_parser("train-rm", help="train a Bradley-Terry reward model from preference pairs (reward=rm:PATH)")
    rm.add_argument("items", **rm_items)
    rm.set_defaults(fn=cmd_train_rm)
    prm_items = dict(rm_items, help="an agent recipe, then prm.* / rm.* and recipe overrides")
    ms = sub.add_parser("make-steps", help="Math-Shepherd step labels: trajectories + Monte Carlo completions per step")
    ms.add_argument("items", **prm_items)
    ms.add_argument("--out", help="folder for steps.train.jsonl and steps.eval.jsonl (default steps/<recipe name>)")
    ms.set_defaults(fn=cmd_make_steps)
    pr = sub.add_parser("train-prm", help="train a process reward model on step labels (advantage prm(path=...))")
    pr.add_argument("items", **prm_items)
    pr.set_defaults(fn=cmd_train_prm)
    pf = sub.add_parser(
        "train-pref",
        help="offline preference optimisation of the policy on pairs (DPO, IPO, SimPO; ascent eval reads it)",
    )
    pf.add_argument(
        "items",
        nargs="*",
        metavar="RECIPE|key=value",
        help="a recipe (task, model, evaluation; default: default), then pairs.* / pref.* and recipe overrides",
    )
    pf.set_defaults(fn=cmd_train_pref)
    cf = sub.add_parser(
        "config",
        help="print a recipe's resolved config, every key with its help (valid YAML: save, edit, train it)",
    )
    cf.add_argument("items", nargs="*", metavar="RECIPE|key=value", help="a recipe (default: default), then overrides")
    cf.set_defaults(fn=cmd_config)
    e = sub.add_parser("eval", help="greedy accuracy (strict and lenient), pass@k and length on a held-out set")
    e.add_argument(
        "target",
        nargs="?",
        help="run directory, checkpoint folder or Hugging Face model folder (none: --recipe's model)",
    )
    e.add_argument("overrides", nargs="*", help="key=value overrides (e.g. eval.pass_k=16)")
    e.add_argument("--task", help="evaluate on this task (a data.task spec, e.g. gsm8k or 'hf(path=...)')")
    e.add_argument("--recipe", help="a model folder's or the base model's settings (default: default)")
    e.add_argument("--by", help="also break greedy accuracy down by this row field (e.g. steps)")
    e.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    e.set_defaults(fn=cmd_eval)
    ic = sub.add_parser(
        "eval-in-context",
        help="an in-context RL run's saved models on held-out tasks, frozen weights: return per episode index",
    )
    ic.add_argument("run_dir", help="run directory of `ascent train ad-darkroom` (or another in-context recipe)")
    ic.add_argument("overrides", nargs="*", help="key=value overrides (e.g. eval_episodes=50 seeds=[0])")
    ic.set_defaults(fn=cmd_eval_in_context)
    x = sub.add_parser(
        "export", help="write a run's model as a plain Hugging Face folder (LoRA merged) with its tokenizer"
    )
    x.add_argument("target", help="run directory (its latest checkpoint) or checkpoint folder")
    x.add_argument("out_dir", help="the folder to write (must not exist or be empty)")
    x.add_argument("--overwrite", action="store_true", help="replace an existing OUT_DIR")
    x.set_defaults(fn=cmd_export)
    r = sub.add_parser("report", help="write a run's self-contained report.html (curves, samples, config)")
    r.add_argument("run_dir", help="run directory")
    r.add_argument("--out", help="where to write it (default RUN_DIR/report.html)")
    r.set_defaults(fn=cmd_report)
    c = sub.add_parser("compare", help="compare algorithm variants x seeds from one shared warm start")
    c.add_argument(
        "items", nargs="*", metavar="RECIPE|key=value", help="recipe and key=value overrides shared by every variant"
    )
    c.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a config key and its values; several --vary give their cartesian product",
    )
    c.add_argument(
        "--variants", metavar="FILE", help="YAML mapping variant name -> {key: value} (arms that change several keys)"
    )
    c.add_argument("--seeds", type=int, default=3, help="seeds per variant (seed, seed+1, ...)")
    c.add_argument(
        "--jobs",
        type=int,
        default=max(1, (os.cpu_count() or 1)),
        help="runs in parallel (each gets cpu_count/jobs torch threads)",
    )
    c.add_argument("--name", help="comparison name (directory under --output-dir)")
    c.add_argument("--output-dir", default="compare", help="parent directory of comparisons")
    c.add_argument("--overwrite", action="store_true", help="replace a different comparison of the same name")
    c.set_defaults(fn=cmd_compare)
    pl = sub.add_parser(
        "plan", help="rollout workers that keep the learner busy (ECHO-2's capacity model), from a run's measurements"
    )
    pl.add_argument(
        "run_dir", nargs="?", help="a run directory: its metrics.jsonl gives the measured times (local or ray runs)"
    )
    for flag, text in [
        ("--samples-per-step", "samples per step"),
        ("--worker-batch-s", "one worker's seconds to sample and score a step's batch"),
        ("--learner-step-s", "learner seconds per step"),
        ("--sync-s", "weight-sync seconds per version"),
        ("--learner-ranks", "learner processes (learner.world_size) the learner step time was measured with"),
    ]:
        pl.add_argument(flag, type=float, help=f"{text} (overrides the run's)")
    pl.add_argument("--learner-params", type=int, help="trainable parameters: prints the learner memory per rank")
    pl.add_argument(
        "--learner-shard", choices=["none", "fsdp2"], help="learner.shard for the memory line (overrides the run's)"
    )
    pl.add_argument(
        "--max-staleness", type=int, help="evaluate this ray.max_staleness instead of the one each worker count needs"
    )
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(fn=cmd_plan)
    co = sub.add_parser("collect", help="an offline dataset (Minari format) from a classic recipe or run's checkpoints")
    co.add_argument("target", metavar="RECIPE_OR_RUN", help="a classic recipe (random policy) or run directory")
    co.add_argument("--policy", choices=["random", "run-checkpoint"], required=True, help="who acts")
    co.add_argument(
        "--level", default="expert", choices=["expert", "medium", "medium-replay"],
        help="run-checkpoint: the latest checkpoint, the one nearest a third of its score, or that one's replay buffer",
    )  # fmt: skip
    co.add_argument("--steps", type=int, default=100_000, help="transitions to collect (medium-replay: unused)")
    co.add_argument("--out", default="datasets", help="parent folder of the dataset folder (default datasets)")
    co.add_argument("--name", help="dataset id (default <env>-<level>-v0)")
    co.add_argument("--seed", type=int, help="seed of the collection (default the run's)")
    co.add_argument("--eval-episodes", type=int, default=10, help="episodes per reference score")
    co.add_argument("overrides", nargs="*", help="key=value overrides of the recipe / run config")
    co.set_defaults(fn=cmd_collect)
    ls = sub.add_parser("list", help="registered components and recipes")
    ls.add_argument("kind", nargs="?", choices=LIST_KINDS)
    ls.add_argument(
        "--params",
        action="store_true",
        help="also print each piece's parameters (type, default, help) and provenance (paper, fidelity, departures)",
    )
    ls.set_defaults(fn=cmd_list)
    rf = sub.add_parser("references", help="docs/references.md generated from the registries' provenance")
    rf.add_argument("--write", action="store_true", help="rewrite docs/references.md")
    rf.add_argument("--check", action="store_true", help="exit 1 when docs/references.md differs from the generator")
    rf.set_defaults(fn=cmd_references)
    return p


TRAIN_EXAMPLES = """examples:
  ascent train                                   the demo recipe (default): addition, scratch model
  ascent train default train.steps=50 name=short override keys; the run goes to runs/short
  ascent train smollm2-arith                     a pretrained model (SmolLM2-135M-Instruct)
  ascent train model.source=hf model.path=DIR warmstart.steps=0 control.kind=rft
                                                 your own Hugging Face model folder as the policy
  ascent train data.train=train.jsonl data.eval=eval.jsonl reward=my_reward.py:score
                                                 your own prompts (JSONL) and reward function
  ascent train --resume runs/short               continue a stopped run (Ctrl-C saves first)
  ascent config default                          every key of a recipe, with its help
"""


def quiet_hf() -> None:
    """Turn off transformers' progress bars (weight loading/saving bars would interleave with ascent's own)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    p = parser()
    args, extra = p.parse_known_args(argv)
    if args.command not in ("train", "config"):  # train quiets them itself unless the run is a classic one
        quiet_hf()
    target = (
        "items"
        if args.command
        in ("train", "config", "compare", "make-pairs", "train-rm", "train-pref", "make-steps", "train-prm")
        else "overrides"
    )
    stray = [a for a in extra if a.startswith("-") or not hasattr(args, target)]
    if stray:
        p.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:  # key=value items given after an option
        getattr(args, target).extend(extra)
    try:
        return args.fn(args)
    except Exception as err:
        from ascent.typed import ConfigError

        # a config error (a typo'd recipe or key) answers without importing the training stack
        if isinstance(err, ConfigError) or isinstance(err, _user_errors()):
            print(f"ascent: error: {err}", file=sys.stderr)
            return 2
        if not isinstance(err, OSError) or err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(
            f"ascent: error: the disk is full ({err}); the last checkpoint is intact: free space and continue "
            "with `ascent train --resume RUN_DIR`",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
