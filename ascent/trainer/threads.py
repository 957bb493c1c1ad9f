"""The learner's thread governor: fewer intra-op threads while another process competes for the cores.

Why: on a 2-core machine with a `nice -n 19` neighbour (a second run, a test suite) the learner's update took
4-16x its quiet time while rollouts slowed 1.5-2x. The update is a stream of short parallel regions, each ending
at a barrier; when the scheduler runs the neighbour on one of the cores, the learner thread there waits for its
turn and the other one waits at the barrier, so every region costs a scheduler slice instead of microseconds.
One thread fewer than the cores, while the neighbour is there, leaves it a core of its own and the learner's
threads never wait for each other (measured in benchmarks/busy_neighbour.py).

How it sees the neighbour (ascent's design, no paper): the kernel's per-thread scheduler statistics,
`/proc/self/task/<tid>/schedstat` (nanoseconds on the CPU, nanoseconds runnable but waiting for a CPU). Over one
update, `wait / (run + wait)` summed over the process's threads is the share of its runnable time spent waiting
for a core: near 0 on a quiet machine, large when something else holds a core. It needs no knowledge of the
other process and reads only this process's files, so it also holds inside containers, where machine-wide
figures (load average, /proc/stat) count the whole host.

The rule, applied after each update (`after`):
- waiting share above `high` with more than one thread: one thread fewer from the next update on;
- at fewer threads than the maximum: after `probe_after` updates try the maximum again for one update; if it
  still waits, go back to the count before the probe and double the interval (up to `max_probe_after`), so
  that a neighbour that stays costs one slow update in ever longer intervals; if it no longer waits, stay at
  the maximum and reset the interval.
Only the update is governed: the maximum is restored after it, so rollouts keep their threads.
Without schedstat (non-Linux, or a kernel without it) the governor does nothing and says so once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

log = logging.getLogger(__name__)

Reading = dict[str, tuple[int, int]]
"""thread id -> (ns on the CPU, ns runnable but waiting for a CPU)."""


def read_schedstat(task_dir: str = "/proc/self/task") -> Optional[Reading]:
    """This process's threads' scheduler statistics, or None where the kernel does not provide them."""
    out: Reading = {}
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    for tid in tids:
        try:
            fields = Path(task_dir, tid, "schedstat").read_text().split()
            out[tid] = (int(fields[0]), int(fields[1]))
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile, or no schedstat for it
    return out or None


def waiting_share(before: Reading, after: Reading) -> tuple[float, float]:
    """(share of runnable time spent waiting for a CPU, CPU seconds) between two readings, over the threads
    present in both."""
    run = wait = 0
    for tid, (r1, w1) in after.items():
        if tid in before:
            r0, w0 = before[tid]
            run += max(0, r1 - r0)
            wait += max(0, w1 - w0)
    total = run + wait
    return (wait / total if total else 0.0), run / 1e9


@dataclass
class ThreadGovernor:
    """Chooses the learner's torch intra-op threads for each update from the waiting share of the last ones
    (see the module docstring). `reader` and `set_threads` are the kernel's statistics and torch's setter;
    tests pass their own to check the rule."""

    max_threads: int
    high: float = 0.15
    probe_after: int = 4
    max_probe_after: int = 64
    reader: Callable[[], Optional[Reading]] = read_schedstat
    set_threads: Callable[[int], None] = torch.set_num_threads
    threads: int = field(init=False)
    interval: int = field(init=False)
    since_probe: int = field(init=False, default=0)
    probing: bool = field(init=False, default=False)
    active: bool = field(init=False, default=True)
    last_share: float = field(init=False, default=0.0)
    used: int = field(init=False, default=0)
    _start: Optional[Reading] = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.max_threads < 1:
            raise ValueError(f"ThreadGovernor: max_threads must be >= 1, got {self.max_threads}")
        self.threads = self.max_threads
        self.interval = self.probe_after
        if self.max_threads == 1:
            self.active = False  # nothing to choose
        elif self.reader() is None:
            self.active = False
            log.info("learner threads: no per-thread scheduler statistics here; the thread count stays fixed")

    def before(self) -> None:
        """Call right before an update: sets the update's thread count and takes the first reading."""
        if not self.active:
            return
        self.probing = self.threads < self.max_threads and self.since_probe >= self.interval
        self.used = self.max_threads if self.probing else self.threads
        self.set_threads(self.used)
        self._start = self.reader()

    def after(self) -> dict[str, float]:
        """Call right after the update: restores the maximum for whatever runs next (rollouts keep their
        threads), decides the next update's count, and returns metrics to log."""
        if not self.active or self._start is None:
            return {}
        end = self.reader()
        self.set_threads(self.max_threads)
        share, _ = waiting_share(self._start, end) if end is not None else (0.0, 0.0)
        self._start = None
        self.last_share = share
        busy = share > self.high
        if self.probing:
            self.since_probe = 0
            if busy:
                self.interval = min(self.max_probe_after, self.interval * 2)
            else:
                self.threads, self.interval = self.max_threads, self.probe_after
        elif busy and self.threads > 1:
            self.threads -= 1
            self.since_probe = 0
        elif self.threads < self.max_threads:
            self.since_probe += 1
        return {"learner/threads": float(self.used), "learner/wait_share": share}
