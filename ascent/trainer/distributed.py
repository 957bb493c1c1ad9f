"""Data-parallel learner ranks over `torch.distributed` (`learner.world_size`).

The layout is synchronous data parallelism with gradient all-reduce, as PyTorch's DistributedDataParallel does
it (Li et al., 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", arXiv:2006.15704)
and as verl, OpenRLHF and TRL/accelerate run their learners: every rank holds a full replica of the policy and
of the optimizer state, computes the gradient of its share of the step's data, and the ranks sum their gradients
before each takes the same optimizer step, so the replicas stay equal.

Departures, and why:

- The shard is a share of the step's *micro-batches* (dealt round-robin: rank r takes micro-batches r, r + N,
  ...), not of its rows. ascent's losses normalise each micro-batch by the whole mini-batch's token and sequence
  counts (`LossInput.num_tokens`, `num_seqs`), so a step's gradient is the *sum* of its micro-batches' gradients;
  the ranks therefore all-reduce with SUM (DDP averages, which would divide by N), and a step with N ranks is
  the one-process step up to float summation order. The micro-batches themselves (rows, padding widths, group
  packing) are the one-process ones, so losses that normalise within a micro-batch stay exact too.
- The all-reduce is `torch.distributed.all_reduce` on the flattened gradients (one call per dtype) after the
  last backward, not DDP's bucketed overlap with the backward: a step's micro-batches differ per rank in number,
  which DDP's per-backward hooks do not allow without `no_sync` bookkeeping; the overlap is a speed-up left out.
- Rank 0 is the driver itself (it samples, scores and holds the weights the rollout engine uses); ranks 1..N-1
  are processes spawned by `torch.multiprocessing` on the first update, handed a copy of the model, the frozen
  reference and the learner state (optimizer, scheduler) of that moment, so a resumed run starts them from the
  restored state. Each update rank 0 broadcasts the scored batch (`broadcast_object_list`).
- One machine only: ranks rendezvous on 127.0.0.1. Nothing here has run across machines (docs/runtime.md).

With `learner.shard=fsdp2` (`Ranks.lockstep`) the ranks train a sharded copy instead of replicas
(`ascent.trainer.fsdp`): every forward and backward is then a collective, so each rank runs the same number of
passes (`Ranks.passes`, idle ones where its share is shorter) and FSDP2 reduces the gradients itself.
"""

from __future__ import annotations

import atexit
import datetime
import io
import socket
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class LearnerProcessError(RuntimeError):
    """A learner rank died or a collective timed out: the run cannot go on."""


