"""Workers: a rollout worker (a copy of the policy inside a `Collector`, plus, unless reward workers
score, the reward runner that scores its batches) and a reward worker (a `RewardRunner` only).

`RolloutWorker` and `RewardWorker` are plain classes (tests call them in-process); `WorkerPool` turns them
into Ray actors. `RolloutWorker.run(request)` loads the request's policy version when the worker does not
hold it yet (the weights travel once per version through Ray's object store), samples the request's rows
with the request's own generator (or, for a partial-rollout segment, continues the carried sequences) and
scores the finished batch with the existing `RewardRunner` (per-call timeouts). `RewardWorker.score(result)`
does the scoring part on another actor (`ray.reward_workers`). Either way a slow reward delays a worker,
never the learner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.rewards.runner import RewardResult, RewardRunner, parse_spec_args
from ascent.rollout.collector import Collector
from ascent.rollout.types import RolloutBatch
from ascent.runtime.broadcast import ChunkReceiver
from ascent.runtime.memory import tune_malloc
from ascent.runtime.partial import Carry, sample_segment, start, to_batch


@dataclass
class RolloutRequest:
    """One batch to sample: training rows, the policy version to sample with, and its randomness."""

    id: int
    """Issue order. The learner consumes the step's batches in this order."""
    indices: list[int]
    """Training rows (prompts) of the batch."""
    version: int
    """Learner step whose weights sample the batch (stamped into `RolloutBatch.policy_version`)."""
    weights: Any
    """That version's trainable tensors: a Ray ObjectRef (one `ray.put` per version) or, in-process, the dict;
    `CHAIN`: the worker receives them over the broadcast chain (`ray.broadcast=chain`)."""
    seed: int
    """Seed of the request's own generator (used when `rng_state` is None); re-running the request with
    the same weights reproduces the batch exactly."""
    rng_state: Optional[torch.Tensor] = None
    """max_staleness=0: the trainer's generator state, chained from request to request exactly as the
    local loop consumes it (so K=0 reproduces the local run)."""
    attempts: int = 0
    """Times the request was sent to a worker that died before answering."""
    partial: bool = False
    """A partial-rollout segment (`ray.partial_rollout_tokens`): sample at most `max_tokens` new tokens per
    open sequence of `carry` (segment 0: of a fresh batch), then answer with the carry or the finished batch."""
    segment: int = 0
    """Which segment of request `id` this call samples (0, 1, ...): they run one after another."""
    max_tokens: Optional[int] = None
    """Cap of this segment (None: sample to the end, the batch's last segment)."""
    carry: Optional[Carry] = None
    """The previous segment's sequences; attached by the pool when it sends the segment to a worker."""


@dataclass
class RolloutResult:
    """A sampled batch, its scores (None: the trainer scores it, for rewards with state) and timings."""

    request_id: int
    batch: Optional[RolloutBatch]
    """The finished batch; None while a partial rollout still has open sequences (see `carry`)."""
    scores: Optional[RewardResult]
    reward_errors: list[str]
    """Failure messages of this batch's reward calls (the trainer's check for "every reward failed")."""
    rng_state: Optional[torch.Tensor]
    """The generator state after sampling, when the request chained one."""
    times: dict[str, float] = field(default_factory=dict)
    """async/worker_sync_s (loading new weights), async/worker_rollout_s, async/worker_reward_s."""
    carry: Optional[Carry] = None
    """Partial rollouts: the sequences so far (continued by the next segment while `batch` is None)."""
    token_versions: Optional[torch.Tensor] = None
    """Partial rollouts: (N, T) long, the policy version that sampled each token of `batch` (-1 elsewhere)."""

    @property
    def complete(self) -> bool:
        return self.batch is not None


@dataclass
class Scored:
    """A reward worker's answer for one batch."""

    scores: RewardResult
    reward_errors: list[str]
    reward_s: float


@dataclass(frozen=True)
class RewardSpec:
    """What a worker needs to build its own `RewardRunner` (functions are resolved in the worker)."""

    specs: list[str]
    weights: list[float]
    timeout_s: float

    @classmethod
    def of(cls, runner: RewardRunner) -> "RewardSpec":
        """The runner's specs with `file.py:function` paths made absolute (a worker's cwd may differ)."""
        return cls([absolute_file_spec(s) for s in runner.names], list(runner.weights), runner.timeout_s)

    def build(self) -> RewardRunner:
        return RewardRunner(self.specs, self.weights, self.timeout_s)


def score_batch(runner: RewardRunner, batch: RolloutBatch) -> tuple[RewardResult, list[str]]:
    """The runner's scores of `batch` and the failure messages of these calls only."""
    before = len(runner.failure_log)
    scores = runner.score(batch.prompts, batch.completions, batch.reward_fields())
    return scores, runner.failure_log[before:]


