"""The child side of `ascent.rewards.sandbox`: run as `python -I -S sandbox_child.py JOB_FILE RESULT_FD MODE`.

Standard library only, and it imports nothing from ascent (the interpreter starts without site-packages).
Order of events:
1. read the job (code, entry point, inputs; never the expected outputs) from JOB_FILE;
2. MODE bwrap (inside bubblewrap, which is the boundary; see the parent's docstring): as root (privileged
   bubblewrap lends only CAP_SETUID/CAP_SETGID) drop to the `nobody` user at once, so the process limit
   applies. MODE local (the unsafe-local fallback): new network and PID namespaces if `unshare` is permitted
   (when this process's child — PID 1 of the new namespace — exits, the kernel kills every process it left
   behind); as root, drop to `nobody`;
3. resource limits: CPU seconds, address space, processes, open files, file size;
4. an audit hook (PEP 578) that refuses sockets, new processes, ctypes, and writes or deletions outside the
   working directory — a second fence, not a boundary: Python code gets around audit hooks (e.g. `os.open`
   with `dir_fd` reports only the relative name);
5. exec the code in a fresh namespace, call the entry point on each input with a per-call CPU alarm, and
   write one JSON line per call ({"ok": output} or {"error": "ExceptionName: message"}) to RESULT_FD.
"""

import json
import os
import resource
import signal
import sys

CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER = 0x40000000, 0x20000000, 0x10000000
NOBODY = 65534
CPU_LIMIT_EXIT = 124


def unshare(flags):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(flags) == 0


def isolate():
    """Namespaces where permitted; returns a short description of what was applied."""
    applied = []
    if os.getuid() == 0:
        if unshare(CLONE_NEWNET | CLONE_NEWPID):
            applied.append("netns+pidns")
    elif unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID):
        applied.append("userns+netns+pidns")
    return applied


def limit(job):
    lim = job["limits"]
    cpu = int(lim["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = int(lim["memory_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(lim["open_files"]), int(lim["open_files"])))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(lim["file_bytes"]), int(lim["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(lim["processes"])
    if job.get("host_processes"):  # bwrap: this /proc shows none of the host's processes the limit counts
        nproc += int(job["host_processes"])
    elif os.getuid() != 0:  # the limit counts every process of this user: leave room for the ones running
        nproc += sum(1 for p in os.listdir("/proc") if p.isdigit() and _owned(p))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _owned(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


PRELOAD = (
    "array bisect collections copy dataclasses decimal enum fractions functools heapq itertools math operator "
    "random re statistics string textwrap typing unicodedata"
).split()
"""Standard modules a solution may import: loaded before the user changes (the interpreter's own files may
not be readable by `nobody`)."""


def drop_privileges(job_dir):
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    if os.getuid() == 0:
        os.chown(job_dir, NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def fence(job_dir):
    """Audit hook: no sockets, no new processes, no ctypes, no writes or deletions outside job_dir."""
    root = os.path.realpath(job_dir) + os.sep
    blocked = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "pty.")
    blocked += ("ctypes.", "os.forkpty", "_posixsubprocess", "mmap.")
    path_events = {"os.remove", "os.unlink", "os.rmdir", "os.rename", "shutil.rmtree", "os.chmod", "os.chown"}
    path_events |= {"os.mkdir", "os.symlink", "os.link", "os.truncate", "os.utime", "os.replace", "os.mkfifo"}
    path_events |= {"os.mknod"}
    two_fds = {"os.rename", "os.replace", "os.link"}  # (src, dst, src_dir_fd, dst_dir_fd); others end in dir_fd

    def inside(path):
        try:
            return os.path.realpath(os.fsdecode(path)).startswith(root)
        except (TypeError, ValueError):
            return False

    def is_path(x):
        return isinstance(x, (str, bytes, os.PathLike))

    def hook(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in path_events:  # every path argument (rename, link, symlink: the destination too)
            dir_fds = args[2:4] if event in two_fds else () if event == "os.truncate" else args[-1:]
            if any(is_path(a) and not inside(a) for a in args) or any(d not in (None, -1) for d in dir_fds):
                raise PermissionError(f"sandbox: {event} outside the sandbox directory (or with dir_fd)")
        if event == "open" and len(args) > 1 and is_path(args[0]):
            mode = args[1] if isinstance(args[1], str) else ""
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if writing and not inside(args[0]):
                raise PermissionError("sandbox: writing outside the sandbox directory")

    sys.addaudithook(hook)


def plain(x):
    """A JSON-able copy of an output (tuples as lists); raises TypeError for anything else."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {k: plain(v) for k, v in x.items()}
    raise TypeError(f"output of type {type(x).__name__} is not comparable")


def timeout(signum, frame):
    raise TimeoutError("the call took too long")


def run(job, out):
    write = os.write
    dumps = json.dumps
    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    signal.signal(signal.SIGALRM, timeout)
    signal.signal(signal.SIGXCPU, lambda signum, frame: os._exit(CPU_LIMIT_EXIT))  # PID 1 needs a handler
    try:
        signal.setitimer(signal.ITIMER_REAL, float(job["limits"]["call_s"]))  # the module body, as one call
        exec(compile(job["code"], "<solution>", "exec"), namespace)
        signal.setitimer(signal.ITIMER_REAL, 0)
        fn = namespace[job["entry_point"]]
    except BaseException as exc:  # the code itself does not run: every test fails with its error
        signal.setitimer(signal.ITIMER_REAL, 0)
        line = dumps({"error": f"{type(exc).__name__}: {str(exc)[:200]}"}) + "\n"
        for _ in job["inputs"]:
            write(out, line.encode())
        return
    for args in job["inputs"]:
        signal.setitimer(signal.ITIMER_REAL, float(job["limits"]["call_s"]))
        try:
            result = {"ok": plain(fn(*args))}
        except BaseException as exc:
            result = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            line = dumps(result)
        except (TypeError, ValueError) as exc:  # e.g. a float('nan') or a cycle
            line = dumps({"error": f"{type(exc).__name__}: unserialisable output"})
        write(out, (line + "\n").encode())


def main():
    job_file, out, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(job_file) as fh:
        job = json.load(fh)
    if mode == "bwrap":  # bubblewrap made the namespaces; this process is not PID 1 (bwrap's reaper is)
        if os.getuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        applied = ["bwrap", "nobody" if os.getuid() == NOBODY else f"uid {os.getuid()}"]
        work = os.getcwd()
    else:
        work = os.path.dirname(os.path.abspath(job_file))
        applied = isolate()
        pid = os.fork() if applied else 0  # in a new PID namespace the child is its PID 1
        if pid:
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        os.chdir(work)
        drop_privileges(work)
        applied = applied or ["rlimits+audit"]
    limit(job)
    os.write(out, (json.dumps({"sandbox": applied}) + "\n").encode())
    fence(work)
    run(job, out)
    os._exit(0)


if __name__ == "__main__":
    main()
