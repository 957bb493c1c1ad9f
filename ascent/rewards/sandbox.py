"""Running model-written Python in a sandbox, and the `code_tests` reward built on it.

`run_code(code, entry_point, inputs, limits, mode)` runs `ascent/rewards/sandbox_child.py` in a fresh `python
-I -S` (no site-packages, nothing inherited from the environment). In the default mode, `bwrap`, the boundary
is bubblewrap (`bwrap`, the OS package `bubblewrap`; https://github.com/containers/bubblewrap): new mount,
PID, network, IPC and UTS namespaces (and a user namespace when the trainer is not root, with nested user
namespaces disabled); a root of its own in which only the interpreter, `/usr`, the child script and the job
file are bound read-only, a fresh `/proc` (the code sees only its own processes), an empty `/dev`, and a
private tmpfs of `limits.disk_bytes` as the only writable place; no network interface but a down loopback;
`--die-with-parent`; on x86_64 a seccomp filter (`seccomp_program`) refusing the kernel's riskier calls.
Started as root, the child drops to the `nobody` user before it reads the code, so the process limit applies.
The child then applies resource limits (CPU seconds, memory, processes, open files, file size) and an audit
hook (a second fence, not the boundary). The parent adds a wall-clock limit (the whole process group is
killed; the PID namespace ends every process the code left), reads at most `limits.output_bytes` of results,
and discards what the code prints.

Where bubblewrap is missing or cannot create namespaces, `run_code` refuses (`SandboxUnavailable`) unless
the run opted into `mode="unsafe-local"` (`reward=code_tests(sandbox=unsafe-local)`): the earlier
best-effort isolation (namespaces where `unshare` is permitted, `nobody` as root, rlimits, the audit hook),
which does NOT protect the user's files, processes or network from the code. `CodeResult.sandbox` and the
run's summary.json (`sandbox`) say which one a run had; docs/reliability.md ("Threat model") says what each
isolates and what not.

The expected outputs never reach the child: it returns the entry point's outputs on the hidden inputs and
the parent compares them, so a completion cannot pass a test by printing, by rewriting the checker or by
returning an object whose `==` is always true (outputs must be plain JSON values). Code that writes result
lines to the channel itself gains nothing over returning values: without the expected outputs, a forged
line is a guess like any other.

A timeout, a crash, a memory bomb or garbage on the result channel is a recorded failure (`CodeResult.status`),
never an exception in the trainer.
"""

from __future__ import annotations

import functools
import json
import logging
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

log = logging.getLogger(__name__)
CHILD = Path(__file__).with_name("sandbox_child.py")
MODES = ("bwrap", "unsafe-local")
"""bwrap: bubblewrap, refusing to run where it is unavailable; unsafe-local: bubblewrap where available, else
the best-effort fallback (no boundary for the user's files, processes or network)."""
NOBODY = 65534


class SandboxUnavailable(RuntimeError):
    """The isolation asked for cannot be had on this machine."""


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
    disk_bytes: int = 16 << 20
    """All files together: the size of the private tmpfs (bwrap mode)."""
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
    """The isolation applied, as the child reports it: e.g. ["bwrap", "nobody"], or in unsafe-local mode
    without bubblewrap ["netns+pidns"] / ["rlimits+audit"]."""
    seconds: float = 0.0


