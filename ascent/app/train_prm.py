"""`ascent make-steps` / `ascent train-prm`: Math-Shepherd step labels for an agent task and a process reward model
trained on them (Wang et al. 2024, "Math-Shepherd: Verify and Reinforce LLMs Step-by-step without Human
Annotations", arXiv:2312.08935). A step is a model turn.

    task rows -> `prm.samples` trajectories per row from `prm.policy` (a run, a HF folder or `demonstrator`)
      -> for each step t but the last: `prm.completions` rollouts that replay turns 0..t exactly and continue
         with the same policy (`ReplayEngine`; the environment must be deterministic, which is checked)
      -> labels: hard_t = 1 if any completion reaches the right answer (reward >= prm.success), soft_t = their
         share; the last step's label is the trajectory's own outcome (prm.completions=0: every step's)
      -> steps.train.jsonl / steps.eval.jsonl (one trajectory per line: ids, starts, ends, outcome, hard, soft)
      -> PRM = trunk (rm.init, LoRA or full) + head read at the last token of each step, BCE on the soft or hard
         labels (`ascent.algorithms.process_rewards.step_bce`), trained by `train_rm.fit`
      -> held-out step accuracy and AUROC against the hard labels -> OUT/ in the reward-model folder format

`algorithm.advantage=prm(path=OUT)` then uses it as step-level credit.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.agents.collector import pack_episodes
from ascent.agents.loop import AgentConfig, rollout
from ascent.agents.scripted import ScriptedEngine
from ascent.agents.trajectory import Trajectory
from ascent.algorithms.process_rewards import auroc, head_at, pack, scores_at, step_bce
from ascent.app.export import policy_at
from ascent.app.pipeline import agent_loop, reward_specs
from ascent.app.runs import RunDirError
from ascent.app.train_rm import fit, reward_model_of, save_reward_model, trunk_policy
from ascent.config.process_reward import ProcessRewardJob, StepDataConfig
from ascent.logging.metrics import console
from ascent.policy.model import count_parameters
from ascent.rewards.reward_model import FORMAT, VERSION
from ascent.rewards.runner import RewardRunner
from ascent.rollout.backends import make_engine
from ascent.rollout.types import Generation, SamplingSettings
from ascent.tasks import DataError, Row, TaskData, load_task, write_jsonl
from ascent.tasks.jsonl import jsonl_objects

DEMONSTRATOR = "demonstrator"
"""`prm.policy` value: the task's scripted demonstrator samples (expert data for `q_evolve(demos=...)`)."""


