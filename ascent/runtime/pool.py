"""The worker pool: rollout (and reward) actors, request dispatch, and replacement of workers that die.

Requests wait in a queue until a rollout worker is free; each worker runs one at a time. A worker that dies
(`RayActorError`: killed, out of memory, its node lost) is replaced by a fresh actor and its in-flight
request goes back to the FRONT of the queue, unchanged: same rows, same policy version, same seed, so the
re-run produces the very batch the dead worker would have returned. Nothing is lost, nothing is counted
twice: a request's result is stored once, under its id, and handed out once.

Partial rollouts: the segments of one request (same id, segment 0, 1, ...) run one after another; a segment
is sent only once the previous one has answered, with its sequences attached (`RolloutRequest.carry`), and
is dropped when the previous one already finished the batch.

Reward workers (`scorers`): when a rollout call is sent, a scoring call on a reward actor is sent with it,
taking the rollout call's ObjectRef as its argument, so Ray hands the batch from one actor to the other as
soon as it is sampled, whatever the learner is doing. Scorers are used in turn (round robin). A scorer that
dies is replaced and the batch, still in the object store, is scored again on the next scorer (the sample
is not re-drawn); the scores are taken once, under the request's id.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import ray
from ray.exceptions import RayActorError

from ascent.runtime.worker import RolloutRequest, RolloutResult, Scored

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""A request whose worker died this many times stops the run (something kills every worker it meets)."""


@dataclass
class Call:
    """A rollout call in flight (and the scoring call chained to it, with reward workers)."""

    req: RolloutRequest
    ref: Any
    """ObjectRef of the rollout worker's `RolloutResult`."""
    score: Optional[tuple[int, Any, Any]] = None
    """(scorer index, scorer handle, ObjectRef of its `Scored`)."""