def _interpreter() -> tuple[str, list[str]]:
    """The base interpreter (not a venv's link to it) and the folders it needs, outside /usr."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    need = {os.path.realpath(sys.base_prefix), os.path.dirname(exe)}
    return exe, sorted(d for d in need if not (d + "/").startswith("/usr/") and d != "/usr")


def _bwrap_argv(
    bwrap: str, job_file: str, result_fd: int, disk_bytes: int, seccomp_fd: Optional[int] = None
) -> list[str]:
    """The bubblewrap command line: see the module docstring."""
    exe, folders = _interpreter()
    argv = [bwrap] + (["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else [])
    argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    argv += ["--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    if os.getuid() == 0:  # privileged bwrap: the child may only change to `nobody`, which it does first
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--disable-userns"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        top = Path("/", name)
        if top.is_symlink():
            argv += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            argv += ["--ro-bind", str(top), str(top)]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    made: set[str] = set()
    for folder in folders:  # same path: the interpreter finds its stdlib and libpython where it was built
        for parent in reversed(Path(folder).parents[:-1]):  # bwrap would create them 0700: `nobody` could not pass
            if str(parent) not in made:
                made.add(str(parent))
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", folder, folder]
    argv += ["--perms", "0755", "--dir", "/sandbox"]
    argv += ["--ro-bind", str(CHILD), "/sandbox/child.py", "--ro-bind", job_file, "/sandbox/job.json"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(disk_bytes), "--tmpfs", "/tmp"]
    argv += ["--chdir", "/tmp"]
    return argv + ["--", exe, "-I", "-S", "/sandbox/child.py", "/sandbox/job.json", str(result_fd), "bwrap"]


_DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163, "mount": 165,
    "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "move_pages": 279, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}  # fmt: skip
"""System calls the code never needs and kernel exploits often start from (the ones Docker's and Flatpak's
default seccomp profiles refuse, plus namespaces): refused with EPERM."""
_CLONE_NEW = 0x7E020080  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME


def seccomp_program() -> Optional[bytes]:
    """A classic-BPF seccomp filter for bwrap --seccomp (x86_64 only; None elsewhere): `_DENIED_X86_64` and
    `clone` with a namespace flag fail with EPERM; `clone3` (whose flags a filter cannot read) with ENOSYS, so
    that the C library falls back to `clone`; x32 system calls and other architectures' are refused."""
    import platform
    import struct

    if platform.machine() != "x86_64" or sys.byteorder != "little":
        return None
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    prog: list[tuple[int, Any, Any, int]] = [  # (code, jump if true, jump if false, k); jumps name a label
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, "deny", 0xC000003E),  # AUDIT_ARCH_X86_64
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jge, "deny", 0, 0x40000000),  # the x32 ABI
        *[(jeq, "deny", 0, nr) for nr in sorted(_DENIED_X86_64.values())],
        (jeq, "nosys", 0, 435),  # clone3
        (jeq, 0, "allow", 56),  # clone: look at its flags
        (ld, 0, 0, 16),  # args[0], low 32 bits
        (jset, "deny", "allow", _CLONE_NEW),
    ]
    labels = {"allow": len(prog), "deny": len(prog) + 1, "nosys": len(prog) + 2}
    prog += [(ret, 0, 0, allow), (ret, 0, 0, eperm), (ret, 0, 0, enosys)]

    def off(i: int, target: Any) -> int:
        return labels[target] - i - 1 if isinstance(target, str) else target

    return b"".join(struct.pack("<HBBI", c, off(i, t), off(i, f), k) for i, (c, t, f, k) in enumerate(prog))


def _probe(bwrap: str, tmp: Path, seccomp: Optional[bytes]) -> subprocess.CompletedProcess:
    probe = tmp / "job.json"
    probe.write_text("{}")
    fds: tuple[int, ...] = ()
    if seccomp is not None:
        (tmp / "seccomp.bpf").write_bytes(seccomp)
        fds = (os.open(tmp / "seccomp.bpf", os.O_RDONLY),)
    try:
        argv = _bwrap_argv(bwrap, str(probe), 1, 1 << 20, fds[0] if fds else None)
        argv = argv[: argv.index("--") + 2] + ["-I", "-S", "-c", "import os; os.stat('/sandbox/child.py')"]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, pass_fds=fds
        )
    finally:
        for fd in fds:
            os.close(fd)


@functools.lru_cache(maxsize=None)
def _bwrap_setup() -> tuple[bool, str, Optional[bytes]]:
    """(whether bubblewrap isolates here, a description or the reason it does not, the seccomp filter it
    loads); probed once, with the filter first and without it where the kernel refuses it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed; install the OS package `bubblewrap`", None
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    done = None
    for seccomp in dict.fromkeys([seccomp_program(), None]):
        with tempfile.TemporaryDirectory(prefix="ascent-sandbox-") as tmp:
            try:
                done = _probe(bwrap, Path(tmp), seccomp)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return False, f"{bwrap} could not run: {exc}", None
        if done.returncode == 0:
            who = "as root, the code runs as nobody" if os.getuid() == 0 else "user namespace"
            filt = "a seccomp filter" if seccomp is not None else "no seccomp filter"
            detail = (
                f"{version} (mount, PID, network, IPC, UTS namespaces; {who}; read-only root, private tmpfs; {filt})"
            )
            return True, detail, seccomp
    why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return False, f"{version or bwrap} cannot create its sandbox here ({why}); user namespaces may be disabled", None


def bwrap_status() -> tuple[bool, str]:
    """(whether bubblewrap isolates here, a one-line description or the reason it does not); probed once."""
    ok, detail, _ = _bwrap_setup()
    return ok, detail


bwrap_status.cache_clear = _bwrap_setup.cache_clear  # type: ignore[attr-defined]


def isolation(mode: str = "bwrap") -> str:
    """What `run_code` in `mode` will use here: "bwrap" or "unsafe-local"; raises SandboxUnavailable when mode
    is bwrap and bubblewrap does not work."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r}; choose one of {', '.join(MODES)}")
    ok, why = bwrap_status()
    if ok:
        return "bwrap"
    if mode == "unsafe-local":
        return "unsafe-local"
    raise SandboxUnavailable(
        f"refusing to run model-written code: {why}. Install bubblewrap (apt-get install bubblewrap), or opt "
        "into the weak fallback, which does not protect your files, processes or network: "
        "reward=code_tests(sandbox=unsafe-local)"
    )


