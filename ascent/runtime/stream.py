"""Streaming hand-off between rollout workers and the learner (`ray.handoff=sample`), after AsyncFlow
(Han et al. 2025): a data store between the two sides, fine-grained units of work, the learner consuming
data as it completes within a staleness bound.

Units. The unit of work and of hand-off is one prompt's group (its `rollout.samples_per_prompt` samples):
the smallest piece GRPO's group-relative advantage can use, and what a reward call sees as a group. Today's
path (`ray.handoff=batch`) gives one worker a whole step's batch (P groups) and hands it back whole; here the
P groups of a step are P units spread over all workers.

The store (`SampleStore`, an asyncio Ray actor) holds the queue of units to sample and the finished groups.
Each worker runs one long `serve` call: it pulls the next unit (waiting in the store when there is none),
loads the unit's policy version, samples the group with the unit's own seed, scores it, and puts it in the
store, then pulls again -- no driver round trip, so workers keep sampling while the learner updates.

Staleness, per group. The driver issues a step's P units with the current version v and keeps at most
(K + 1) P units outstanding, exactly the samples the batch path has in flight. Step s takes P finished groups:
first every outstanding group of version s - K (it would be too old at step s + 1; the learner waits for
these only), then the finished groups of the oldest versions. Counting issued and consumed units shows there
are never more than P groups of version <= s - K at step s, so no group is ever dropped as stale and every
consumed group has staleness <= K. Which groups form which batch depends on timing (unlike the batch path,
whose schedule is fixed): a run is not reproducible bit for bit, and K = 0 does not reproduce runtime=local.

Exactly once. Every unit is one training row drawn from the sampler; the store hands each finished unit to
the learner once and forgets it. A worker that dies is replaced; the units it held go back to the front of
the queue (same row, version, seed) with their attempt count raised, and a late answer from an earlier
attempt is ignored. Checkpoint: the outstanding units (rows and seeds) are sampled again after a resume.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import ray
import torch
from ray.exceptions import RayActorError

from ascent.rewards.runner import RewardResult, concat_results
from ascent.rollout.batch import concat_batches
from ascent.rollout.types import RolloutBatch
from ascent.runtime.async_trainer import AsyncTrainer, request_seed
from ascent.runtime.broadcast import ChainBroadcast
from ascent.runtime.pool import MAX_ATTEMPTS
from ascent.runtime.worker import CHAIN, RewardSpec, RolloutRequest, RolloutWorker, score_batch

log = logging.getLogger(__name__)


@dataclass
class Unit:
    """One prompt's group to sample: its training row, policy version and seed."""

    id: int
    row: int
    version: int
    weights: Any
    """The version's ObjectRef, or `CHAIN` (the worker gets it over the broadcast chain)."""
    seed: int
    attempt: int = 0


@dataclass
class Group:
    """A finished unit: its samples (group_index all 0), their scores (None: the learner scores) and timings."""

    unit: Unit
    batch: RolloutBatch
    scores: Optional[RewardResult]
    errors: list[str]
    times: dict[str, float] = field(default_factory=dict)
    worker: int = -1


class SampleStore:
    """The data store between rollout workers and the learner (an asyncio actor: waiting calls hold no thread)."""

    def __init__(self) -> None:
        self.queue: deque[Unit] = deque()
        self.held: dict[int, dict[int, Unit]] = {}  # worker -> unit id -> unit it is sampling
        self.attempts: dict[int, int] = {}  # unit id -> current attempt (older answers are ignored)
        self.ready: dict[int, Group] = {}  # unit id -> finished group, not yet taken
        self.changed = asyncio.Condition()
        self.stopped = False

    async def put_work(self, units: list[Unit], front: bool = False) -> None:
        async with self.changed:
            for u in reversed(units) if front else units:
                self.attempts[u.id] = u.attempt
                (self.queue.appendleft if front else self.queue.append)(u)
            self.changed.notify_all()

    async def next_work(self, worker: int) -> Optional[Unit]:
        """The next unit for `worker` (waits for one); None once the store is stopped."""
        async with self.changed:
            await self.changed.wait_for(lambda: self.queue or self.stopped)
            if self.stopped:
                return None
            unit = self.queue.popleft()
            self.held.setdefault(worker, {})[unit.id] = unit
            return unit

    async def put_group(self, group: Group) -> None:
        async with self.changed:
            self.held.get(group.worker, {}).pop(group.unit.id, None)
            if self.attempts.get(group.unit.id) != group.unit.attempt:
                return  # an answer from an attempt that was given up (its worker was declared dead)
            self.ready[group.unit.id] = group
            del self.attempts[group.unit.id]
            self.changed.notify_all()

    async def take(self, need: list[int], count: int) -> list[Group]:
        """`count` finished groups: every unit of `need` (waited for), then the oldest versions first."""
        async with self.changed:
            await self.changed.wait_for(lambda: all(u in self.ready for u in need) and len(self.ready) >= count)
            chosen = list(need)
            rest = sorted((g.unit.version, g.unit.id) for i, g in self.ready.items() if i not in set(need))
            chosen += [i for _, i in rest[: max(0, count - len(chosen))]]
            return [self.ready.pop(i) for i in chosen]

    async def requeue(self, worker: int) -> int:
        """Put the units `worker` held back at the front of the queue (it died); their attempt count goes up."""
        async with self.changed:
            units = [replace(u, attempt=u.attempt + 1) for u in self.held.pop(worker, {}).values()]
            for u in units:
                if u.attempt >= MAX_ATTEMPTS:
                    raise RuntimeError(f"stream unit {u.id} (row {u.row}) lost its worker {u.attempt} times")
                self.attempts[u.id] = u.attempt
                self.queue.appendleft(u)
            self.changed.notify_all()
            return len(units)

    async def stop(self) -> None:
        async with self.changed:
            self.stopped = True
            self.changed.notify_all()

    async def counts(self) -> dict[str, int]:
        return {"queued": len(self.queue), "ready": len(self.ready), "held": sum(map(len, self.held.values()))}