class Ranks:
    """What a rank needs inside an optimizer step: its share of the micro-batches, the gradient sum and the
    metric merge. `world_size == 1` (no group) makes every method the identity."""

    def __init__(self, rank: int = 0, world_size: int = 1, shard: str = "none") -> None:
        self.rank, self.world_size = rank, world_size
        self.lockstep = shard == "fsdp2" and world_size > 1
        """`learner.shard=fsdp2`: the trained model is sharded (`ascent.trainer.fsdp`), so its every forward and
        backward is a collective and the ranks run the same number of them (`passes`); FSDP2 reduces the
        gradients itself."""

    def shard(self, subs: Sequence[Any]) -> list[Any]:
        """This rank's micro-batches: r, r + N, r + 2N, ... (all of them with one rank)."""
        return list(subs[self.rank :: self.world_size])

    def passes(self, subs: Sequence[Any]) -> list[Any]:
        """`shard`, padded with None in lockstep to ceil(len(subs) / N) passes, the same count on every rank (a
        None pass runs an idle forward and backward that adds nothing)."""
        mine = self.shard(subs)
        if self.lockstep:
            mine += [None] * (-(-len(subs) // self.world_size) - len(mine))
        return mine

    def reduce_gradients(self, params: Sequence[torch.nn.Parameter], bad: bool) -> bool:
        """Sum every parameter's gradient over the ranks (a parameter no rank has a gradient for keeps None, as in
        one process); returns whether any rank saw a non-finite loss. In lockstep only the flag: FSDP2's
        backward has reduce-scattered the (loss-scaled) gradients already."""
        if self.world_size == 1:
            return bad
        if self.lockstep:
            flag = torch.tensor([float(bad)], device=params[0].device if params else torch.device("cpu"))
            self._call(lambda: dist.all_reduce(flag))
            return bool(flag[0] > 0)
        self._call(lambda: self._reduce(params, bad))
        return self._bad

    def _reduce(self, params: Sequence[torch.nn.Parameter], bad: bool) -> None:
        device = params[0].device if params else torch.device("cpu")
        flags = torch.tensor([float(bad)] + [float(p.grad is not None) for p in params], device=device)
        dist.all_reduce(flags)
        self._bad = bool(flags[0] > 0)
        if self._bad:
            return
        by_dtype: dict[torch.dtype, list[torch.nn.Parameter]] = {}
        for p, present in zip(params, flags[1:].tolist()):
            if present:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                by_dtype.setdefault(p.grad.dtype, []).append(p)
        for group in by_dtype.values():
            flat = torch.cat([p.grad.reshape(-1) for p in group])
            dist.all_reduce(flat)
            offset = 0
            for p in group:
                n = p.grad.numel()
                p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
                offset += n

    def reduce_metrics(self, summed: dict[str, float], maxed: dict[str, float]) -> tuple[dict, dict]:
        """Sum `summed` and take the max of `maxed` over the ranks (a key a rank lacks counts 0 there)."""
        if self.world_size == 1:
            return summed, maxed
        out: list[Any] = [None] * self.world_size
        self._call(lambda: dist.all_gather_object(out, (summed, maxed)))
        total: dict[str, float] = {}
        top: dict[str, float] = {}
        for s, m in out:
            for k, v in s.items():
                total[k] = total.get(k, 0.0) + v
            for k, v in m.items():
                top[k] = max(top.get(k, v), v)
        return total, top

    def merge(self, part: dict) -> dict:
        """The union of every rank's `part` (CPU tensors or other picklable values, disjoint keys)."""
        if self.world_size == 1:
            return part
        out: list[Any] = [None] * self.world_size
        self._call(lambda: dist.all_gather_object(out, part))
        return {k: v for d in out for k, v in d.items()}

    def memory(self, optimizer_bytes: int) -> dict[str, float]:
        """`learner/rank{r}_optim_state_mb` (the optimizer state rank r stores, `optimizer_bytes` here) and
        `learner/rank{r}_peak_rss_mb` (its process's peak resident memory so far, `peak_rss_mb`), from every rank."""
        out: dict[str, float] = {}
        for r, (state_mb, rss_mb) in sorted(self.merge({self.rank: (optimizer_bytes / 2**20, peak_rss_mb())}).items()):
            out[f"learner/rank{r}_optim_state_mb"] = state_mb
            out[f"learner/rank{r}_peak_rss_mb"] = rss_mb
        return out

    def guarded(self, fn: Callable[[], Any]) -> Any:
        """`fn()` with rank 0's failure handling (`DataParallel`): for work whose collectives are inside it (a
        sharded model's forwards)."""
        return self._call(fn)

    def _call(self, fn: Callable[[], Any]) -> Any:
        return fn()


class DataParallel(Ranks):
    """Rank 0 of `world_size` learner ranks, in the driver: spawns ranks 1..N-1 on the first `send` and turns
    a dead rank or a timed-out collective into one `LearnerProcessError` line."""

    def __init__(
        self,
        world_size: int,
        timeout_s: float,
        device: torch.device,
        target: Callable[..., None],
        shard: str = "none",
    ) -> None:
        super().__init__(0, world_size, shard)
        self.timeout_s, self.device, self.target = timeout_s, device, target
        self.backend = "nccl" if device.type == "cuda" else "gloo"
        self.procs: list[Any] = []
        self.control: Any = None
        self.started = False
        self.failed = False  # a rank died or a collective failed: nothing more runs on this group
        self.stale = True  # the ranks need rank 0's weights and learner state before the next update

    def start(self, blob: bytes, payload: Any) -> None:
        """Spawn ranks 1..N-1 with `target(rank, world_size, init_method, timeout_s, backend, blob, payload)`,
        then join the process group as rank 0."""
        if self.backend == "nccl" and torch.cuda.device_count() < self.world_size:
            raise LearnerProcessError(
                f"learner.world_size={self.world_size} on cuda needs one GPU per rank, "
                f"this machine has {torch.cuda.device_count()}"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        init = f"tcp://127.0.0.1:{port}"
        ctx = mp.get_context("spawn")  # a fresh interpreter: no forked OpenMP or CUDA state
        for rank in range(1, self.world_size):
            args = (rank, self.world_size, init, self.timeout_s, self.backend, blob, payload)
            proc = ctx.Process(target=self.target, args=args, daemon=True, name=f"ascent-learner-rank{rank}")
            proc.start()
            self.procs.append(proc)
        atexit.register(self.close)
        self.started = True
        self.control = self._call(lambda: init_group(0, self.world_size, init, self.timeout_s, self.backend))

    def send(self, message: tuple) -> None:
        """Broadcast a message (kind, payload) to ranks 1..N-1."""
        if self.failed:
            raise LearnerProcessError(
                "the learner ranks stopped after an earlier failure; resume the run with --resume"
            )
        self.check_alive()
        self._call(lambda: dist.broadcast_object_list([message], src=0, group=self.control))

    def check_alive(self) -> None:
        for rank, proc in enumerate(self.procs, start=1):
            if not proc.is_alive():
                self.fail(f"learner rank {rank} (pid {proc.pid}) exited with code {proc.exitcode}")

    def fail(self, what: str) -> None:
        self.failed = True
        self.abort()
        raise LearnerProcessError(
            f"{what}; the run stops (its last checkpoint resumes with --resume, learner.world_size as before or 1)"
        )

    def _call(self, fn: Callable[[], Any]) -> Any:
        """`fn()`, a failure of which (a dead rank, a failed or timed-out collective) becomes one
        `LearnerProcessError` line and ends the group."""
        try:
            return fn()
        except LearnerProcessError:
            raise
        except (RuntimeError, dist.DistBackendError, OSError) as err:
            for proc in self.procs:
                proc.join(timeout=2.0)  # a killed rank's exit code is there by now
            for rank, proc in enumerate(self.procs, start=1):
                if not proc.is_alive():
                    self.fail(f"learner rank {rank} (pid {proc.pid}) exited with code {proc.exitcode}")
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            self.fail(f"a learner collective failed or passed learner.timeout_s={self.timeout_s:g} ({first[:200]})")

    def abort(self) -> None:
        """Stop the other ranks and leave the process group (after a failure: no message can reach them)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=5.0)
        self.procs = []
        self.started = False
        if dist.is_initialized():
            dist.destroy_process_group()

    def close(self) -> None:
        """Tell the ranks to stop, wait for them, and leave the process group."""
        if not self.started:
            return
        try:
            if all(p.is_alive() for p in self.procs):
                dist.broadcast_object_list([("stop", None)], src=0, group=self.control)
                for proc in self.procs:
                    proc.join(timeout=self.timeout_s)
        except (RuntimeError, OSError):
            pass
        self.abort()


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB: Linux's VmHWM, which starts afresh in a spawned rank (the
    `ru_maxrss` of `getrusage` survives the exec and would report the driver's peak at the spawn); `ru_maxrss`
    where /proc is absent."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


CONTROL_TIMEOUT = datetime.timedelta(days=30)
"""How long ranks 1..N-1 wait for rank 0's next message: rollouts and evaluations between two updates may take
any time (a rank 0 that dies closes the connection, which ends the wait at once)."""


def init_group(rank: int, world_size: int, init_method: str, timeout_s: float, backend: str) -> Any:
    """Join the learner's process group (the default group of this process; its collectives time out after
    `timeout_s`) and return the control group (gloo, CPU) on which rank 0 sends its messages."""
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)


def pack(obj: Any) -> bytes:
    """Bytes of `obj` by `torch.save` (tensors by value, never through shared memory: a replica must not share
    storage with rank 0's weights)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def unpack(blob: bytes, device: torch.device) -> Any:
    """`pack`'s object, its tensors on `device` (the sender is rank 0 of this run, so the pickle is trusted)."""
    return torch.load(io.BytesIO(blob), map_location=device, weights_only=False)


def receive(control: Any) -> tuple:
    """The next message rank 0 broadcasts on the control group (ranks 1..N-1)."""
    box: list[Any] = [None]
    dist.broadcast_object_list(box, src=0, group=control)
    return box[0]