def absolute_file_spec(spec: str) -> str:
    """`dir/r.py:fn(k=1)` -> `/abs/dir/r.py:fn(k=1)`; registered names and module specs are unchanged.

    >>> absolute_file_spec("exact_answer")
    'exact_answer'
    >>> absolute_file_spec("/tmp/r.py:fn")
    '/tmp/r.py:fn'
    """
    name, _ = parse_spec_args(spec)
    target, sep, _ = name.rpartition(":")
    if not sep or not target.endswith(".py") or Path(target).is_absolute():
        return spec
    return str(Path(target).resolve()) + spec[len(target) :]


CHAIN = "chain"
"""`RolloutRequest.weights` when the version arrives over the peer broadcast chain (`ascent.runtime.broadcast`)."""


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors a version changes: the trainable parameters (LoRA: the adapters only), detached copies."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def request_generator(req: RolloutRequest) -> torch.Generator:
    """The request's generator: the chained trainer state, or a fresh one seeded by the request."""
    gen = torch.Generator()
    if req.rng_state is not None:
        gen.set_state(req.rng_state)
    else:
        gen.manual_seed(req.seed)
    return gen


class RolloutWorker(ChunkReceiver):
    """Samples and scores requested batches with its own copy of the policy."""

    def __init__(
        self,
        collector: Collector,
        rewards: Optional[RewardSpec],
        threads: int = 1,
        malloc: str = "tuned",
        broadcast_timeout_s: float = 600.0,
    ) -> None:
        torch.set_num_threads(max(1, threads))
        tune_malloc(malloc)
        self._receiver_init()
        self.broadcast_timeout_s = broadcast_timeout_s
        self.collector = collector
        """Holds the worker's policy copy as `collector.policy` (SingleTurnCollector, AgentCollector)."""
        self.rewards = rewards.build() if rewards is not None else None
        self.version = -1

    def load(self, req: RolloutRequest) -> float:
        """Load the request's weights unless this version is already loaded; seconds spent."""
        if req.version == self.version:
            return 0.0
        t0 = time.perf_counter()
        weights = req.weights
        if isinstance(weights, str) and weights == CHAIN:
            weights = self.received(req.version, self.broadcast_timeout_s)
        elif not isinstance(weights, dict):  # an ObjectRef nested in the request: fetched once per version
            import ray

            weights = ray.get(weights)
        _, unexpected = self.collector.policy.model.load_state_dict(weights, strict=False)  # trainable tensors only
        if unexpected:
            raise RuntimeError(
                f"rollout worker: weights of version {req.version} "
                f"do not fit the policy (unexpected {sorted(unexpected)[:5]})"
            )
        self.version = req.version
        return time.perf_counter() - t0

    def run(self, req: RolloutRequest) -> RolloutResult:
        """Sample the request's rows with its policy version, then score them (when this worker scores)."""
        sync_s = self.load(req)
        gen = request_generator(req)
        t0 = time.perf_counter()
        carry, versions = None, None
        if req.partial:
            carry = sample_segment(
                self.collector, req.carry or start(self.collector, req.indices), gen, req.version, req.max_tokens
            )
            carry.rollout_s += time.perf_counter() - t0
            batch, versions = (
                to_batch(self.collector, carry)
                if not carry.open(self.collector.settings.max_new_tokens)
                else (None, None)
            )
        else:
            batch = self.collector.collect(req.indices, gen)
            batch.policy_version = req.version
        t1 = time.perf_counter()
        scores, errors = None, []
        if self.rewards is not None and batch is not None:
            scores, errors = score_batch(self.rewards, batch)
        times = {
            "async/worker_sync_s": sync_s,
            "async/worker_rollout_s": carry.rollout_s if carry else t1 - t0,
            "async/worker_reward_s": time.perf_counter() - t1,
        }
        return RolloutResult(
            req.id,
            batch,
            scores,
            errors,
            gen.get_state() if req.rng_state is not None else None,
            times,
            None if batch is not None else carry,
            versions,
        )

    def ping(self) -> int:
        """The loaded policy version (health check)."""
        return self.version


class RewardWorker:
    """Scores finished batches with its own `RewardRunner` (`ray.reward_workers`): the same per-call
    timeouts, failures recorded the same way (NaN / raise / hang -> the samples are invalid, skipped)."""

    def __init__(self, rewards: RewardSpec) -> None:
        torch.set_num_threads(1)
        self.runner = rewards.build()

    def score(self, result: RolloutResult) -> Optional[Scored]:
        """Scores of `result`'s batch; None when there is nothing to score (an unfinished partial rollout,
        or a batch its rollout worker scored already)."""
        if result.batch is None or result.scores is not None:
            return None
        t0 = time.perf_counter()
        scores, errors = score_batch(self.runner, result.batch)
        return Scored(scores, errors, time.perf_counter() - t0)