def _host_processes(uid: int) -> int:
    """Processes this uid runs on the host: RLIMIT_NPROC counts them too."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            pass
    return count


def run_code(
    code: str, entry_point: str, inputs: list[list[Any]], limits: Limits = Limits(), mode: str = "bwrap"
) -> CodeResult:
    """Run `code`, then `entry_point(*args)` for each args in `inputs`, in the sandbox (see `isolation`)."""
    t0 = time.perf_counter()
    bwrap = isolation(mode) == "bwrap"
    job_dir = Path(tempfile.mkdtemp(prefix="ascent-sandbox-"))
    read_fd, write_fd = os.pipe()
    seccomp_fd = -1
    try:
        os.chmod(job_dir, 0o700)
        uid = NOBODY if os.getuid() == 0 else os.getuid()
        job = {"code": code, "entry_point": entry_point, "inputs": inputs, "limits": asdict(limits)}
        job["host_processes"] = _host_processes(uid) if bwrap else 0
        job_file = job_dir / "job.json"
        job_file.write_text(json.dumps(job))
        if bwrap:
            job_file.chmod(0o644)  # bound read-only into the sandbox; the folder stays private
            seccomp = _bwrap_setup()[2]
            if seccomp is not None:
                (job_dir / "seccomp.bpf").write_bytes(seccomp)
                seccomp_fd = os.open(job_dir / "seccomp.bpf", os.O_RDONLY)
            bwrap_path = shutil.which("bwrap") or "bwrap"
            argv = _bwrap_argv(bwrap_path, str(job_file), write_fd, limits.disk_bytes, seccomp_fd if seccomp else None)
        else:
            argv = [sys.executable, "-I", "-S", str(CHILD), str(job_file), str(write_fd), "local"]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(write_fd,) + ((seccomp_fd,) if seccomp_fd >= 0 else ()),
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
        killed = (124, -signal.SIGXCPU, -signal.SIGKILL, 256 - signal.SIGKILL, 128 + signal.SIGKILL)
        cpu_limit = ended in killed  # the CPU limit ended it (bwrap reports a signal as 128 + its number)
        return _parse(data, len(inputs), timed_out or cpu_limit, time.perf_counter() - t0)
    finally:
        for fd in (read_fd, write_fd, seccomp_fd):
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


@functools.lru_cache(maxsize=None)
def _announce(line: str) -> None:
    """Say once per process which isolation model-written code gets (a run's first lines)."""
    print(line, flush=True)
    if line.startswith("sandbox: unsafe-local"):
        log.warning(line)


@REWARDS.register("code_tests", paper=None, fidelity="ascent")
class CodeTests:
    """The fraction of a row's hidden unit tests (`tests`: [{"args": [...], "expected": value}], calling
    `entry_point`) that the completion's code passes, run in the sandbox (`ascent.rewards.sandbox`); 1.0 only
    when every test passes. None for rows without tests. Two sandboxes run at a time.

    `sandbox`: bwrap (default; the run refuses to start where bubblewrap does not work) or unsafe-local
    (opt-in: the best-effort fallback where bubblewrap is unavailable), e.g. `code_tests(sandbox=unsafe-local)`.
    """

    def __init__(self, sandbox: str = "bwrap") -> None:
        from ascent.rewards.runner import RewardSpecError

        try:
            self.isolation = isolation(sandbox)
        except (SandboxUnavailable, ValueError) as err:
            raise RewardSpecError(f"code_tests: {err}") from err
        self.mode = sandbox
        self.detail = bwrap_status()[1]
        if self.isolation == "bwrap":
            _announce(f"sandbox: bwrap — {self.detail}")
        else:
            _announce(
                f"sandbox: unsafe-local (opted in; {self.detail}): model-written code is NOT isolated from "
                "your files, processes or network"
            )

    def summary_fields(self) -> dict[str, Any]:
        """summary.json: which isolation the run's code had."""
        return {"sandbox": self.isolation, "sandbox_detail": self.detail}

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        entry_point: Optional[list[Optional[str]]] = None,
        tests: Optional[list[Optional[list[dict[str, Any]]]]] = None,
        **_: Any,
    ) -> list[Optional[float]]:
        if entry_point is None or tests is None:
            return [None] * len(completions)

        def one(i: int) -> Optional[float]:
            if not tests[i] or not entry_point[i]:
                return None
            cases = tests[i]
            code = extract_code(completions[i])
            result = run_code(code, entry_point[i], [list(c["args"]) for c in cases], mode=self.mode)
            return score_tests(result, [c["expected"] for c in cases])

        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(one, range(len(completions))))
