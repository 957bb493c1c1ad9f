"""Peer-assisted pipelined weight broadcast (`ray.broadcast=chain`), after ECHO-2 (Xiao et al. 2026).

Today's path (`ray.broadcast=driver`): after each update the learner `ray.put`s its trainable tensors once and
every rollout worker fetches the whole object from the driver's object store. With `chain` the driver sends
the new version to ONE worker only, cut into chunks of `ray.broadcast_chunk_mb`; each worker stores a chunk
and forwards it at once to the next worker of the chain while the following chunks are still arriving, so the
driver's outgoing traffic is one copy per version whatever the worker count, and the last worker holds the
version (C + W - 1) chunk-times after the first chunk left (pipelining), not W full copies later.

The tensors travel as raw bytes (a uint8 view of each tensor, concatenated): the weights a worker assembles are
bit-identical to the learner's. A worker's actor runs with a few threads (`max_concurrency`), so chunks are
received and forwarded while the same worker samples with the version it already holds.

Faults: a worker that dies breaks the chain for every worker after it; the driver's per-worker
acknowledgements (`wait_version`) turn that into one line naming the worker (`BroadcastError`), and a worker
waiting for a version that never arrives stops after `timeout_s` with a line saying so. Dead workers are not
replaced in this mode (the replacement would hold no weights): the run stops; resume with `--resume`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch

KEEP_VERSIONS = 8
"""Assembled versions a receiver keeps (a re-queued unit may ask for an older one)."""


class BroadcastError(RuntimeError):
    """A weight broadcast did not reach a worker (it died, or the chain before it broke)."""


@dataclass(frozen=True)
class Layout:
    """Where each tensor lies in the flat byte buffer of one version."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    offsets: tuple[int, ...]
    """Byte offset of each tensor; offsets[-1] + its size = total bytes."""
    total: int


def flatten(state: dict[str, torch.Tensor]) -> tuple[Layout, torch.Tensor]:
    """(layout, uint8 buffer) holding the tensors' raw bytes back to back (bit-exact round trip)."""
    names, shapes, dtypes, offsets, parts, at = [], [], [], [], [], 0
    for name, t in state.items():
        raw = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8)
        names.append(name)
        shapes.append(tuple(t.shape))
        dtypes.append(t.dtype)
        offsets.append(at)
        parts.append(raw)
        at += raw.numel()
    buf = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.uint8)
    return Layout(tuple(names), tuple(shapes), tuple(dtypes), tuple(offsets), at), buf


