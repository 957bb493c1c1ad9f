"""The rollout worker pool: Ray actors, request dispatch, and replacement of workers that die.

Requests wait in a queue until a worker is free; each worker runs one at a time. A worker that dies
(`RayActorError`: killed, out of memory, its node lost) is replaced by a fresh actor and its in-flight
request goes back to the FRONT of the queue, unchanged: same rows, same policy version, same seed, so the
re-run produces the very batch the dead worker would have returned. Nothing is lost, nothing is counted
twice: a request's result is stored once, under its id, and handed out once.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

import ray
from ray.exceptions import RayActorError

from ascent.runtime.worker import RolloutRequest, RolloutResult

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""A request whose worker died this many times stops the run (something kills every worker it meets)."""


class WorkerPool:
    """`size` rollout workers made by `make_actor(index)`; `submit` requests, `result(id)` their batches."""

    def __init__(self, make_actor: Callable[[int], Any], size: int) -> None:
        self.make_actor = make_actor
        self.workers = [make_actor(i) for i in range(size)]
        self.busy: dict[int, tuple[ray.ObjectRef, RolloutRequest]] = {}  # worker index -> its in-flight call
        self.queue: deque[RolloutRequest] = deque()  # issued, not yet sent to a worker
        self.done: dict[int, RolloutResult] = {}  # request id -> result not yet taken
        self.replaced, self.retried = 0, 0

    def submit(self, req: RolloutRequest) -> None:
        self.queue.append(req)
        self.dispatch()

    def dispatch(self) -> None:
        """Send queued requests, in order, to the free workers."""
        for i in range(len(self.workers)):
            if self.queue and i not in self.busy:
                req = self.queue.popleft()
                self.busy[i] = (self.workers[i].run.remote(req), req)

    def outstanding(self, request_id: int) -> bool:
        return request_id in self.done or any(r.id == request_id for r in self.queue) or any(r.id == request_id for _, r in self.busy.values())

    def result(self, request_id: int) -> RolloutResult:
        """Block until request `request_id` is answered (collecting the others that finish meanwhile)."""
        if not self.outstanding(request_id):
            raise KeyError(f"request {request_id} was never submitted (or its result was already taken)")
        while request_id not in self.done:
            ready, _ = ray.wait([ref for ref, _ in self.busy.values()], num_returns=1)
            for i, (ref, req) in list(self.busy.items()):
                if ref in ready:
                    del self.busy[i]
                    self.collect(i, ref, req)
            self.dispatch()
        return self.done.pop(request_id)

    def collect(self, i: int, ref: ray.ObjectRef, req: RolloutRequest) -> None:
        """Store worker i's answer; when the worker died, replace it and re-queue its request first."""
        try:
            self.done[req.id] = ray.get(ref)
        except RayActorError as err:
            req.attempts += 1
            if req.attempts >= MAX_ATTEMPTS:
                raise RuntimeError(f"rollout request {req.id} lost its worker {req.attempts} times; last error: {err}") from err
            log.warning("rollout worker %d died (%s); replacing it and re-requesting batch %d", i, type(err).__name__, req.id)
            self.workers[i] = self.make_actor(i)
            self.replaced += 1
            self.retried += 1
            self.queue.appendleft(req)

    def shutdown(self) -> None:
        """Kill every worker (their in-flight work is abandoned)."""
        for w in self.workers:
            ray.kill(w)
        self.busy.clear()
        self.queue.clear()