@dataclass(frozen=True)
class StepRecord:
    """One trajectory with its step labels: the ids, each turn's sampled span [start, end), the outcome (the
    run's reward) and, per step, the hard and soft Math-Shepherd labels."""

    prompt: str
    ids: list[int]
    starts: list[int]
    ends: list[int]
    outcome: float
    hard: list[float]
    soft: list[float]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ReplayEngine:
    """An engine that replays forced turns, then samples: on its k-th call (model turn k of the rollout),
    k <= depth, episode e gets `forced[e][k]` (the ids an earlier trajectory sampled, log-prob 0); later
    calls go to `inner`. Every forced episode is active through turn `depth` (the original trajectory went
    on), so call k holds all of them in order; their contexts are checked against `contexts[e][k]` (a
    mismatch means the environment is not deterministic, so replaying cannot reproduce the state)."""

    def __init__(self, inner: Any, forced: list[list[list[int]]], contexts: list[list[list[int]]], depth: int):
        self.inner, self.forced, self.contexts, self.depth, self.calls = inner, forced, contexts, depth, 0

    def generate(
        self, model: Any, prompt_ids: list[list[int]], n: int, s: SamplingSettings, generator: Any
    ) -> Generation:
        k, self.calls = self.calls, self.calls + 1
        if k > self.depth:
            return self.inner.generate(model, prompt_ids, n, s, generator)
        if len(prompt_ids) != len(self.forced) or n != 1:
            raise RuntimeError(f"replay: turn {k} has {len(prompt_ids)} active episodes, {len(self.forced)} forced")
        if any(list(p) != c[k] for p, c in zip(prompt_ids, self.contexts)):
            raise DataError(
                "the environment did not reproduce a trajectory's observations when its turns were replayed; "
                "Monte Carlo step labels need a deterministic environment"
            )
        rows = [f[k] for f in self.forced]
        tokens = torch.full((len(rows), s.max_new_tokens), s.pad_id, dtype=torch.long)  # (A, max_new)
        for i, ids in enumerate(rows):
            tokens[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
        finished = torch.tensor([bool(r) and r[-1] == s.eos_id for r in rows], dtype=torch.bool)
        return Generation(tokens, torch.zeros(tokens.shape), lengths, finished)


def mc_labels(outcomes: list[float], success: float) -> tuple[float, float]:
    """(hard, soft) label of a step from its completions' rewards: 1 if any reaches `success`, and the share
    that does (Math-Shepherd's hard and soft estimation).

    >>> mc_labels([0.0, 1.0, 0.0, 1.0], 1.0), mc_labels([0.0, 0.0], 1.0)
    ((1.0, 0.5), (0.0, 0.0))
    """
    hits = [o >= success for o in outcomes]
    return float(any(hits)), sum(hits) / len(hits)


class StepSampler:
    """Samples an agent task's trajectories and labels their steps, from its parts: the task's agent wiring,
    the policy (its model and tokenizer; model None with a scripted engine), the engine (None: the agent's
    demonstrator), the loop, the run's rewards and the `prm.*` settings."""

    def __init__(
        self, agent: Any, policy: Any, engine: Any, loop: AgentConfig, runner: RewardRunner, cfg: StepDataConfig
    ) -> None:
        self.agent, self.policy, self.engine, self.loop, self.runner, self.cfg = (
            agent,
            policy,
            engine,
            loop,
            runner,
            cfg,
        )

    @classmethod
    def of(cls, job: ProcessRewardJob, task: TaskData) -> "StepSampler":
        """The sampler of a job: its policy (or the task's demonstrator) with the recipe's loop and rewards."""
        if task.agent is None:
            raise DataError("step labels are made for agent tasks (a step = a model turn); choose an agent recipe")
        loop = replace(agent_loop(job.run), temperature=job.prm.temperature)
        runner = RewardRunner(reward_specs(job.run, task), job.run.reward_weights, job.run.reward_timeout_s)
        if job.prm.policy == DEMONSTRATOR:
            from ascent.policy.model import Policy

            return cls(task.agent, Policy(model=None, tokenizer=task.tokenizer), None, loop, runner, job.prm)
        policy = policy_at(job.prm.policy, job.run)
        policy.model.eval()
        return cls(task.agent, policy, make_engine(job.run.rollout, precision="model"), loop, runner, job.prm)

    def episodes(self, rows: list[Row], n: int, seed: int, replay: Optional[ReplayEngine] = None) -> list[Trajectory]:
        engine = self.engine
        if engine is None:
            engine = ScriptedEngine(self.policy.tokenizer, self.agent.demonstrator(rows, random.Random(seed)))
        if replay is not None:
            replay.inner, engine = engine, replay
        tasks = [self.agent.env_task(r) for r in rows]
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            return rollout(engine, self.policy, tasks, self.agent.make_env, self.loop, n, generator)

    def outcomes(self, trajs: list[Trajectory], rows: list[Row], n: int) -> list[float]:
        """The run's reward of each trajectory (n per row, row-major); NaN where the reward failed."""
        batch = pack_episodes(trajs, rows, n, self.policy.tokenizer)
        scored = self.runner.score(batch.prompts, batch.completions, batch.reward_fields())
        return torch.where(scored.valid, scored.rewards, torch.full_like(scored.rewards, float("nan"))).tolist()

    def records(self, rows: list[Row], seed: int) -> list[StepRecord]:
        """`prm.samples` trajectories per row with their steps labelled (`prm.completions` per step)."""
        n, c = self.cfg.samples, self.cfg.completions
        trajs = self.episodes(rows, n, seed)
        traj_rows = [r for r in rows for _ in range(n)]
        outcome = self.outcomes(trajs, rows, n)
        labels = [[None] * len(t.turns) for t in trajs]  # (hard, soft) per step
        for i, t in enumerate(trajs):  # the last step's label (every step's without completions): the outcome
            if t.turns and outcome[i] == outcome[i]:
                labels[i][-1 if c else 0 :] = [mc_labels([outcome[i]], self.cfg.success)] * (1 if c else len(t.turns))
        depth = max((len(t.turns) for t in trajs), default=0) - 1
        for d in range(depth if c else 0):
            jobs = [i for i, t in enumerate(trajs) if len(t.turns) > d + 1 and outcome[i] == outcome[i]]
            if not jobs:
                continue
            forced = [[trajs[i].ids[u.start : u.end] for u in trajs[i].turns[: d + 1]] for i in jobs for _ in range(c)]
            contexts = [[trajs[i].ids[: u.start] for u in trajs[i].turns[: d + 1]] for i in jobs for _ in range(c)]
            replay = ReplayEngine(None, forced, contexts, d)
            done = self.episodes([traj_rows[i] for i in jobs], c, seed + 1000 * (d + 1), replay)
            got = self.outcomes(done, [traj_rows[i] for i in jobs], c)
            for j, i in enumerate(jobs):
                finished = [o for o in got[j * c : (j + 1) * c] if o == o]
                labels[i][d] = mc_labels(finished, self.cfg.success) if finished else None
        out = []
        for i, t in enumerate(trajs):
            if not t.turns or any(lab is None for lab in labels[i]):
                continue
            out.append(
                StepRecord(
                    traj_rows[i]["prompt"],
                    list(t.ids),
                    [u.start for u in t.turns],
                    [u.end for u in t.turns],
                    float(outcome[i]),
                    [lab[0] for lab in labels[i]],
                    [lab[1] for lab in labels[i]],
                )
            )
        return out


def make_steps(job: ProcessRewardJob) -> tuple[list[StepRecord], list[StepRecord]]:
    """(training, held-out) step records from the recipe's task: `prm.num_train` training rows and
    `prm.num_eval` held-out rows, shuffled with the seed."""
    run, seed = job.run, job.prm_seed
    if job.prm.policy is None:
        raise DataError("making step labels needs prm.policy (a run, a HF folder or 'demonstrator') or prm.file")
    task = load_task(run.data, run.seed if run.data.split_seed is None else run.data.split_seed)
    sampler = StepSampler.of(job, task)
    rng = random.Random(seed)
    train = sampler.records(rng.sample(task.train, min(job.prm.num_train, len(task.train))), seed)
    held = sampler.records(rng.sample(task.eval, min(job.prm.num_eval, len(task.eval))), seed + 1)
    if not train or not held:
        raise DataError(f"no {'training' if not train else 'held-out'} trajectory got step labels")
    return train, held


def read_steps(path: str | Path) -> list[StepRecord]:
    """The step records of a JSONL file, each line checked (DataError naming the file and line)."""
    out = []
    keys = ("prompt", "ids", "starts", "ends", "outcome", "hard", "soft")
    missing = "a step record needs a string prompt and ids, starts, ends, outcome, hard, soft (got {got})"
    for n, row in jsonl_objects(path, ("prompt",), missing, kind="step data"):
        if any(k not in row for k in keys):
            raise DataError(f"{path}:{n}: a step record needs fields {', '.join(keys)}")
        rec = StepRecord(**{k: row[k] for k in keys})
        spans = list(zip(rec.starts, rec.ends))
        if (
            not spans
            or not len(spans) == len(rec.hard) == len(rec.soft)
            or any(not 1 <= s < e <= len(rec.ids) for s, e in spans)
        ):
            raise DataError(f"{path}:{n}: starts, ends, hard and soft need one entry per step, spans inside ids")
        out.append(rec)
    if not out:
        raise DataError(f"step data {str(path)!r} holds no records")
    return out


def load_steps(job: ProcessRewardJob) -> tuple[list[StepRecord], list[StepRecord]]:
    """(training, held-out) records: read from `prm.file` (held out: `prm.eval_file`, else its last `eval_frac`),
    or made from the task (`make_steps`)."""
    p = job.prm
    if p.file is None:
        return make_steps(job)
    records = read_steps(p.file)
    if p.eval_file is not None:
        return records, read_steps(p.eval_file)
    cut = len(records) - max(1, round(p.eval_frac * len(records)))
    if cut < 1:
        raise DataError(f"step data {p.file!r} has {len(records)} record(s): too few to hold some out")
    return records[:cut], records[cut:]


def write_steps(records: list[StepRecord], path: str | Path) -> Path:
    return write_jsonl((r.to_json() for r in records), path)


def _packed(records: list[StepRecord], label: str, pad: int, device: Any) -> dict[str, torch.Tensor]:
    """Records packed for the model, with the labels (B, M) of `label` (NaN past a row's steps)."""
    from ascent.algorithms.process_rewards import TurnRecord

    data = pack(
        [TurnRecord(tuple(r.ids), tuple(r.starts), tuple(e - 1 for e in r.ends), r.outcome) for r in records], pad
    )
    labels = torch.full(data["last"].shape, float("nan"))
    for i, r in enumerate(records):
        labels[i, : len(r.ends)] = torch.tensor(getattr(r, label), dtype=torch.float32)
    return {**{k: v.to(device) for k, v in data.items()}, "labels": labels.to(device)}


def step_metrics(rm: Any, records: list[StepRecord], pad: int, micro_batch: int) -> dict[str, float]:
    """Held-out step accuracy ((σ(score) > 0.5) == hard label) and AUROC against the hard labels."""
    data = _packed(records, "hard", pad, "cpu")
    logits = scores_at(rm, data["ids"], data["mask"], data["last"], micro_batch)  # (B, M), NaN off steps
    live = data["last"] >= 0
    prob, hard = torch.sigmoid(logits[live]), data["labels"][live] > 0.5
    return {"step_accuracy": float(((prob > 0.5) == hard).float().mean()), "step_auroc": auroc(prob, hard)}


def train_prm(job: ProcessRewardJob) -> dict[str, Any]:
    """Make or read the step data, train the process reward model, save it to `job.out_dir`; returns its
    reward_model.json."""
    out = job.out_dir
    if out.exists() and any(out.iterdir()) and not job.rm.overwrite:
        raise RunDirError(f"{out} already exists; set rm.overwrite=true or choose another rm.out")
    t0 = time.perf_counter()
    train, held = load_steps(job)
    policy = trunk_policy(job)
    rm = reward_model_of(job, policy)
    tok = policy.tokenizer
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    steps = sum(len(r.ends) for r in train)
    console.print(
        f"[bold]ascent train-prm[/bold] -> [cyan]{out}[/cyan]: {len(train)} training trajectories ({steps} steps, "
        f"{sum(sum(r.hard) for r in train) / max(steps, 1):.2f} hard-positive), {len(held)} held-out; "
        f"{count_parameters(rm, trainable_only=True):,} trainable parameters; {job.rm.steps} steps"
    )

    def batch_loss(micro: list[StepRecord]) -> tuple[torch.Tensor, dict[str, float]]:
        data = _packed(micro, job.prm.label, pad, rm.head.weight.device)
        logits = head_at(rm, data["ids"], data["mask"], data["last"])  # (B, M)
        live = data["last"] >= 0
        return step_bce(logits[live], data["labels"][live])

    def held_out() -> dict[str, float]:
        return step_metrics(rm, held, pad, job.rm.score_micro_batch_size)

    result = fit(job, rm, tok, train, held, batch_loss, held_out)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "kind": "process",
        "hidden_size": int(rm.lm.config.hidden_size),
        "max_length": result["max_length"],
        "micro_batch_size": job.rm.score_micro_batch_size,
        "step_accuracy": result["step_accuracy"],
        "step_auroc": None if result["step_auroc"] != result["step_auroc"] else result["step_auroc"],
        "curve": [{k: (None if v != v else v) for k, v in c.items()} for c in result["curve"]],
        "label": job.prm.label,
        "train_trajectories": len(train),
        "train_steps": steps,
        "held_out_trajectories": len(held),
        "held_out_steps": sum(len(r.ends) for r in held),
        "last_step": result["last_step"],
        "init": job.rm.init,
        "recipe": job.run.name,
        "prm": asdict(job.prm),
        "rm": asdict(job.rm),
        "seconds": round(time.perf_counter() - t0, 2),
    }

    def write_data(folder: Path) -> None:
        write_steps(train, folder / "steps.train.jsonl")
        write_steps(held, folder / "steps.eval.jsonl")

    save_reward_model(out, rm, tok, meta, {}, write_data)
    return meta