class StreamWorker(RolloutWorker):
    """A rollout worker that pulls units from the store instead of being handed batches."""

    def serve(self, store: Any, index: int) -> int:
        """Sample, score and hand off units until the store stops; returns the number of units served."""
        served = 0
        while True:
            unit = ray.get(store.next_work.remote(index))
            if unit is None:
                return served
            req = RolloutRequest(unit.id, [unit.row], unit.version, unit.weights, unit.seed)
            sync_s = self.load(req)
            gen = torch.Generator().manual_seed(unit.seed)
            t0 = time.perf_counter()
            batch = self.collector.collect([unit.row], gen)
            batch.policy_version = unit.version
            t1 = time.perf_counter()
            scores, errors = score_batch(self.rewards, batch) if self.rewards is not None else (None, [])
            times = {
                "async/worker_sync_s": sync_s,
                "async/worker_rollout_s": t1 - t0,
                "async/worker_reward_s": time.perf_counter() - t1,
            }
            ray.get(store.put_group.remote(Group(unit, batch, scores, errors, times, index)))
            served += 1


class StreamTrainer(AsyncTrainer):
    """`AsyncTrainer` with the streaming hand-off: per-group units through a `SampleStore`."""

    def __init__(self, cfg, parts) -> None:
        super().__init__(cfg, parts)
        self.P = cfg.train.prompts_per_step
        self.outstanding: dict[int, Unit] = {}  # issued, not consumed
        self.blocks = 0  # P-row draws made from the sampler (one per step's batch)
        self.store: Any = None
        self.actors: list[Any] = []
        self.serving: list[Any] = []  # each worker's serve() ObjectRef
        self.make_actor: Any = None
        self._groups: list[Group] = []

    # -- the step -------------------------------------------------------------------------------------

    def step(self) -> dict[str, float]:
        self._step_log = []
        metrics = super(AsyncTrainer, self).step()  # RLTrainer.step: no pending deque here
        self.fill()
        return {**metrics, **self.async_metrics(metrics)}

    def sample_and_score(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        t0 = time.perf_counter()
        self.fill()
        s, K = self.step_count, self.K
        need = [u.id for u in self.outstanding.values() if u.version <= s - K]
        return self.receive_groups(need, prompts, t0)

    def refill(self, prompts: int) -> tuple[RolloutBatch, RewardResult]:
        t0 = time.perf_counter()
        units = self.new_units(self.sampler.next(prompts).indices)
        ray.get(self.store.put_work.remote(units, front=True))
        return self.receive_groups([u.id for u in units], len(units), t0)

    def receive_groups(self, need: list[int], count: int, t0: float) -> tuple[RolloutBatch, RewardResult]:
        groups = self.wait(self.store.take.remote(need, count))
        for g in groups:
            del self.outstanding[g.unit.id]
            if self.step_count - g.unit.version > self.K:  # never under the schedule; a guard
                raise RuntimeError(f"stream: group {g.unit.id} has staleness {self.step_count - g.unit.version}")
        batch, scores = self.accept_groups(groups)
        self._rollout_s += time.perf_counter() - t0  # time/rollout: the learner's wait
        return batch, scores

    def accept_groups(self, groups: list[Group]) -> tuple[RolloutBatch, RewardResult]:
        """Score (rewards with state), check, count, log, like `AsyncTrainer.accept` for a batch."""
        batch = concat_batches([g.batch for g in groups])
        batch.policy_version = min(g.unit.version for g in groups)  # the oldest group's version
        if all(g.scores is not None for g in groups):
            scores = concat_results([g.scores for g in groups])
            errors = [e for g in groups for e in g.errors]
        else:
            before = len(self.parts.rewards.failure_log)
            scores = self.parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields())
            errors = self.parts.rewards.failure_log[before:]
        self.check_rewards(scores, errors)
        batch, scores = self.observe(batch, scores)
        self.row_counts[torch.tensor([g.unit.row for g in groups], dtype=torch.long)] += 1
        self.totals["samples"] += len(batch)
        n = len(groups)
        mean = lambda key: sum(g.times.get(key, 0.0) for g in groups) / n  # noqa: E731
        stale = [float(self.step_count - g.unit.version) for g in groups]
        self._step_log.append(
            {
                "async/staleness": sum(stale) / n,
                "async/staleness_max": max(stale),
                "async/request": float(min(g.unit.id for g in groups)),
                "async/workers_per_batch": float(len({g.worker for g in groups})),
                **{k: mean(k) for k in ("async/worker_sync_s", "async/worker_rollout_s", "async/worker_reward_s")},
            }
        )
        return batch, scores

    # -- units, workers, faults ------------------------------------------------------------------------

    def new_units(self, rows: list[int]) -> list[Unit]:
        units = []
        for row in rows:
            uid, self.next_id = self.next_id, self.next_id + 1
            units.append(Unit(uid, int(row), self.step_count, self.current_weights(), request_seed(self.cfg.seed, uid)))
            self.outstanding[uid] = units[-1]
        return units

    def fill(self) -> None:
        """Issue a step's P units per draw while at most K + 1 steps' worth are outstanding."""
        if self.store is None:
            self.start()
        units = []
        while self.blocks < min(self.step_count + self.K + 1, self.cfg.train.steps):
            units += self.new_units(self.sampler.next(self.P).indices)
            self.blocks += 1
        if units:
            ray.get(self.store.put_work.remote(units))

    def wait(self, ref: Any) -> Any:
        """ray.get(ref), watching the workers: a dead one is replaced and its units re-queued (a chain
        broadcast: the run stops with one line); a worker whose call raised stops the run."""
        while True:
            if self.broadcast is not None:
                self.broadcast.check()
            ready, _ = ray.wait([*self.serving, ref], num_returns=1, timeout=1.0)  # a dead worker first
            for i, s in enumerate(self.serving):
                if s in ready:
                    self.worker_ended(i, s)
            if ref in ready:
                return ray.get(ref)

    def worker_ended(self, i: int, ref: Any) -> None:
        try:
            ray.get(ref)
            raise RuntimeError(f"stream: rollout worker {i} stopped serving while the store was open")
        except RayActorError as err:
            if self.broadcast is not None:
                raise RuntimeError(
                    f"rollout worker {i} died ({type(err).__name__}); with ray.broadcast=chain dead workers are "
                    "not replaced (the chain would not reach a new one): the run stops (resume with --resume)"
                ) from None
            back = ray.get(self.store.requeue.remote(i))
            log.warning("rollout worker %d died (%s); replacing it, %d units re-queued", i, type(err).__name__, back)
            self.actors[i] = self.make_actor(i)
            self.serving[i] = self.actors[i].serve.remote(self.store, i)
            self.totals["workers_replaced"] += 1
            self.totals["requests_retried"] += back

    def start(self) -> None:
        r = self.cfg.ray
        if not ray.is_initialized():
            ray.init(address=r.address, include_dashboard=False)
            self._owns_ray = True
        need, have = r.rollout_workers * r.num_cpus_per_worker, ray.cluster_resources().get("CPU", 0.0)
        if need > have:
            raise ValueError(
                f"ray.rollout_workers={r.rollout_workers} x ray.num_cpus_per_worker={r.num_cpus_per_worker} needs "
                f"{need:g} CPUs, the Ray cluster has {have:g}; lower one of them (fractions are allowed)"
            )
        rewards = None if self.score_here else RewardSpec.of(self.parts.rewards)
        remote = ray.remote(num_cpus=r.num_cpus_per_worker, max_restarts=0, max_concurrency=8)(StreamWorker)
        blob = ray.put(self.collector)
        threads, malloc, timeout = max(1, int(r.num_cpus_per_worker)), self.cfg.malloc, self.cfg.learner.timeout_s
        self.make_actor = lambda i: remote.remote(blob, rewards, threads, malloc, timeout)
        self.store = ray.remote(num_cpus=0)(SampleStore).remote()
        self.actors = [self.make_actor(i) for i in range(r.rollout_workers)]
        if r.broadcast == "chain":
            self.broadcast = ChainBroadcast(self.actors, r.broadcast_chunk_mb, timeout)
        self.serving = [a.serve.remote(self.store, i) for i, a in enumerate(self.actors)]
        if self.outstanding:  # in flight at the checkpoint: sampled again with the resumed weights
            units = [
                Unit(u.id, u.row, self.step_count, self.current_weights(), u.seed) for u in self.outstanding.values()
            ]
            self.outstanding = {u.id: u for u in units}
            ray.get(self.store.put_work.remote(units))

    def close(self) -> None:
        if self.store is not None:
            ray.get(self.store.stop.remote())
            for a in self.actors:
                ray.kill(a)
            ray.kill(self.store)
            self.store, self.actors, self.serving = None, [], []
        super().close()

    def running_totals(self) -> dict[str, int]:
        return dict(self.totals)

    # -- checkpoint -----------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["async"]["pending"] = []
        state["async"]["stream_units"] = [{"id": u.id, "row": u.row, "seed": u.seed} for u in self.outstanding.values()]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        units = state.get("async", {}).get("stream_units", [])
        self.outstanding = {u["id"]: Unit(u["id"], u["row"], self.step_count, CHAIN, u["seed"]) for u in units}
        self.blocks = self.step_count + -(-len(units) // self.P)
