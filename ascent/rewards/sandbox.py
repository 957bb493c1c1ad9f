"""Running model-written Python in a sandbox, and the `code_tests` reward built on it.

`run_code(code, entry_point, inputs, limits)` starts a fresh interpreter (`python -I -S`, no site-packages,
nothing inherited from the environment) on `ascent/rewards/sandbox_child.py` in a temporary directory that is
removed afterwards. The child isolates itself as far as the machine permits — new network and PID namespaces,
the `nobody` user when started as root — and then applies resource limits (CPU seconds, memory, processes,
open files, file size) and an audit hook that refuses sockets, new processes and writes outside its
directory (see the child's docstring). The parent adds a wall-clock limit (the whole process group is
killed), reads at most `limits.output_bytes` of results, and discards what the code prints.

The expected outputs never reach the child: it returns the entry point's outputs on the hidden inputs and
the parent compares them, so a completion cannot pass a test by printing, by rewriting the checker or by
returning an object whose `==` is always true (outputs must be plain JSON values). Code that writes result
lines to the channel itself gains nothing over returning values: without the expected outputs, a forged
line is a guess like any other.

A timeout, a crash, a memory bomb or garbage on the result channel is a recorded failure (`CodeResult.status`),
never an exception in the trainer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ascent.rewards.builtin import REWARDS

CHILD = Path(__file__).with_name("sandbox_child.py")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    cpu_s: float = 5.0
    """CPU seconds for the whole run (RLIMIT_CPU)."""
    call_s: float = 2.0
    """Wall seconds per call of the entry point."""
    wall_s: float = 10.0
    """Wall seconds for the whole run; then the process group is killed."""
    memory_mb: int = 512
    """Address space (RLIMIT_AS)."""
    processes: int = 8
    """Processes (RLIMIT_NPROC) besides the ones already running as that user."""
    open_files: int = 32
    """Open file descriptors (RLIMIT_NOFILE)."""
    file_bytes: int = 1 << 20
    """Largest file it may write (RLIMIT_FSIZE)."""
    output_bytes: int = 1 << 20
    """Most result bytes read back."""


@dataclass
class CodeResult:
    """One sandboxed run."""

    status: str
    """ok (the code ran; see `outputs`), timeout (wall or CPU limit), crashed (no or broken result), or error
    (could not start)."""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    """Per input: {"ok": value} or {"error": "Name: message"}."""
    sandbox: list[str] = field(default_factory=list)
    """The isolation applied: e.g. ["netns+pidns"], or ["rlimits+audit"] where namespaces were refused."""
    seconds: float = 0.0


def run_code(code: str, entry_point: str, inputs: list[list[Any]], limits: Limits = Limits()) -> CodeResult:
    """Run `code`, then `entry_point(*args)` for each args in `inputs`, in the sandbox."""
    t0 = time.perf_counter()
    job_dir = Path(tempfile.mkdtemp(prefix="ascent-sandbox-"))
    read_fd, write_fd = os.pipe()
    try:
        os.chmod(job_dir, 0o700)
        job = {"code": code, "entry_point": entry_point, "inputs": inputs, "limits": asdict(limits)}
        (job_dir / "job.json").write_text(json.dumps(job))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(CHILD), str(job_dir), str(write_fd)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(write_fd,),
                cwd=job_dir,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
            )
        except OSError as exc:
            return CodeResult("error", sandbox=[f"could not start: {exc}"], seconds=time.perf_counter() - t0)
        os.close(write_fd)
        write_fd = -1
        data, timed_out = _read(read_fd, proc, limits)
        ended = proc.poll()  # None: still running (blocked, or past the output cap); killed below
        _kill_group(proc)
        cpu_limit = ended in (124, -signal.SIGXCPU, -signal.SIGKILL, 256 - signal.SIGKILL)  # the CPU limit ended it
        return _parse(data, len(inputs), timed_out or cpu_limit, time.perf_counter() - t0)
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(job_dir, ignore_errors=True)


def _read(fd: int, proc: subprocess.Popen, limits: Limits) -> tuple[bytes, bool]:
    """Up to output_bytes from the result pipe, until EOF or the wall limit."""
    import select

    deadline = time.monotonic() + limits.wall_s
    chunks, size = [], 0
    while size < limits.output_bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[: limits.output_bytes], False


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _parse(data: bytes, n: int, timed_out: bool, seconds: float) -> CodeResult:
    lines = data.decode("utf-8", errors="replace").splitlines()
    sandbox: list[str] = []
    outputs: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            break  # a line cut short, or garbage the code wrote to the channel: nothing after it counts
        if i == 0 and isinstance(obj, dict) and "sandbox" in obj:
            sandbox = list(obj["sandbox"])
        elif isinstance(obj, dict) and (set(obj) == {"ok"} or set(obj) == {"error"}):
            outputs.append(obj)
        else:
            break
    outputs = outputs[:n]
    if len(outputs) == n:
        return CodeResult("ok", outputs, sandbox, seconds)
    missing = [{"error": "Timeout" if timed_out else "Crashed: no result"}] * (n - len(outputs))
    return CodeResult("timeout" if timed_out else "crashed", outputs + missing, sandbox, seconds)


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(completion: str) -> str:
    """The completion's last fenced code block (```python ... ```), or the whole completion without one.

    >>> extract_code("Here:\\n```python\\ndef f(x):\\n    return x\\n```\\nDone.")
    'def f(x):\\n    return x\\n'
    >>> extract_code("def f(x): return x")
    'def f(x): return x'
    """
    blocks = _FENCE.findall(completion)
    return blocks[-1] if blocks else completion


def _same(got: Any, want: Any) -> bool:
    """Equal as JSON values; floats to 1e-6 relative (bool and int are not interchangeable)."""
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(got - want) <= 1e-6 * max(1.0, abs(want))
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


def score_tests(result: CodeResult, expected: list[Any]) -> float:
    """Fraction of the hidden tests whose output equals the expected one."""
    passed = sum("ok" in out and _same(out["ok"], want) for out, want in zip(result.outputs, expected))
    return passed / max(1, len(expected))


@REWARDS.register("code_tests")
def code_tests(
    prompts: list[str],
    completions: list[str],
    entry_point: Optional[list[Optional[str]]] = None,
    tests: Optional[list[Optional[list[dict[str, Any]]]]] = None,
    **_: Any,
) -> list[Optional[float]]:
    """The fraction of a row's hidden unit tests (`tests`: [{"args": [...], "expected": value}], calling
    `entry_point`) that the completion's code passes, run in the sandbox (`ascent.rewards.sandbox`); 1.0 only
    when every test passes. None for rows without tests. Two sandboxes run at a time."""
    if entry_point is None or tests is None:
        return [None] * len(completions)

    def one(i: int) -> Optional[float]:
        if not tests[i] or not entry_point[i]:
            return None
        cases = tests[i]
        result = run_code(extract_code(completions[i]), entry_point[i], [list(c["args"]) for c in cases])
        return score_tests(result, [c["expected"] for c in cases])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, range(len(completions))))
