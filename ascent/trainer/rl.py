"""The RL loop. `RLTrainer.step` is the whole algorithm: sample prompts -> rollouts -> rewards ->
advantages -> policy update, each a registered, swappable piece connected by typed records."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

import torch

from ascent.algorithms import ADVANTAGES, FILTERS, AdvantageInput
from ascent.config.schema import RunConfig
from ascent.data.prompts import PromptEncoder
from ascent.data.samplers import SAMPLERS, Draw, SamplerContext
from ascent.policy.model import Policy
from ascent.rewards.runner import RewardResult, RewardRunner, concat_results
from ascent.rollout.batch import concat_batches
from ascent.rollout.collector import Collector, SingleTurnCollector
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.explorers import EXPLORERS, ExplorerContext
from ascent.rollout.types import RolloutBatch, SamplingSettings
from ascent.trainer.checkpoint import rng_state, set_rng_state
from ascent.trainer.learner import Learner
from ascent.trainer.samples import StepSamples
from ascent.trainer.services import RunServices
from ascent.typed import ConfigError

log = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """The run cannot go on (every reward failed, too many NaN losses in a row)."""


class CoTrained(Protocol):
    """A part of the environment trained beside the policy in the same step, on the same advantages (a trainable
    retriever, `ascent.envs.retriever.RetrieverTrainer`). The trainer calls `train(True)` before the step's
    rollouts, `train(False)` after them (evaluation runs in that mode), then `update` after the policy's."""

    def train(self, mode: bool) -> None: ...

    def update(self, batch: RolloutBatch, advantages: torch.Tensor, valid: torch.Tensor) -> dict[str, float]:
        """One update from the step's batch and advantages (N, T); returns metrics."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def reset(self) -> None:
        """Back to the state it was built with (a control run starts from RL's starting point)."""
        ...


@dataclass
class RLParts:
    """The stages the trainer connects."""

    policy: Policy
    rows: list[dict[str, Any]]
    encoder: PromptEncoder
    engine: RolloutEngine
    rewards: RewardRunner
    settings: SamplingSettings
    collector: Optional[Collector] = None
    """The rollout stage (`collect(indices, generator) -> RolloutBatch`); None: a `SingleTurnCollector`
    over engine, encoder and settings. Agent tasks pass an `ascent.agents.AgentCollector`."""
    companions: Sequence[CoTrained] = ()
    """Parts of the environment trained in the same step (an agent task's `companions`)."""


class RLTrainer:
    """GRPO-family training: one short `step`, plus resumable state."""

    def __init__(self, cfg: RunConfig, parts: RLParts) -> None:
        self.cfg, self.parts = cfg, parts
        a = cfg.algorithm
        self.advantage = ADVANTAGES.resolve(a.advantage, key="algorithm.advantage")
        self.filter = FILTERS.resolve(a.filter, key="algorithm.filter")
        self.learner = Learner(parts.policy, cfg)
        self.services = RunServices(cfg, parts, self.learner, self.learner.total_optimizer_steps)
        pieces = {"advantage": self.advantage, "loss": self.learner.loss_fn, "filter": self.filter}
        self.states = {kind: p.state(p.params, self.services) for kind, p in pieces.items() if p.state is not None}
        """The configured pieces' states, by kind (`ascent.algorithms.state.PieceState`)."""
        self.learner.states = list(self.states.values())
        self.learner.check_shardable()  # learner.world_size > 1 with a piece state: refused here, in one line
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.step_count, self.bad_steps = 0, 0
        self.last: Optional[StepSamples] = None
        """The last step's scored batch and advantages (for the sample log)."""
        self._rollout_s = 0.0  # rollout seconds of the current step (several rounds with a refilling filter)
        self._prepared = False
        self.collector = parts.collector or SingleTurnCollector(
            parts.policy, parts.rows, parts.encoder, parts.engine, parts.settings, cfg.rollout.samples_per_prompt
        )
        self.sampler, self.explorer = make_sampler(cfg, parts), make_explorer(cfg, parts, self.collector)

    def step(self) -> dict[str, float]:
        """One RL step; returns its metrics."""
        self.prepare()
        t0 = time.perf_counter()
        for c in self.parts.companions:
            c.train(True)
        try:
            batch, scores, filtering = self.collect()
        finally:
            for c in self.parts.companions:
                c.train(False)
        t1 = time.perf_counter()
        adv = self.advantages(batch, scores)  # (N, T)
        update = self.learner.update(batch, adv, scores.valid, rewards=scores.rewards)
        self.check_update(update)
        for c in self.parts.companions:
            update.update(c.update(batch, adv, scores.valid))
        self.last = StepSamples(batch, scores, adv)
        t2 = time.perf_counter()
        self.step_count += 1
        times = {
            "time/rollout": self._rollout_s,
            "time/reward": t1 - t0 - self._rollout_s,
            "time/update": t2 - t1,
            "time/step": t2 - t0,
            "rollout/tokens_per_s": batch.stats["rollout/completion_tokens"] / max(self._rollout_s, 1e-9),
        }
        stats = {**batch.stats, **scores.stats, **reward_stats(scores, batch), **entropy_stats(batch), **filtering}
        stats.update({**self.sampler.metrics(), **self.explorer.metrics()})
        return {**stats, **update, **times}

    def prepare(self) -> None:
        """The pieces' preparation stages, once per trainer (a state restored by a resume skips its own)."""
        if not self._prepared:
            for state in self.states.values():
                state.prepare()
            self._prepared = True

    def advantages(self, batch: RolloutBatch, scores: RewardResult) -> torch.Tensor:
        """The registered estimator's advantages (N, T), with the extras the pieces' states add."""
        inp = advantage_input(batch, scores)
        for state in self.states.values():
            inp.extras.update(state.advantage_extras(batch))
        return self.advantage(inp, self.cfg.algorithm)

    def sample_and_score(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        """Rollouts for the next `prompts` rows, then their rewards."""
        t0 = time.perf_counter()
        batch = self.rollout(self.sampler.next(prompts))
        self._rollout_s += time.perf_counter() - t0
        errors_before = len(self.parts.rewards.failure_log)
        scores = self.parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields())
        self.check_rewards(scores, self.parts.rewards.failure_log[errors_before:])
        return self.observe(batch, scores)

    def observe(self, batch: RolloutBatch, scores: RewardResult) -> tuple[RolloutBatch, RewardResult]:
        """The round as the explorer amends it (e.g. replayed successes), fed back to the sampler and the
        explorer before any group filter sees it (`observe_round`)."""
        return observe_round(self.explorer, self.sampler, batch, scores)

    def refill(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        """Scored rollouts for `prompts` fresh rows, to replace groups the filter dropped."""
        return self.sample_and_score(prompts)

    def collect(self) -> tuple[RolloutBatch, RewardResult, dict[str, float]]:
        """One step's scored rollouts. With a group filter (`algorithm.filter`), only the groups it keeps,
        refilled from fresh prompts for up to its `max_refill_rounds` extra rounds."""
        self._rollout_s = 0.0
        want = self.cfg.train.prompts_per_step
        batch, scores = self.sample_and_score(want)
        if self.cfg.algorithm.filter == "none":
            return batch, scores, {}
        max_rounds = getattr(self.filter.params, "max_refill_rounds", 0)
        kept_b, kept_s, kept, dropped, rounds = [], [], 0, 0, 0
        while True:
            keep = self.filter(scores.rewards, scores.valid, batch.group_index)  # (G,) bool
            take = keep.nonzero().squeeze(-1)[: want - kept]
            dropped += int((~keep).sum())
            rows = torch.isin(batch.group_index, take).nonzero().squeeze(-1)
            if len(rows):
                kept_b.append(batch.select(rows))
                kept_s.append(select_result(scores, rows))
                kept += len(take)
            if kept >= want or rounds >= max_rounds:
                break
            rounds += 1
            batch, scores = self.refill(want - kept)
        stats = {
            "rollout/dynamic_dropped_groups": float(dropped),
            "rollout/dynamic_refill_rounds": float(rounds),
            "rollout/dynamic_kept_groups": float(kept),
        }
        if not kept_b:  # nothing kept at all: train on the last batch
            return batch, scores, stats
        return concat_batches(kept_b), concat_results(kept_s), stats

    def rollout(self, draw: Draw) -> RolloutBatch:
        """The explorer's batch for the prompts drawn, stamped with the policy version."""
        batch = self.explorer.collect(draw, self.generator)
        batch.policy_version = self.step_count
        return batch

    def check_rewards(self, scores: RewardResult, errors: list[str]) -> None:
        if not bool(scores.valid.any()):
            last = errors[-1] if errors else "every reward returned None (no opinion)"
            raise TrainingError(
                f"step {self.step_count + 1}: every sample's reward failed ({last}); "
                "fix the reward function (see the traceback above) and resume with --resume"
            )

    def check_update(self, update: dict[str, float]) -> None:
        if update.get("loss/skipped_steps", 0.0) > 0:
            self.bad_steps += 1
            log.warning(
                "step %d: non-finite loss or gradient, update skipped (%d in a row)",
                self.step_count + 1,
                self.bad_steps,
            )
            if self.bad_steps >= self.cfg.train.max_bad_steps:
                raise TrainingError(
                    f"{self.bad_steps} steps in a row had a NaN/inf loss "
                    f"(train.max_bad_steps={self.cfg.train.max_bad_steps}); lower train.optim.lr or check the rewards"
                )
        else:
            self.bad_steps = 0

    def fit(self, on_step: Callable[[int, dict[str, float]], None], stop_at: Optional[int] = None) -> None:
        """Run until train.steps (or `stop_at`), calling on_step(step, metrics) after each step."""
        end = min(self.cfg.train.steps, stop_at) if stop_at is not None else self.cfg.train.steps
        while self.step_count < end:
            metrics = self.step()
            on_step(self.step_count, metrics)

    def state_dict(self) -> dict[str, Any]:
        pieces = {kind: state.state_dict() for kind, state in self.states.items()}
        return {
            "step": self.step_count,
            "bad_steps": self.bad_steps,
            "sampler": self.sampler.state_dict(),
            "generator": self.generator.get_state(),
            "learner": self.learner.state_dict(),
            "rng": rng_state(),
            "pieces": pieces,
            "rewards": self.parts.rewards.state_dict(),
            "explorer": self.explorer.state_dict(),
            "companions": [c.state_dict() for c in self.parts.companions],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count, self.bad_steps = state["step"], state["bad_steps"]
        self.sampler.load_state_dict(state["sampler"])
        self.generator.set_state(state["generator"])
        self.learner.load_state_dict(state["learner"])
        set_rng_state(state["rng"])
        saved = state.get("pieces", {})
        for kind, piece_state in self.states.items():
            piece_state.load_state_dict(saved.get(kind, {}))
        self.parts.rewards.load_state_dict(state.get("rewards", {}))
        self.explorer.load_state_dict(state.get("explorer", {}))
        for c, saved_c in zip(self.parts.companions, state.get("companions", [])):
            c.load_state_dict(saved_c)


def make_sampler(cfg: RunConfig, parts: RLParts) -> Any:
    """The configured prompt sampler (`data.sampler`) over the training rows."""
    piece = SAMPLERS.resolve(cfg.data.sampler, key="data.sampler")
    ctx = SamplerContext(parts.rows, cfg.seed, cfg.rollout.samples_per_prompt, cfg.train.steps)
    sampler = piece(ctx)
    if sampler.varies_samples and parts.collector is not None:
        raise ConfigError(
            f"data.sampler={piece.name} gives prompts different group sizes, which only single-turn tasks "
            "support; use a sampler that keeps rollout.samples_per_prompt (e.g. uniform) for agent tasks"
        )
    return sampler


def make_explorer(cfg: RunConfig, parts: RLParts, collector: Collector) -> Any:
    """The configured explorer (`rollout.explorer`) around the run's collector."""
    piece = EXPLORERS.resolve(cfg.rollout.explorer, key="rollout.explorer")
    if parts.collector is not None and not getattr(piece.fn, "agents", piece.name == "plain"):
        raise ConfigError(
            f"rollout.explorer={piece.name} works on single-turn tasks; agent tasks sample with rollout.explorer=plain "
            "or near_miss"
        )
    if parts.collector is None and getattr(piece.fn, "agents", False) and piece.name != "plain":
        raise ConfigError(f"rollout.explorer={piece.name} resumes agent episodes: it needs an agent task (data.task)")
    ctx = ExplorerContext(
        collector,
        parts.policy,
        parts.rows,
        parts.encoder,
        parts.engine,
        parts.settings,
        cfg.rollout.samples_per_prompt,
        cfg.seed,
        scorer=parts.rewards.score,
    )
    return piece(ctx)


def observe_round(
    explorer: Any, sampler: Any, batch: RolloutBatch, scores: RewardResult
) -> tuple[RolloutBatch, RewardResult]:
    """The explorer amends the scored round (e.g. `replay` swaps a kept success into an all-failed group); the
    sampler learns from the round's fresh samples as scored, before the amendment (a replayed success is old
    evidence, not the current policy's pass rate), and the explorer from the amended round, which is returned."""
    rows, fresh_rewards, fresh_valid = batch.row_index, scores.rewards, scores.valid
    batch, rewards, valid, components = explorer.amend(batch, scores.rewards, scores.valid, scores.components)
    scores = RewardResult(rewards, valid, components, dict(scores.stats))
    if rows is not None:
        sampler.observe(rows, fresh_rewards, fresh_valid)
    explorer.observe(batch, scores.rewards, scores.valid)
    return batch, scores


def advantage_input(batch: RolloutBatch, scores: RewardResult) -> AdvantageInput:
    """The estimator's input. extras: the batch's own extras (`RolloutBatch.extras`, e.g. the turn
    structure of agent batches: turn_index, turn_rewards, turn_kind, turn_prefix), `logprobs` (N, T)
    sampled log-probs, `components` (N, K) each reward's value, `finished` (N,) bool, and `task_index`
    (N,) long when rows carry a `task` field."""
    extras = {
        **batch.extras,
        "logprobs": batch.sampled_logprobs,
        "components": scores.components,
        "finished": batch.finished,
    }
    tasks = [f.get("task") for f in batch.fields]
    if all(t is not None for t in tasks):
        names = sorted({str(t) for t in tasks})
        extras["task_index"] = torch.tensor([names.index(str(t)) for t in tasks], dtype=torch.long)
    return AdvantageInput(scores.rewards, scores.valid, batch.group_index, batch.completion_mask, extras)


def select_result(scores: RewardResult, rows: torch.Tensor) -> RewardResult:
    return RewardResult(scores.rewards[rows], scores.valid[rows], scores.components[rows], dict(scores.stats))


def entropy_stats(batch: RolloutBatch) -> dict[str, float]:
    """policy/entropy: the sampling policy's mean per-token entropy, estimated from the sampled tokens as
    -mean log p(token) (an unbiased Monte-Carlo estimate at the sampling temperature; no extra forward)."""
    mask = batch.completion_mask
    if not bool(mask.any()):
        return {}
    return {"policy/entropy": float(-(batch.sampled_logprobs * mask).sum() / mask.sum())}


def reward_stats(scores: RewardResult, batch: RolloutBatch) -> dict[str, float]:
    """reward/mean, reward/std and the share of groups whose rewards are all equal (no signal)."""
    r, valid = scores.rewards, scores.valid
    out = {
        "reward/mean": float(r[valid].mean()) if valid.any() else float("nan"),
        "reward/std": float(r[valid].std()) if valid.sum() > 1 else 0.0,
    }
    groups = batch.group_index
    flat = 0
    for g in torch.unique(groups):
        vals = r[(groups == g) & valid]
        flat += int(vals.numel() > 0 and bool((vals == vals[0]).all()))
    out["reward/zero_std_groups_frac"] = flat / max(1, len(torch.unique(groups)))
    return out
