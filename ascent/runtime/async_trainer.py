"""runtime=ray: the learner in the driver, rollout workers as Ray actors sampling ahead within K versions.

The step is `RLTrainer.step`, unchanged; `AsyncTrainer` overrides its one rollout hook, `sample_and_score`.

Schedule (K = ray.max_staleness). Step s (0-based) trains on batch s; batch s is requested as soon as the
learner holds version max(0, s - K), with that version's weights. So K + 1 batches are in flight, each is
at most K versions old when consumed, and which version samples which rows does not depend on timing:
the run is reproducible. K = 0 is synchronous and chains the trainer's generator from batch to batch like
the local loop, so it reproduces `runtime=local` (same seed -> same parameters).

Weights: after each update the trainable tensors are `ray.put` once (a new version); a request carries the
reference, and a worker loads it only when its version differs. Stale batches: the learner's pre-update
log-probs are the proximal ("old") policy and the log-probs recorded at sampling time the behaviour policy;
ratio-based losses weight each token by min(pi_old / pi_sampler, algorithm.tis_cap) (`tis_weight`).

Reward workers (ray.reward_workers > 0): rollout workers only sample; each rollout call is chained to a
scoring call on a reward actor (`WorkerPool`), so batches are scored while the learner trains. Rewards with
state (e.g. trace) are scored here, in the learner's process, whatever the setting: their state is one
sequence of updates in the order the learner consumes batches (exactly the local loop's order), and it is
checkpointed with the trainer; spread over actors it would fork, or depend on which actor a batch met.

Partial rollouts (ray.partial_rollout_tokens = L > 0, K >= 2; `ascent.runtime.partial`): the batch consumed
at step s is sampled in segments, one per version from s - K to s - 1: segment j runs under version s - K + j
and samples at most L new tokens per open sequence; the last one (version s - 1) runs to the end. So every
batch is finished under the version before the learner's, while the learner trains step s - 1: partial
rollouts never make the learner wait longer than the K-bounded schedule does, and which version samples
which token is fixed by the schedule, so a run stays reproducible.

Weight broadcast (ray.broadcast=chain; `ascent.runtime.broadcast`): instead of one ray.put fetched by every
worker, each version goes in chunks to the first worker, which forwards every chunk to the next while the
rest arrive (ECHO-2's peer-assisted pipelined broadcast); requests carry `CHAIN` instead of the reference.

Streaming hand-off (ray.handoff=sample): `ascent.runtime.stream.StreamTrainer`, a subclass of this one.

Faults and resume: see `WorkerPool` (a dead worker's batch is re-run unchanged; a dead reward worker's
batch is scored again). A checkpoint holds the data cursor, the RNG states, the policy version (the step)
and the requests in flight (rows and seeds); after a resume those batches are sampled again from their
first token, with the resumed weights (they were never consumed, so every row is still trained on exactly
once; their samples differ from the uninterrupted run's). Partial sequences carried over are not
checkpointed: they are dropped with their batch and re-sampled.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Optional

import ray
import torch

from ascent.config.schema import RunConfig
from ascent.rewards.runner import RewardResult
from ascent.rollout.types import RolloutBatch
from ascent.runtime.broadcast import ChainBroadcast
from ascent.runtime.partial import supports_partial, version_stats
from ascent.runtime.pool import WorkerPool
from ascent.runtime.worker import (
    CHAIN,
    RewardSpec,
    RewardWorker,
    RolloutRequest,
    RolloutResult,
    RolloutWorker,
    trainable_state,
)
from ascent.trainer.rl import RLParts, RLTrainer
from ascent.typed import ConfigError

log = logging.getLogger(__name__)


class AsyncTrainer(RLTrainer):
    """An `RLTrainer` whose scored batches come from Ray rollout workers, at most K versions stale."""

    def __init__(self, cfg: RunConfig, parts: RLParts) -> None:
        super().__init__(cfg, parts)
        if self.sampler.varies_samples or cfg.rollout.explorer != "plain":
            raise ConfigError(
                f"runtime=ray samples fixed-size groups from the current policy: data.sampler={cfg.data.sampler} "
                f"and rollout.explorer={cfg.rollout.explorer} need runtime=local"
            )
        if parts.companions:
            raise ConfigError(
                "runtime=ray: the task trains parts of its environment beside the policy (e.g. "
                "search_world's retriever=plackett_luce), which the rollout workers would not see; use runtime=local"
            )
        self.K = cfg.ray.max_staleness
        self.pending: deque[RolloutRequest] = deque()  # the steps' batches requested, not yet consumed, in order
        self.next_id = 0
        self.row_counts = torch.zeros(len(parts.rows), dtype=torch.long)  # (rows,) times each row was trained on
        self.totals = dict(TOTALS)
        self.score_here = bool(parts.rewards.state_dict())  # rewards with state (e.g. trace) score in one place: here
        self.partial_tokens = cfg.ray.partial_rollout_tokens if self.K >= 2 else 0
        self.segments: dict[
            int, tuple[int, int, bool]
        ] = {}  # partial: request id -> (segments issued, last version, last one final)
        self.pool: Optional[WorkerPool] = None
        self.broadcast: Optional[ChainBroadcast] = None  # ray.broadcast=chain
        self.weights: tuple[int, Any] = (-1, None)  # (version, ObjectRef of its trainable tensors)
        self._publish_s = 0.0  # seconds of the last ray.put of the weights
        self._owns_ray = False
        self._step_log: list[dict[str, float]] = []  # per consumed batch of the current step

    # -- the step -------------------------------------------------------------------------------------

    def step(self) -> dict[str, float]:
        """`RLTrainer.step`, then request the batches the new version may sample; adds async/ metrics."""
        self._step_log = []
        metrics = super().step()
        self.pending.popleft()  # the step's batch, consumed (it counted as in flight until now)
        self.fill()  # workers start on the next batches while the caller evaluates, logs and checkpoints
        return {**metrics, **self.async_metrics(metrics)}

    def sample_and_score(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        """The step's batch: the oldest request."""
        t0 = time.perf_counter()
        self.fill()
        return self.receive(self.pending[0], t0)

    def refill(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        """A fresh request for `prompts` rows, at the current version (a group filter's refill)."""
        t0 = time.perf_counter()
        self.fill()
        return self.receive(self.issue(self.sampler.next(prompts).indices), t0)

    def receive(self, req: RolloutRequest, t0: float) -> tuple[RolloutBatch, RewardResult]:
        """The scored batch of `req`, re-sampled if it came back too stale; the wait since `t0` counts as
        rollout time."""
        if self.broadcast is not None:
            self.broadcast.check()  # a worker the chain did not reach: one line, not a hang
        result = self.pool.result(req.id)
        while self.step_count - result.batch.policy_version > self.K:  # never under the schedule; a guard
            self.totals["dropped_stale"] += 1
            result = self.reissue(req)
        batch, scores = self.accept(req, result)
        self._rollout_s += time.perf_counter() - t0  # time/rollout: the learner's wait for its batch
        return batch, scores

    def accept(self, req: RolloutRequest, result: RolloutResult) -> tuple[RolloutBatch, RewardResult]:
        """Score (when rewards have state), check, count; chain the generator (K = 0)."""
        batch, scores, errors = result.batch, result.scores, result.reward_errors
        if scores is None:
            before = len(self.parts.rewards.failure_log)
            scores = self.parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields())
            errors = self.parts.rewards.failure_log[before:]
        self.check_rewards(scores, errors)
        batch, scores = self.observe(batch, scores)
        if result.rng_state is not None:
            self.generator.set_state(result.rng_state)
        self.row_counts[torch.tensor(req.indices, dtype=torch.long)] += 1
        self.totals["samples"] += len(batch)
        versions = version_stats(result.token_versions, self.step_count) if result.token_versions is not None else {}
        self._step_log.append(
            {
                "async/staleness": float(self.step_count - batch.policy_version),
                "async/request": float(req.id),
                **result.times,
                **versions,
            }
        )
        return batch, scores

    def async_metrics(self, update: dict[str, float]) -> dict[str, float]:
        """async/: staleness, importance weights, the head batch's worker timings, running totals."""
        head = self._step_log[0]
        out = {k: v for k, v in head.items() if k != "async/staleness"}
        out["async/staleness_mean"] = sum(b["async/staleness"] for b in self._step_log) / len(self._step_log)
        out["async/tis_weight_mean"] = update.get("loss/tis_weight_mean", 1.0)
        out["async/policy_version"] = float(self.step_count - 1)
        out["async/weight_sync_s"] = self._publish_s + head.get("async/worker_sync_s", 0.0)
        out.update({f"async/{k}": float(v) for k, v in self.running_totals().items()})
        return out

    def running_totals(self) -> dict[str, int]:
        """samples, dropped_stale, workers_replaced, requests_retried: since the run began (checkpoint + this pool)."""
        p = self.pool
        live = (
            {
                "workers_replaced": p.replaced,
                "requests_retried": p.retried,
                "reward_workers_replaced": p.scorers_replaced,
                "rewards_rescored": p.rescored,
            }
            if p
            else {}
        )
        return {k: v + live.get(k, 0) for k, v in self.totals.items()}

    # -- requests and weights -------------------------------------------------------------------------

    def fill(self) -> None:
        """Request batches up to K + 1 ahead of the learner (never past train.steps); partial rollouts:
        continue the batches in flight under the current version."""
        if self.pool is None:
            self.start()
        if self.partial_tokens:
            for k, req in enumerate(self.pending):
                self.advance(req, k)
        while len(self.pending) < self.K + 1 and self.step_count + len(self.pending) < self.cfg.train.steps:
            self.pending.append(
                self.issue(self.sampler.next(self.cfg.train.prompts_per_step).indices, ahead=len(self.pending))
            )

    def issue(
        self, indices: list[int], request_id: Optional[int] = None, ahead: Optional[int] = None
    ) -> RolloutRequest:
        """A request for `indices` at the current version, sent to the pool. `ahead`: it is consumed that
        many steps after the current one (partial rollouts: its first segment; None: in one piece)."""
        if request_id is None:
            request_id, self.next_id = self.next_id, self.next_id + 1
        req = RolloutRequest(
            request_id,
            list(indices),
            self.step_count,
            self.current_weights(),
            request_seed(self.cfg.seed, request_id),
            self.generator.get_state() if self.K == 0 else None,
        )
        if self.partial_tokens and ahead is not None:
            self.segments.pop(request_id, None)
            self.advance(req, ahead)
        else:
            self.pool.submit(req)
        return req

    def advance(self, req: RolloutRequest, ahead: int) -> None:
        """Partial rollouts: the request's next segment, under the current version (at most one per version);
        capped at ray.partial_rollout_tokens unless the batch is consumed within a step (then run to the end)."""
        issued, last, final = self.segments.get(req.id, (0, -1, False))
        if final or last == self.step_count:
            return
        final = ahead <= 1
        cap = None if final else self.partial_tokens
        self.pool.submit(
            replace(
                req,
                version=self.step_count,
                weights=self.current_weights(),
                seed=segment_seed(req.seed, issued),
                rng_state=None,
                partial=True,
                segment=issued,
                max_tokens=cap,
            )
        )
        self.segments[req.id] = (issued + 1, self.step_count, final)

    def reissue(self, req: RolloutRequest) -> RolloutResult:
        """The same rows and seed again, sampled with the current version."""
        self.issue(req.indices, req.id)
        return self.pool.result(req.id)

    def current_weights(self) -> Any:
        """The ObjectRef of the learner's current version, put once per version."""
        version, ref = self.weights
        if version != self.step_count:
            t0 = time.perf_counter()
            state = trainable_state(self.parts.policy.model)
            if self.broadcast is not None:  # peers forward it; requests say where to look
                self.broadcast.send(self.step_count, state)
                self.weights = (self.step_count, CHAIN)
            else:
                self.weights = (self.step_count, ray.put(state))
            self._publish_s = time.perf_counter() - t0
            return self.weights[1]
        return ref

    def start(self) -> None:
        """Join or start Ray, check its CPUs, start the workers."""
        r = self.cfg.ray
        if not ray.is_initialized():
            ray.init(address=r.address, include_dashboard=False)
            self._owns_ray = True
        need, have = (
            (r.rollout_workers + r.reward_workers) * r.num_cpus_per_worker,
            ray.cluster_resources().get("CPU", 0.0),
        )
        if need > have:
            workers = (
                f"(ray.rollout_workers={r.rollout_workers} + ray.reward_workers={r.reward_workers})"
                if r.reward_workers
                else f"ray.rollout_workers={r.rollout_workers}"
            )
            raise ValueError(
                f"{workers} x ray.num_cpus_per_worker={r.num_cpus_per_worker} needs {need:g} CPUs, "
                f"the Ray cluster has {have:g}; lower one of them (fractions are allowed)"
            )
        if r.rollout_workers > self.K + 1:
            log.warning(
                "ray.rollout_workers=%d but at most max_staleness + 1 = %d batches are in flight: %d workers stay idle",
                r.rollout_workers,
                self.K + 1,
                r.rollout_workers - self.K - 1,
            )
        if self.partial_tokens and not supports_partial(self.collector):
            raise ValueError(
                f"ray.partial_rollout_tokens={self.partial_tokens}: partial rollouts continue single-turn sequences, "
                f"this task's collector is {type(self.collector).__name__}; set ray.partial_rollout_tokens=0"
            )
        scorers = r.reward_workers if not self.score_here else 0
        if r.reward_workers and self.score_here:
            log.warning(
                "ray.reward_workers=%d unused: rewards with state (%s) are scored in the learner's process, "
                "in the order batches are consumed",
                r.reward_workers,
                ", ".join(self.parts.rewards.state_dict()),
            )
        spec = RewardSpec.of(self.parts.rewards)
        rollout_rewards = None if self.score_here or scorers else spec
        self.pool = WorkerPool(
            actor_factory(
                self.collector, rollout_rewards, r.num_cpus_per_worker, self.cfg.malloc, r.broadcast == "chain"
            ),
            r.rollout_workers,
            scorer_factory(spec, r.num_cpus_per_worker),
            scorers,
            replace_dead=r.broadcast != "chain",
        )
        if r.broadcast == "chain":
            self.broadcast = ChainBroadcast(self.pool.workers, r.broadcast_chunk_mb, self.cfg.learner.timeout_s)
        self.pending = deque(
            self.resubmit(req, k) for k, req in enumerate(self.pending)
        )  # in flight at the checkpoint: sampled again

    def resubmit(self, req: RolloutRequest, ahead: int) -> RolloutRequest:
        """A request restored from a checkpoint, sent again with the resumed version's weights (partial
        rollouts: from its first segment; sequences carried over were not checkpointed)."""
        req = replace(
            req,
            version=self.step_count,
            weights=self.current_weights(),
            rng_state=self.generator.get_state() if self.K == 0 else None,
        )
        if self.partial_tokens:
            self.segments.pop(req.id, None)
            self.advance(req, ahead)
        else:
            self.pool.submit(req)
        return req

    def close(self) -> None:
        """Stop the workers (and Ray, when this trainer started it)."""
        if self.pool is not None:
            self.totals = self.running_totals()
            self.pool.shutdown()
            self.pool = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    def fit(self, on_step: Callable[[int, dict[str, float]], None], stop_at: Optional[int] = None) -> None:
        try:
            super().fit(on_step, stop_at)
        finally:
            self.close()

    # -- checkpoint -----------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """`RLTrainer.state_dict` plus the requests in flight (rows, ids, seeds) and the sample ledger."""
        pending = [{"id": r.id, "indices": list(r.indices), "seed": r.seed} for r in self.pending]
        return {
            **super().state_dict(),
            "async": {
                "pending": pending,
                "next_id": self.next_id,
                "row_counts": self.row_counts.clone(),
                "totals": self.running_totals(),
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        a = state.get("async")
        if a is None:  # written by runtime=local: nothing in flight, no ledger of the rows trained on so far
            return
        self.pending = deque(
            RolloutRequest(p["id"], p["indices"], self.step_count, None, p["seed"]) for p in a["pending"]
        )
        self.next_id, self.row_counts, self.totals = a["next_id"], a["row_counts"].clone(), {**TOTALS, **a["totals"]}


TOTALS = {
    "samples": 0,
    "dropped_stale": 0,
    "requests_retried": 0,
    "workers_replaced": 0,
    "reward_workers_replaced": 0,
    "rewards_rescored": 0,
}
"""Running totals (async/ metrics, checkpointed): samples trained on, and fault counters."""


def request_seed(seed: int, request_id: int) -> int:
    """The sampling seed of request `request_id` of a run seeded `seed`.

    >>> request_seed(0, 5), request_seed(1, 5) != request_seed(0, 5)
    (5, True)
    """
    return (seed * 1_000_003 + request_id) % (2**63)


def segment_seed(seed: int, segment: int) -> int:
    """The seed of a partial rollout's segment `segment` of a request seeded `seed` (segment 0: the
    request's own seed, so a first segment draws what a one-piece rollout draws).

    >>> segment_seed(5, 0), segment_seed(5, 1) != segment_seed(5, 2)
    (5, True)
    """
    return (seed + segment * 0x9E3779B97F4A7C15) % (2**63)


def actor_factory(
    collector: Any, rewards: Optional[RewardSpec], num_cpus: float, malloc: str = "tuned", threaded: bool = False
) -> Callable[[int], Any]:
    """make_actor(index) -> a RolloutWorker actor; the collector (holding the policy copy) is put once.
    `threaded`: the actor runs calls on a few threads (broadcast chunks arrive while it samples)."""
    options = {"max_concurrency": 8} if threaded else {}
    remote = ray.remote(num_cpus=num_cpus, max_restarts=0, **options)(RolloutWorker)
    blob = ray.put(collector)
    return lambda i: remote.remote(blob, rewards, max(1, int(num_cpus)), malloc)


def scorer_factory(rewards: RewardSpec, num_cpus: float) -> Callable[[int], Any]:
    """make_scorer(index) -> a RewardWorker actor (its own RewardRunner, built from `rewards`)."""
    remote = ray.remote(num_cpus=num_cpus, max_restarts=0)(RewardWorker)
    return lambda i: remote.remote(rewards)