def unflatten(layout: Layout, buf: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state dict of `flatten`'s buffer (each tensor a copy)."""
    out = {}
    ends = list(layout.offsets[1:]) + [layout.total]
    for name, shape, dtype, a, b in zip(layout.names, layout.shapes, layout.dtypes, layout.offsets, ends):
        out[name] = buf[a:b].clone().view(dtype).reshape(shape)
    return out


def chunk_bounds(total: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """[(start, end)) byte ranges of the chunks (at least one, even for an empty buffer).

    >>> chunk_bounds(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> chunk_bounds(0, 4)
    [(0, 0)]
    """
    chunk_bytes = max(1, int(chunk_bytes))
    return [(a, min(a + chunk_bytes, total)) for a in range(0, total, chunk_bytes)] or [(0, 0)]


class ChunkReceiver:
    """The worker side: receive a version's chunks, forward each to the rest of the chain, assemble.

    Mixed into the rollout worker classes (the methods run on the actor's extra threads); on its own, a bare
    receiver (tests, `benchmarks/stream_broadcast.py`)."""

    def __init__(self) -> None:
        self._receiver_init()

    def fetch(self, version: int, refs: list[Any]) -> float:
        """Today's path for comparison: fetch the driver's `ray.put` of a version (`refs[0]`, passed nested so
        that this call does the transfer) and keep it; returns the wall-clock time it was complete here."""
        import ray

        state = ray.get(refs[0])
        with self._lock:
            self._assembled[version] = state
            self._arrived[version] = time.time()
        self._event(version).set()
        return self._arrived[version]

    def _receiver_init(self) -> None:
        self._lock = threading.Lock()
        self._buffers: dict[int, tuple[torch.Tensor, set[int], int, Layout]] = {}
        self._assembled: dict[int, dict[str, torch.Tensor]] = {}
        self._events: dict[int, threading.Event] = {}
        self._arrived: dict[int, float] = {}
        self._forwards: dict[int, list[Any]] = {}

    def _event(self, version: int) -> threading.Event:
        with self._lock:
            return self._events.setdefault(version, threading.Event())

    def recv_chunk(
        self, version: int, index: int, count: int, layout: Layout, start: int, chunk: torch.Tensor, rest: list[Any]
    ) -> None:
        """Store chunk `index` of `count` of `version` at byte `start`, forward it to `rest[0]` (which forwards
        to `rest[1:]`), and assemble the version when its last chunk is in."""
        if rest:  # forward first: the next worker starts on this chunk while we copy it
            ref = rest[0].recv_chunk.remote(version, index, count, layout, start, chunk, rest[1:])
            with self._lock:
                self._forwards.setdefault(version, []).append(ref)
        with self._lock:
            if version not in self._buffers:
                self._buffers[version] = (torch.empty(layout.total, dtype=torch.uint8), set(), count, layout)
            buf, got, _, _ = self._buffers[version]
        buf[start : start + chunk.numel()] = chunk
        with self._lock:
            got.add(index)
            done = len(got) == count
            if done:
                del self._buffers[version]
        if done:
            state = unflatten(layout, buf)
            with self._lock:
                self._assembled[version] = state
                self._arrived[version] = time.time()
                for old in sorted(self._assembled)[:-KEEP_VERSIONS]:
                    del self._assembled[old]
                self._forwards.pop(version - KEEP_VERSIONS, None)
            self._event(version).set()

    def received(self, version: int, timeout_s: float) -> dict[str, torch.Tensor]:
        """The assembled tensors of `version`, waiting up to `timeout_s` for them."""
        if not self._event(version).wait(timeout_s):
            raise BroadcastError(
                f"weights of version {version} did not arrive over the broadcast chain within {timeout_s:g} s "
                "(a worker before this one in the chain died?)"
            )
        with self._lock:
            if version not in self._assembled:
                raise BroadcastError(f"weights of version {version} were dropped (more than {KEEP_VERSIONS} newer)")
            return self._assembled[version]

    def wait_version(self, version: int, timeout_s: float) -> float:
        """Wall-clock time (time.time()) at which `version` was complete here; waits up to `timeout_s`."""
        self.received(version, timeout_s)
        return self._arrived[version]

    def checksum(self, version: int) -> dict[str, torch.Tensor]:
        """The assembled tensors of `version` (tests compare them with the learner's, bit for bit)."""
        return self.received(version, 0.0)


class ChainBroadcast:
    """The driver side: send each version down the chain `workers[0] -> workers[1] -> ...`."""

    def __init__(self, workers: list[Any], chunk_mb: float, timeout_s: float = 600.0) -> None:
        self.workers = list(workers)
        self.chunk_bytes = max(1, int(chunk_mb * 2**20))
        self.timeout_s = timeout_s
        self.acks: dict[int, list[Any]] = {}  # version -> per-worker wait_version refs
        self.sent_at: dict[int, float] = {}

    def send(self, version: int, state: dict[str, torch.Tensor]) -> float:
        """Start the broadcast of `version` (returns the seconds spent sending, not waiting for delivery)."""
        t0 = time.perf_counter()
        layout, buf = flatten(state)
        bounds = chunk_bounds(layout.total, self.chunk_bytes)
        head, rest = self.workers[0], self.workers[1:]
        self.sent_at[version] = time.time()
        for i, (a, b) in enumerate(bounds):
            head.recv_chunk.remote(version, i, len(bounds), layout, a, buf[a:b].clone(), rest)
        self.acks[version] = [w.wait_version.remote(version, self.timeout_s) for w in self.workers]
        return time.perf_counter() - t0

    def check(self, version: Optional[int] = None, block: bool = False) -> Optional[list[float]]:
        """Raise `BroadcastError` for a worker the broadcast of `version` (default: every pending one) did not
        reach; with `block`, wait for delivery and return each worker's arrival delay in seconds (None when
        not blocking and some have not answered yet)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        versions = [version] if version is not None else sorted(self.acks)
        delays = None
        for v in versions:
            refs = self.acks.get(v)
            if refs is None:
                continue
            if not block:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                refs = [r for r in refs if r in ready]
            for i, ref in enumerate(self.acks[v]):
                if ref not in refs:
                    continue
                try:
                    arrived = ray.get(ref)
                except RayActorError as err:
                    raise BroadcastError(
                        f"weight broadcast (ray.broadcast=chain): rollout worker {i} died before receiving version "
                        f"{v} ({type(err).__name__}); the chain is broken and dead workers are not replaced in this "
                        "mode: the run stops (resume with --resume)"
                    ) from None
                except (RayTaskError, GetTimeoutError) as err:
                    raise BroadcastError(
                        f"weight broadcast (ray.broadcast=chain): rollout worker {i} did not receive version {v}: "
                        f"{str(err).strip().splitlines()[-1]}"
                    ) from None
                if block:
                    delays = (delays or []) + [arrived - self.sent_at[v]]
            if block or len(refs) == len(self.acks[v]):
                self.acks.pop(v, None)
        return delays