class WorkerPool:
    """`size` rollout workers made by `make_actor(index)` and `scorers` reward workers made by
    `make_scorer(index)`; `submit` requests, `result(id)` their (scored) batches."""

    def __init__(
        self,
        make_actor: Callable[[int], Any],
        size: int,
        make_scorer: Optional[Callable[[int], Any]] = None,
        scorers: int = 0,
        replace_dead: bool = True,
    ) -> None:
        self.make_actor, self.make_scorer = make_actor, make_scorer
        self.replace_dead = replace_dead  # False (ray.broadcast=chain): a dead rollout worker stops the run
        self.workers = [make_actor(i) for i in range(size)]
        self.scorers = [make_scorer(j) for j in range(scorers)] if make_scorer else []
        self.busy: dict[int, Call] = {}  # worker index -> its in-flight call
        self.queue: deque[RolloutRequest] = deque()  # issued, not yet sent to a worker
        self.carry: dict[int, RolloutResult] = {}  # request id -> its last unfinished segment's answer
        self.done: dict[int, Call] = {}  # request id -> the call that finished its batch, result not yet taken
        self.results: dict[int, RolloutResult] = {}  # request id -> that call's rollout answer
        self.replaced, self.retried, self.scorers_replaced, self.rescored = 0, 0, 0, 0
        self._turn = 0  # next scorer (round robin)

    def submit(self, req: RolloutRequest) -> None:
        self.queue.append(req)
        self.dispatch()

    def dispatch(self) -> None:
        """Collect the calls that have answered, then send queued requests, in order, to the free workers
        (a segment waits while an earlier segment of its request runs; one whose batch is finished is dropped)."""
        if self.busy:
            ready, _ = ray.wait([c.ref for c in self.busy.values()], num_returns=len(self.busy), timeout=0)
            self.collect_ready(ready)
        for i in range(len(self.workers)):
            if i in self.busy:
                continue
            req = self.next_ready()
            if req is None:
                return
            req.carry = self.carry[req.id].carry if req.segment > 0 else None
            ref = self.workers[i].run.remote(req)
            self.busy[i] = Call(req, ref, self.score(ref))

    def next_ready(self) -> Optional[RolloutRequest]:
        """Pop the first queued request that can run now: none of its request's segments runs or waits
        before it. Segments of a batch that is already finished are dropped."""
        blocked = {c.req.id for c in self.busy.values()}
        for k, req in enumerate(self.queue):
            if req.id in self.results:  # finished by an earlier segment: nothing left to sample
                del self.queue[k]
                return self.next_ready()
            if req.id not in blocked:
                del self.queue[k]
                return req
            blocked.add(req.id)
        return None

    def score(self, ref: Any) -> Optional[tuple[int, Any, Any]]:
        """Send the rollout answer `ref` to the next scorer (None without reward workers)."""
        if not self.scorers:
            return None
        j, self._turn = self._turn % len(self.scorers), self._turn + 1
        return j, self.scorers[j], self.scorers[j].score.remote(ref)

    def outstanding(self, request_id: int) -> bool:
        return (
            request_id in self.done
            or any(r.id == request_id for r in self.queue)
            or any(c.req.id == request_id for c in self.busy.values())
        )

    def result(self, request_id: int) -> RolloutResult:
        """Block until request `request_id`'s batch is finished (and scored, with reward workers), collecting
        the other calls that answer meanwhile."""
        if not self.outstanding(request_id):
            raise KeyError(f"request {request_id} was never submitted (or its result was already taken)")
        while request_id not in self.done:
            if not self.busy:
                raise RuntimeError(
                    f"request {request_id} is unfinished and nothing is running: its next segment was never submitted"
                )
            ready, _ = ray.wait([c.ref for c in self.busy.values()], num_returns=1)
            self.collect_ready(ready)
            self.dispatch()
        call, result = self.done.pop(request_id), self.results.pop(request_id)
        self.queue = deque(r for r in self.queue if r.id != request_id)  # segments issued after the batch finished
        return self.scored(call, result) if call.score else result

    def collect_ready(self, ready: list[Any]) -> None:
        for i, call in list(self.busy.items()):
            if call.ref in ready:
                del self.busy[i]
                self.collect(i, call)

    def collect(self, i: int, call: Call) -> None:
        """Store worker i's answer; when the worker died, replace it and re-queue its request first."""
        req = call.req
        try:
            result = ray.get(call.ref)
        except RayActorError as err:
            if not self.replace_dead:
                raise RuntimeError(
                    f"rollout worker {i} died ({type(err).__name__}) while sampling batch {req.id}; with "
                    "ray.broadcast=chain dead workers are not replaced (the chain would not reach a new one): "
                    "the run stops (resume with --resume)"
                ) from None
            req.attempts += 1
            if req.attempts >= MAX_ATTEMPTS:
                raise RuntimeError(
                    f"rollout request {req.id} lost its worker {req.attempts} times; last error: {err}"
                ) from err
            log.warning(
                "rollout worker %d died (%s); replacing it and re-requesting batch %d (segment %d)",
                i,
                type(err).__name__,
                req.id,
                req.segment,
            )
            self.workers[i] = self.make_actor(i)
            self.replaced += 1
            self.retried += 1
            self.queue.appendleft(req)
            return
        if result.complete:
            self.done[req.id], self.results[req.id] = call, result
            self.carry.pop(req.id, None)
        else:
            self.carry[req.id] = result

    def scored(self, call: Call, result: RolloutResult) -> RolloutResult:
        """`result` with its reward worker's scores; a dead scorer is replaced and the batch scored again."""
        j, handle, ref = call.score
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                out: Optional[Scored] = ray.get(ref)
                break
            except RayActorError as err:
                if attempt == MAX_ATTEMPTS:
                    raise RuntimeError(
                        f"scoring of batch {call.req.id} lost its reward worker {attempt} times; last error: {err}"
                    ) from err
                if self.scorers[j] is handle:  # not replaced yet (several calls may have met the same death)
                    log.warning(
                        "reward worker %d died (%s); replacing it and scoring batch %d again",
                        j,
                        type(err).__name__,
                        call.req.id,
                    )
                    self.scorers[j] = self.make_scorer(j)
                    self.scorers_replaced += 1
                self.rescored += 1
                j, handle, ref = self.score(call.ref)
        if out is None:  # the rollout worker scored it (rewards given to both): keep its scores
            return result
        return replace(
            result,
            scores=out.scores,
            reward_errors=out.reward_errors,
            times={**result.times, "async/worker_reward_s": out.reward_s},
        )

    def shutdown(self) -> None:
        """Kill every worker (their in-flight work is abandoned)."""
        for w in self.workers + self.scorers:
            ray.kill(w)
        self.busy.clear()
        self.queue.clear()
