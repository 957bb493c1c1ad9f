"""A whole run: warm start -> evaluate -> RL -> evaluate -> control -> summary, resumable phase by phase.

Run directory: config.yaml, state.json (finished phases and their results), metrics.jsonl, warmstart/
(HF model), checkpoints/step_N/ (HF model + trainer_state.pt), summary.json, curves.png.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
import yaml

from ascent.agents.collector import AgentCollector, pack_episodes, pack_rounds
from ascent.agents.loop import AgentConfig
from ascent.app.classic import train_classic
from ascent.app.interrupt import StopRequested, check_stop, graceful_stop, stop_requested
from ascent.app.report import write_report
from ascent.app.runs import RunDirError, opened_run, trackers
from ascent.config.loader import derived, to_dict
from ascent.config.schema import OptimConfig, RunConfig
from ascent.data.prompts import PromptEncoder
from ascent.logging import jsonsafe
from ascent.logging.metrics import MetricsLogger, console
from ascent.logging.plots import plot_curves
from ascent.logging.progress import eval_progress, progress_bar
from ascent.policy.model import Policy, build_policy, count_parameters
from ascent.rewards.runner import RewardRunner
from ascent.rollout.backends import make_engine, resolve_rollout_precision
from ascent.rollout.collector import Collector
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.types import SamplingSettings
from ascent.runtime import make_trainer
from ascent.runtime.memory import tune_malloc
from ascent.tasks import TaskData, demonstrations, load_task
from ascent.tasks.base import fit_to_context
from ascent.trainer.checkpoint import Checkpointer, load_weights, save_folder_atomic, write_text_atomic
from ascent.trainer.evaluate import Evaluator, metric_key
from ascent.trainer.rl import RLParts
from ascent.trainer.samples import SampleLogger, read_samples
from ascent.trainer.sft import Demonstrations, SFTRun, single_turn_demonstrations
from ascent.trainer.warmstart_data import WARMSTART_DATA, WarmStartDataContext


@dataclass
class Run:
    """Everything built once for a run."""

    cfg: RunConfig
    dir: Path
    task: TaskData
    encoder: PromptEncoder
    rewards: RewardRunner
    settings: SamplingSettings
    evaluator: Evaluator
    logger: MetricsLogger
    state: dict[str, Any]
    samples: Optional[SampleLogger] = None
    """samples.jsonl (`logging.samples_every`)."""
    wall_before: float = 0.0
    """Wall seconds of the earlier processes of this run (a resumed run's `wall_seconds` adds up over them)."""
    clock: float = field(default_factory=time.perf_counter)

    def save_state(self) -> None:
        """state.json, atomically, with the wall seconds so far: a run killed and resumed loses none of them."""
        self.state["wall_seconds"] = self.wall_before + time.perf_counter() - self.clock
        write_text_atomic(self.dir / "state.json", jsonsafe.dumps(self.state, indent=2))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def new_policy(cfg: RunConfig, task: TaskData) -> Policy:
    """The policy the config describes (seeded init for scratch models)."""
    return build_policy(cfg.model, task.tokenizer, cfg.seed)


def reward_specs(cfg: RunConfig, task: TaskData) -> list[str]:
    specs = [cfg.reward] if isinstance(cfg.reward, str) else list(cfg.reward)
    return [task.reward if s == "auto" else s for s in specs]


def prepare(cfg: RunConfig, run_dir: Path, state: dict[str, Any], track: bool = False) -> tuple[Run, Policy]:
    """Build task, policy, encoder, rewards and evaluator for `cfg`; with `track`, the experiment trackers
    the config asks for (training runs; `ascent eval` logs nowhere)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    tune_malloc(cfg.malloc)
    seed_everything(cfg.seed)
    task = load_task(cfg.data, cfg.seed if cfg.data.split_seed is None else cfg.data.split_seed)
    policy = new_policy(cfg, task)
    encoder = PromptEncoder(policy.tokenizer, cfg.data.chat_template, cfg.data.system_prompt)
    r = cfg.rollout
    positions = getattr(getattr(policy.model, "config", None), "max_position_embeddings", None)
    task, note = fit_to_context(task, encoder, positions, r.max_new_tokens)
    if note:
        console.print(note)
    settings = SamplingSettings(
        r.max_new_tokens, policy.eos_id, policy.pad_id, r.temperature, r.top_p, r.top_k, r.ignore_eos
    )
    rewards = RewardRunner(reward_specs(cfg, task), cfg.reward_weights, cfg.reward_timeout_s, cfg.model.device)
    evaluator = make_evaluator(cfg, task, encoder, settings)
    logger = MetricsLogger(run_dir, cfg.logging.tensorboard, trackers(cfg, run_dir) if track else [])
    lg = cfg.logging
    samples = SampleLogger(
        run_dir, lg.samples_every, lg.samples_groups, lg.samples_max_mb, rewards.names, lg.samples_hidden
    )
    wall = state.get("wall_seconds", 0.0)
    return Run(cfg, run_dir, task, encoder, rewards, settings, evaluator, logger, state, samples, wall), policy


def agent_loop(cfg: RunConfig) -> AgentConfig:
    """The agent loop's limits (agent.*) and sampling (rollout.temperature, top_p, top_k)."""
    a, r = cfg.agent, cfg.rollout
    return AgentConfig(
        max_turns=a.max_turns,
        max_turn_tokens=a.max_turn_tokens,
        max_total_tokens=a.max_total_tokens,
        stop_strings=tuple(a.stop_strings),
        context=a.context,
        temperature=r.temperature,
        top_p=r.top_p,
        top_k=r.top_k,
    )


def make_evaluator(cfg: RunConfig, task: TaskData, encoder: PromptEncoder, settings: SamplingSettings) -> Evaluator:
    """Held-out evaluation of the task's kind, with its own reward runner (a stateful reward such as
    `trace` keeps its training state out of evaluation)."""
    r = cfg.rollout
    specs, weights = ([cfg.eval.reward], None) if cfg.eval.reward else (reward_specs(cfg, task), cfg.reward_weights)
    rewards = RewardRunner(specs, weights, cfg.reward_timeout_s, cfg.model.device)
    engine = make_engine(r, precision="model")  # held-out accuracy in the policy's own precision
    loop = agent_loop(cfg) if task.agent is not None else None
    threshold, batch = cfg.eval.correct_threshold, cfg.eval.batch_size
    spec = task.lenient if cfg.eval.lenient == "auto" else cfg.eval.lenient
    lenient = RewardRunner([spec], None, cfg.reward_timeout_s) if spec else None
    return Evaluator(
        task.eval,
        encoder,
        engine,
        rewards,
        settings,
        threshold,
        batch,
        agent=task.agent,
        loop=loop,
        lenient=lenient,
        pass_k_rows=cfg.eval.pass_k_rows,
        metrics={metric_key(m): RewardRunner([m], None, cfg.reward_timeout_s) for m in cfg.eval.metrics},
        by=cfg.eval.by,
    )


def load_companions(run: Run, folder: Path) -> None:
    """The environment's co-trained parts (search_world's trained retriever) as the checkpoint `folder` left them;
    nothing for a folder without a trainer state (a warm start) or a task without such parts."""
    companions = run.task.agent.companions if run.task.agent is not None else ()
    if companions and (Path(folder) / "trainer_state.pt").exists():
        saved = Checkpointer.load_state(Path(folder)).get("companions", [])
        for c, state in zip(companions, saved):
            c.load_state_dict(state)


def make_collector(run: Run, policy: Policy, engine: RolloutEngine) -> Optional[Collector]:
    """The rollout stage: the agent collector for agent tasks, None (the trainer's single-turn default) otherwise."""
    if run.task.agent is None:
        return None
    a = run.cfg.agent
    return AgentCollector(
        policy,
        run.task.train,
        engine,
        run.task.agent,
        agent_loop(run.cfg),
        run.cfg.rollout.samples_per_prompt,
        a.turn_rewards,
        a.igpo_template,
        run.cfg.train.micro_batch_size,
        a.round_multiple or run.cfg.train.micro_batch_size,
    )


def make_demonstrations(run: Run, policy: Policy) -> Demonstrations:
    """What the warm start and the control imitate: the task's teacher (single-turn) or its demonstrator's
    trajectories (agent tasks; loss on the demonstrator's tokens only)."""
    task, tok = run.task, policy.tokenizer
    if task.agent is not None:
        loop = replace(agent_loop(run.cfg), temperature=0.0)
        if loop.context == "workspace":  # one imitation row per round, none dropped
            return lambda rows, rng: pack_rounds(demonstrations(task.agent, rows, rng, tok, loop), rows, 1, tok)[0]
        return lambda rows, rng: pack_episodes(demonstrations(task.agent, rows, rng, tok, loop), rows, 1, tok)
    if task.teacher is None:
        raise RunDirError("the task has no teacher or 'answer' field to imitate; set warmstart.steps=0")
    return single_turn_demonstrations(task.teacher, run.encoder, tok)


def print_header(run: Run, policy: Policy) -> None:
    from rich.table import Table

    console.print(f"[bold]ascent[/bold] run [cyan]{run.dir}[/cyan]")
    console.print(yaml.safe_dump(to_dict(run.cfg), sort_keys=False).rstrip())
    table = Table(title="derived quantities", show_header=False)
    for k, v in derived(run.cfg).__dict__.items():
        table.add_row(k.replace("_", " "), str(v))
    table.add_row("model parameters", f"{count_parameters(policy.model):,}")
    table.add_row("trainable parameters", f"{count_parameters(policy.model, trainable_only=True):,}")
    table.add_row("train / eval rows", f"{len(run.task.train)} / {len(run.task.eval)}")
    console.print(table)


def evaluate(run: Run, policy: Policy, pass_k: bool = True) -> dict[str, float]:
    """Held-out accuracy (and pass@k), with a progress bar on a terminal; Ctrl-C stops it between batches."""
    k = run.cfg.eval.pass_k if pass_k else 0
    rows = len(run.evaluator.rows)
    total = rows + (min(run.evaluator.pass_k_rows or rows, rows) if k else 0)
    with eval_progress("evaluate", total, run.cfg.logging.progress) as advance:

        def on_batch(done: int) -> None:
            advance(done)
            check_stop("an evaluation (it starts again on --resume)")

        run.evaluator.on_batch = on_batch
        run.evaluator.rewards.share_frozen(run.rewards)  # e.g. rm_ensemble's standardisation: one function
        try:
            return run.evaluator(policy, k, run.cfg.rollout.temperature or 1.0, run.cfg.seed)
        finally:
            run.evaluator.on_batch = None
            run.evaluator.rewards.share_frozen(run.rewards)


def warmstart_data(run: Run, policy: Policy) -> tuple[list[dict[str, Any]], Demonstrations]:
    """The rows the warm start draws and the demonstrations it imitates (`warmstart.data`): the task's own
    (`teacher`), or another builder's (`ascent.trainer.warmstart_data.WARMSTART_DATA`, single-turn tasks)."""
    spec = run.cfg.warmstart.data
    if spec == "teacher":
        return run.task.train, make_demonstrations(run, policy)
    piece = WARMSTART_DATA.resolve(spec, key="warmstart.data")
    if run.task.agent is not None:
        raise RunDirError(
            f"warmstart.data={piece.name} builds single-turn data; agent tasks use warmstart.data=teacher"
        )
    ctx = WarmStartDataContext(run.task.train, run.task.teacher, run.encoder, policy.tokenizer, run.cfg.seed)
    return piece(ctx)


def sft_phase(
    run: Run,
    policy: Policy,
    phase: str,
    steps: int,
    optim: OptimConfig,
    eval_every: int,
    ckpt: Optional[Checkpointer] = None,
    checkpoint_every: int = 0,
    rows: Optional[list[dict[str, Any]]] = None,
) -> None:
    """Warm start, control or recovery: imitate the teacher (the warm start: `warmstart.data`) for `steps` optimizer
    steps, on `rows` (None: the task's training rows). With `ckpt`, continue from its latest checkpoint and save one
    every `checkpoint_every` steps and when Ctrl-C stops the phase (`ascent.app.interrupt`)."""
    rows, demos = (
        warmstart_data(run, policy)
        if phase == "warmstart"
        else (run.task.train if rows is None else rows, make_demonstrations(run, policy))
    )
    job = SFTRun(
        policy,
        rows,
        demos,
        optim,
        steps,
        run.cfg.warmstart.batch_size,
        run.cfg.train.micro_batch_size,
        run.cfg.seed + {"control": 1, "recovery": 2}.get(phase, 0),
        run.cfg.warmstart.action_weight if phase == "warmstart" else 1.0,
    )
    latest = ckpt.latest() if ckpt is not None else None
    state = None
    if latest is not None:
        load_weights(policy.model, latest)
        state = Checkpointer.load_state(latest)
        console.print(f"resumed {phase} from {latest} (step {state['step']})")
    run.logger.truncate_after(phase, state["step"] if state else 0)
    seconds, t0, before = f"{phase}_seconds", time.perf_counter(), run.state.get(f"{phase}_seconds", 0.0)
    lg = run.cfg.logging
    with progress_bar(phase, steps, lg.progress, state["step"] if state else 0, lg.log_every) as bar:

        def on_step(step: int, m: dict[str, float]) -> None:
            run.logger.log(phase, step, m)
            bar.update(step, m)
            stopping = stop_requested()
            if ckpt is not None and step < steps and (stopping or (checkpoint_every and step % checkpoint_every == 0)):
                ckpt.save(step, policy, job.state_dict())
                run.state[seconds] = before + time.perf_counter() - t0
                run.save_state()
            if stopping:
                raise StopRequested(f"{phase} step {step}")

        job.run(on_step, lambda: evaluate(run, policy, pass_k=False), eval_every, state)
    run.state[seconds] = before + time.perf_counter() - t0


def warmstart_folder(run: Run) -> Path:
    """Where the warm-start weights live: `warmstart.init_from`, or the run's own `warmstart/`."""
    return Path(run.cfg.warmstart.init_from) if run.cfg.warmstart.init_from else run.dir / "warmstart"


def warmstart(run: Run, policy: Policy) -> None:
    """Train (or reload) the warm-start checkpoint; an interrupted warm start continues from its last
    checkpoint (warmstart_checkpoints/, removed once warmstart/ is written)."""
    folder = warmstart_folder(run)
    if run.state.get("warmstart_done") or run.cfg.warmstart.init_from:
        if not folder.exists():
            raise RunDirError(f"warmstart.init_from={str(folder)!r} does not exist")
        load_weights(policy.model, folder)
        return
    w = run.cfg.warmstart
    ckpt = Checkpointer(run.dir / "warmstart_checkpoints", keep=1)
    sft_phase(run, policy, "warmstart", w.steps, w.optim, w.eval_every, ckpt, w.checkpoint_every)
    save_folder_atomic(folder, policy.save)
    run.state.update(warmstart_done=True)
    run.save_state()
    shutil.rmtree(ckpt.root, ignore_errors=True)


def rl_phase(
    run: Run,
    policy: Policy,
    resume: bool,
    stop_at: Optional[int],
    phase: str = "rl",
    cfg: Optional[RunConfig] = None,
    checkpoints: Optional[Path] = None,
) -> bool:
    """RL with checkpoints and periodic evaluation. Returns True when train.steps were all taken. `phase`,
    `cfg` and `checkpoints` name a second RL-shaped phase (the RFT control): its metrics phase, its config
    (default: the run's) and its checkpoint folder (default: checkpoints/)."""
    cfg, picked = resolve_rollout_precision(cfg or run.cfg)
    if picked:
        console.print(f"{phase} rollout precision: {picked}")
    r = cfg.rollout
    engine = make_engine(r)
    run.rewards.attach_policy(policy.model, policy.tokenizer)  # rewards that judge with the policy (self_judge)
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    parts.companions = run.task.agent.companions if run.task.agent is not None else ()
    trainer = make_trainer(cfg, parts)  # runtime=local|ray (ascent.runtime)
    learner = getattr(trainer, "learner", None)
    if learner is not None:
        console.print(f"{phase} learner precision: {learner.precision.name} ({learner.precision.reason})")
    pending = learner is not None and learner.precision.pending  # auto: settled by the first update
    ckpt = Checkpointer(checkpoints or run.dir / "checkpoints", cfg.train.keep_checkpoints)
    latest = ckpt.latest() if resume else None
    if latest is not None:
        load_weights(policy.model, latest)
        trainer.load_state_dict(Checkpointer.load_state(latest))
        console.print(f"resumed {phase} from {latest} (step {trainer.step_count})")
    run.logger.truncate_after(phase, trainer.step_count)
    if run.samples is not None:
        run.samples.truncate_after(phase, trainer.step_count)
    seconds = f"{phase}_seconds"
    t0, before = time.perf_counter(), run.state.get(seconds, 0.0)
    lg = cfg.logging
    with progress_bar(phase, cfg.train.steps, lg.progress, trainer.step_count, lg.log_every) as bar:

        def on_step(step: int, m: dict[str, float]) -> None:
            nonlocal pending
            if pending and not learner.precision.pending:
                pending = False
                console.print(f"{phase} learner precision: {learner.precision.name} ({learner.precision.reason})")
            if cfg.train.eval_every and step % cfg.train.eval_every == 0 and step < cfg.train.steps:
                m.update({f"eval/{k}": v for k, v in evaluate(run, policy, pass_k=False).items()})
            run.logger.log(phase, step, m)
            if run.samples is not None and run.samples.due(step):
                run.samples.log(phase, step, getattr(trainer, "last", None))
            bar.update(step, m)
            if (
                (cfg.train.checkpoint_every and step % cfg.train.checkpoint_every == 0)
                or step == cfg.train.steps
                or step == stop_at
                or stop_requested()
            ):
                run.state[seconds] = before + time.perf_counter() - t0
                ckpt.save(step, policy, trainer.state_dict())
                run.save_state()
            if stop_requested() and step < cfg.train.steps:
                raise StopRequested(f"{phase} step {step} (saved)")

        trainer.fit(on_step, stop_at)
    return trainer.step_count >= cfg.train.steps


def starting_policy(run: Run) -> Policy:
    """A fresh policy with the weights RL started from: the warm start's, or the model as configured."""
    policy = new_policy(run.cfg, run.task)
    if run.cfg.warmstart.steps or run.cfg.warmstart.init_from:
        load_weights(policy.model, warmstart_folder(run))
    return policy


def recovery_corpus(rows: list[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """SG-SRL's small corpus: `size` training rows drawn without replacement by `seed` (all of them if fewer).

    >>> [r["i"] for r in recovery_corpus([{"i": i} for i in range(10)], 3, seed=0)]
    [0, 4, 6]
    """
    picked = random.Random(f"recovery-{seed}").sample(range(len(rows)), min(size, len(rows)))
    return [rows[i] for i in picked]


def recovery_phase(run: Run, policy: Policy) -> dict[str, float]:
    """SG-SRL's recovery stage (Su et al. 2026, arXiv:2605.29502): the RL policy fine-tuned on a small corpus of the
    task's demonstrations (`recovery.rows` rows, `recovery.steps` steps at a constant `recovery.lr`), then
    evaluated; the weights are saved to RUN_DIR/recovery/. No checkpoints: a stopped run redoes it."""
    cfg = run.cfg
    optim = replace(cfg.train.optim, lr=cfg.recovery.lr or cfg.train.optim.lr, schedule="constant", warmup_steps=0)
    corpus = recovery_corpus(run.task.train, cfg.recovery.rows, cfg.seed)
    sft_phase(run, policy, "recovery", cfg.recovery.steps, optim, 0, rows=corpus)
    save_folder_atomic(run.dir / "recovery", policy.save)
    return evaluate(run, policy)


def control_phase(run: Run, resume: bool = False) -> dict[str, float]:
    """The control, from RL's starting weights for RL's budget: continued imitation of the warm start's teacher
    for as many optimizer steps as RL took (`control.kind=imitation`), or rejection-sampling fine-tuning with
    RL's prompts, samples and optimizer steps (`rft`)."""
    cfg = run.cfg
    optim = replace(cfg.train.optim, lr=cfg.control.lr or cfg.train.optim.lr)
    for c in run.task.agent.companions if run.task.agent is not None else ():
        c.reset()  # the control starts from RL's starting point: the environment's trained parts too
    if cfg.control.kind == "rft":
        policy = starting_policy(run)
        algorithm = replace(
            cfg.algorithm, advantage="rft", loss="pg", filter="none", kl_coef=0.0, tis_cap=None, loss_agg="token-mean"
        )
        rft = replace(cfg, algorithm=algorithm, train=replace(cfg.train, optim=optim))
        seed_everything(cfg.seed)
        rl_phase(run, policy, resume, None, phase="control", cfg=rft, checkpoints=run.dir / "control_checkpoints")
        return evaluate(run, policy)
    policy = starting_policy(run)
    steps = derived(cfg).total_rl_optimizer_steps
    sft_phase(run, policy, "control", steps, optim, cfg.train.eval_every)  # no checkpoints: it reruns on resume
    return evaluate(run, policy)


def train(
    cfg: RunConfig | None = None,
    run_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    stop_at: Optional[int] = None,
    overrides: Optional[list[str]] = None,
) -> dict[str, Any] | None:
    """Run (or resume) the whole pipeline. Returns the summary, or None when stopped at `stop_at`. The run
    directory is locked while it runs; a new run that fails before training leaves nothing behind."""
    run_dir = Path(run_dir) if run_dir is not None else Path(cfg.output_dir) / cfg.name
    with opened_run(cfg, run_dir, overwrite, resume, overrides) as cfg:
        if cfg.classic is not None:  # a Gymnasium run (ascent.classic): its own loop, the same run directory
            return train_classic(cfg, run_dir, resume, stop_at, trackers(cfg, run_dir))
        state = json.loads((run_dir / "state.json").read_text()) if resume and (run_dir / "state.json").exists() else {}
        if resume and is_complete(run_dir, cfg, state):
            summary = json.loads((run_dir / "summary.json").read_text())
            console.print(
                f"{run_dir} is already complete; nothing to do (key=value overrides such as train.steps=N extend it)",
                soft_wrap=True,
            )
            print_results(summary, run_dir)
            return summary
        with graceful_stop():
            return run_phases(cfg, run_dir, state, resume, stop_at)


def run_phases(
    cfg: RunConfig, run_dir: Path, state: dict[str, Any], resume: bool, stop_at: Optional[int]
) -> dict[str, Any] | None:
    """warm start -> evaluate -> RL -> evaluate -> control -> summary, skipping what `state` has done."""
    run, policy = prepare(cfg, run_dir, state, track=True)
    print_header(run, policy)
    if cfg.warmstart.steps or cfg.warmstart.init_from:
        warmstart(run, policy)
    drop_stale_evaluations(run)
    if "before" not in run.state and cfg.eval.before:
        run.state["before"] = evaluate(run, policy)
        run.save_state()
    if cfg.train.steps == 0:
        console.print(
            "train.steps=0: no RL phase and no control; the summary holds the evaluation before RL only",
            soft_wrap=True,
        )
    else:
        if not rl_phase(run, policy, resume, stop_at):
            run.save_state()
            return None
        if run.state.get("after_step") != cfg.train.steps:  # a run resumed in its control keeps this evaluation
            run.state.update(after=evaluate(run, policy), after_step=cfg.train.steps)
            run.save_state()
        if cfg.recovery.steps and "recovered" not in run.state:
            t1 = time.perf_counter()
            run.state["recovered"] = recovery_phase(run, policy)
            run.state["recovery_seconds"] = time.perf_counter() - t1
            run.save_state()
        if cfg.control.enabled:
            t1, before = time.perf_counter(), run.state.get("control_seconds", 0.0)
            run.state["control"] = control_phase(run, resume)
            if cfg.control.kind == "imitation":  # the rft control's training seconds are counted by rl_phase
                run.state["control_seconds"] = before + time.perf_counter() - t1
    run.state["complete"] = config_digest(cfg)
    run.save_state()
    return finish(run)


def config_digest(cfg: RunConfig) -> str:
    """A hash of the whole resolved config: a finished run resumed with the same config has nothing to do."""
    return hashlib.sha256(json.dumps(to_dict(cfg), sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_complete(run_dir: Path, cfg: RunConfig, state: dict[str, Any]) -> bool:
    """The run finished with exactly this config (no override changed it) and its summary.json exists."""
    return state.get("complete") == config_digest(cfg) and (run_dir / "summary.json").exists()


def evaluation_digest(cfg: RunConfig) -> str:
    """What an evaluation's numbers depend on besides the weights: the data, model, warm start, sampling and
    evaluation settings, the reward specs and the source of every reward file they name (a reward fixed in
    place between a failed run and its --resume changes the digest)."""
    d = to_dict(cfg)
    keys = ("seed", "data", "model", "warmstart", "rollout", "eval", "reward", "reward_weights", "reward_timeout_s")
    h = hashlib.sha256(json.dumps({k: d.get(k) for k in keys}, sort_keys=True, default=str).encode())
    specs = [cfg.reward] if isinstance(cfg.reward, str) else list(cfg.reward)
    for spec in [*specs, cfg.eval.reward or ""]:
        source = reward_source(spec)
        if source is not None:
            h.update(source.read_bytes())
    return h.hexdigest()[:16]


def reward_source(spec: str) -> Optional[Path]:
    """The file a `file.py:function` or `package.module:function` reward spec loads, when there is one."""
    target = spec.partition("(")[0].rpartition(":")[0]
    if not target or target == "rm":
        return None
    if target.endswith(".py"):
        path = Path(target)
        return path if path.is_file() else None
    import importlib.util

    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    return Path(origin) if origin and Path(origin).is_file() else None


def drop_stale_evaluations(run: Run) -> None:
    """A resumed run whose rewards or evaluation settings changed since its evaluations were scored re-runs
    them: a result never mixes an evaluation under one reward with another under a different one."""
    digest = evaluation_digest(run.cfg)
    stale = [k for k in ("before", "after", "recovered", "control") if k in run.state]
    if stale and run.state.get("evaluation_digest") != digest:
        console.print(
            f"the reward or evaluation settings changed since this run's {', '.join(stale)} evaluation: re-evaluating"
        )
        for key in ("before", "after", "after_step", "recovered"):
            run.state.pop(key, None)
    run.state["evaluation_digest"] = digest


def finish(run: Run) -> dict[str, Any]:
    """summary.json, curves.png and the side-by-side table."""
    s, cfg = run.state, run.cfg
    summary: dict[str, Any] = {
        "name": cfg.name,
        "seed": cfg.seed,
        "steps": cfg.train.steps,
        "wall_seconds": round(s["wall_seconds"], 2),
    }
    if "control" in s:
        summary["control_kind"] = cfg.control.kind
    phases = (("before", "before_rl"), ("after", "after_rl"), ("recovered", "recovered"), ("control", "control"))
    for phase, key in phases:  # every evaluation metric: pass@k, completion_len, for agents tool_calls, ...
        for metric, value in s.get(phase, {}).items():
            name = f"accuracy_{key}_lenient" if metric == "accuracy_lenient" else f"{metric}_{key}"
            summary[name] = value
    checks = [s[p]["token_check_pass_rate"] for p, _ in phases if "token_check_pass_rate" in s.get(p, {})]
    if checks:  # every evaluation checks the same number of trajectories: the mean is the pooled pass rate
        summary["token_check_pass_rate"] = sum(checks) / len(checks)
    for key in ("warmstart_seconds", "rl_seconds", "recovery_seconds", "control_seconds"):
        if key in s:
            summary[key] = round(s[key], 2)
    if cfg.train.steps:  # train.steps=0 ran no RL: no per-step time to report
        summary["seconds_per_rl_step"] = round(s.get("rl_seconds", 0.0) / cfg.train.steps, 4)
    summary.update(run.rewards.summary_fields())  # e.g. a learned reward's rm_pair_accuracy
    summary["peak_rss_mb"] = round(peak_rss_mb(), 1)
    write_text_atomic(run.dir / "summary.json", jsonsafe.dumps(summary, indent=2))
    plot_curves(run.logger.path, run.dir / "curves.png")
    write_report(run.dir)
    run.logger.finish(run.dir, summary, read_samples(run.dir))
    run.logger.close()
    print_summary(summary, warm_start=bool(cfg.warmstart.steps or cfg.warmstart.init_from))
    print_results(summary, run.dir)
    return summary


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024.0 if sys.platform != "darwin" else peak / 2**20


def print_summary(summary: dict[str, Any], warm_start: bool = False) -> None:
    """The side-by-side table; the first column says "(warm start)" only when RL started from one."""
    from rich.table import Table

    table = Table(title="held-out accuracy (greedy)")
    cols = [
        ("before RL (warm start)" if warm_start else "before RL", "before_rl"),
        ("after RL", "after_rl"),
        (f"control ({summary.get('control_kind', '')})", "control"),
    ]
    present = [(label, key) for label, key in cols if f"accuracy_{key}" in summary]
    table.add_column("metric")
    for label, _ in present:
        table.add_column(label, justify="right")
    lines = [
        ("accuracy", "accuracy_{}"),
        ("lenient accuracy", "accuracy_{}_lenient"),
        ("mean length", "completion_len_{}"),
    ]
    lines += [
        (k.rsplit("_", 2)[0], k.rsplit("_", 2)[0] + "_{}") for k in summary if k.startswith("pass@") and "after" in k
    ]
    for label, pattern in lines:
        if all(pattern.format(key) in summary for _, key in present):
            table.add_row(label, *[f"{summary[pattern.format(key)]:.3f}" for _, key in present])
    if present:
        console.print(table)


def result_lines(summary: dict[str, Any], run_dir: Path) -> list[str]:
    """The last lines a run prints: held-out accuracy before RL, after RL and of the control, then where the
    run folder, its summary and its report are.

    >>> result_lines({"accuracy_before_rl": 0.62, "accuracy_after_rl": 0.96, "control_kind": "imitation",
    ...     "accuracy_control": 0.71, "wall_seconds": 90.0}, Path("runs/default"))[:2]
    ['accuracy (held-out, greedy): before RL 0.620 | after RL 0.960 | control (imitation) 0.710', 'wall 90.0s']
    """
    parts = [
        (label, summary[key])
        for label, key in (
            ("before RL", "accuracy_before_rl"),
            ("after RL", "accuracy_after_rl"),
            (f"control ({summary.get('control_kind', '')})", "accuracy_control"),
        )
        if isinstance(summary.get(key), (int, float))
    ]
    lines = []
    if parts:
        lines.append("accuracy (held-out, greedy): " + " | ".join(f"{label} {value:.3f}" for label, value in parts))
    lines.append(f"wall {summary['wall_seconds']:.1f}s")
    lines.append(f"run folder: {run_dir}")
    lines.append(f"summary:    {run_dir / 'summary.json'}")
    if (run_dir / "report.html").exists():
        lines.append(f"report:     {run_dir / 'report.html'} (open it in a browser)")
    return lines


def print_results(summary: dict[str, Any], run_dir: Path) -> None:
    """`result_lines`, printed plainly (no markup: a log file keeps them as they are)."""
    for line in result_lines(summary, run_dir):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
