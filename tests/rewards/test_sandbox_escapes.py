"""The escapes of the security probe (../shared/audit/security.md) against the bubblewrap sandbox: writes through
`dir_fd` and the second path of `os.replace`, a shell through `ctypes`, a process that leaves the group with
`fork` + `setsid`, the trainer's secrets in `/proc/<pid>/environ`, the host's process list, and reading a run
folder (where samples.jsonl lives) or the project's source. And the mode a run reports: without bubblewrap,
model-written code is refused unless the run opted into `unsafe-local`."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from ascent.rewards import RewardRunner
from ascent.rewards.runner import RewardSpecError
from ascent.rewards.sandbox import (
    CodeTests,
    Limits,
    SandboxUnavailable,
    bwrap_status,
    isolation,
    run_code,
)

FAST = Limits(cpu_s=3, call_s=2.0, wall_s=10.0)
needs_bwrap = pytest.mark.skipif(not bwrap_status()[0], reason=f"bubblewrap unavailable: {bwrap_status()[1]}")


@pytest.fixture
def victim():
    """A folder on the host anyone may write to (as /tmp is): the sandbox must not reach it even so."""
    root = Path(tempfile.mkdtemp(prefix="ascent-victim-"))
    root.chmod(0o777)
    for name in ("victim.txt", "victim2.txt", "keep.txt"):
        (root / name).write_text("mine")
        (root / name).chmod(0o666)
    yield root
    for p in root.iterdir():
        p.unlink()
    root.rmdir()


def attempts(*actions: str) -> str:
    """Code whose `f` tries each action (a Python expression) and returns what each gave or raised."""
    body = "".join(f"    out.append(attempt(lambda: {a}))\n" for a in actions)
    return (
        "import os\n"
        "def attempt(fn):\n    try:\n        return repr(fn())\n    except BaseException as exc:\n"
        "        return type(exc).__name__\n"
        f"def f():\n    out = []\n{body}    return out\n"
    )


@needs_bwrap
def test_dir_fd_and_rename_targets_do_not_reach_the_host(victim):
    fd = f"os.open({str(victim)!r}, os.O_RDONLY)"
    code = attempts(
        f"os.write(os.open('victim.txt', os.O_WRONLY | os.O_TRUNC, dir_fd={fd}), b'x')",
        f"os.remove('keep.txt', dir_fd={fd})",
        "open('y', 'w').write('replaced')",
        f"os.replace('y', {str(victim / 'victim2.txt')!r})",
        f"os.link('y', {str(victim / 'linked')!r})",
    )
    r = run_code(code, "f", [[]], FAST)
    assert r.status == "ok" and r.sandbox[0] == "bwrap", r
    assert (victim / "victim.txt").read_text() == "mine" and (victim / "keep.txt").exists()
    assert (victim / "victim2.txt").read_text() == "mine" and not (victim / "linked").exists()
    assert r.outputs[0]["ok"][2] == "8"  # its own tmpfs stays writable


@needs_bwrap
def test_ctypes_gets_no_shell_and_no_host_file(victim):
    code = attempts(
        f"__import__('ctypes').CDLL(None).system(b'id > {victim}/pwn')",
        "__import__('ctypes').CDLL(None).fork()",
    )
    r = run_code(code, "f", [[]], FAST)
    assert r.status == "ok" and not (victim / "pwn").exists(), r
    assert all(not out.lstrip("-").isdigit() or out == "-1" for out in r.outputs[0]["ok"])


@needs_bwrap
def test_a_process_that_leaves_the_group_does_not_survive(victim):
    code = (
        "import os, time\n"
        "def f():\n"
        "    try:\n"
        "        import ctypes\n"
        "        libc = ctypes.CDLL(None)\n"
        "        pid = libc.fork()\n"
        "    except BaseException as exc:\n"
        "        return type(exc).__name__\n"
        "    if pid == 0:\n"
        "        libc.setsid()\n"
        f"        time.sleep(2)\n        open({str(victim / 'late')!r}, 'w').write('survived')\n"
        "        os._exit(0)\n"
        "    return pid\n"
    )
    r = run_code(code, "f", [[]], FAST)
    assert r.status == "ok", r
    time.sleep(3)
    assert not (victim / "late").exists()


@needs_bwrap
def test_no_host_process_and_no_secret_in_proc(monkeypatch):
    monkeypatch.setenv("ASCENT_TEST_TOKEN", "s3cr3t-from-env")
    code = (
        "import os\n"
        "def f():\n"
        "    found, pids = [], [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    for p in pids:\n"
        "        try:\n"
        "            if b's3cr3t' in open(f'/proc/{p}/environ', 'rb').read():\n"
        "                found.append(p)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return [len(pids), found, open('/proc/1/cmdline', 'rb').read().decode(errors='replace')]\n"
    )
    r = run_code(code, "f", [[]], FAST)
    n_pids, found, init_cmdline = r.outputs[0]["ok"]
    host_init = Path("/proc/1/cmdline").read_bytes().decode(errors="replace")
    assert found == [] and n_pids <= 3 and init_cmdline != host_init, r  # bwrap's reaper, the child


@needs_bwrap
def test_the_run_folder_and_the_source_are_out_of_sight():
    runs = Path(tempfile.mkdtemp(prefix="ascent-runs-"))
    try:
        runs.chmod(0o755)  # as a run folder was before runs were created private
        (runs / "samples.jsonl").write_text('{"fields": {"tests": [{"args": [1], "expected": 42}]}}\n')
        (runs / "samples.jsonl").chmod(0o644)
        source = Path(__file__).resolve().parents[2] / "ascent" / "__init__.py"
        code = attempts(f"open({str(runs / 'samples.jsonl')!r}).read()", f"open({str(source)!r}).read()")
        r = run_code(code, "f", [[]], FAST)
        assert r.outputs[0]["ok"] == ["FileNotFoundError", "FileNotFoundError"], r
    finally:
        (runs / "samples.jsonl").unlink()
        runs.rmdir()


@needs_bwrap
def test_the_private_tmpfs_caps_all_files_together():
    small = Limits(cpu_s=3, call_s=2.0, wall_s=10.0, file_bytes=1 << 20, disk_bytes=2 << 20)
    code = attempts(*[f"open('f{i}', 'wb').write(b'0' * 600000)" for i in range(6)])
    out = run_code(code, "f", [[]], small).outputs[0]["ok"]
    assert out[:3] == ["600000"] * 3 and "OSError" in out[3:], out  # ENOSPC once 2 MiB are used


@pytest.fixture
def no_bwrap(monkeypatch):
    """A machine without bubblewrap."""
    monkeypatch.setenv("PATH", "/nonexistent")
    bwrap_status.cache_clear()
    yield
    monkeypatch.undo()
    bwrap_status.cache_clear()


def test_without_bubblewrap_code_is_refused_unless_the_run_opts_in(no_bwrap, capsys):
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap .* not installed.*sandbox=unsafe-local"):
        run_code("def f():\n    return 1\n", "f", [[]], FAST)
    with pytest.raises(RewardSpecError, match="code_tests: refusing to run model-written code"):
        RewardRunner(["code_tests"])
    runner = RewardRunner(["code_tests(sandbox=unsafe-local)"])
    assert runner.summary_fields()["sandbox"] == "unsafe-local"
    assert "sandbox: unsafe-local" in capsys.readouterr().out  # among the run's first lines
    r = run_code("def f():\n    return 1\n", "f", [[]], FAST, mode="unsafe-local")
    assert r.outputs == [{"ok": 1}] and r.sandbox[0] != "bwrap"
    with pytest.raises(ValueError, match="choose one of bwrap, unsafe-local"):
        isolation("none")


@needs_bwrap
def test_a_run_reports_bubblewrap(capsys):
    from ascent.rewards.sandbox import _announce

    _announce.cache_clear()
    fields = CodeTests().summary_fields()
    assert fields["sandbox"] == "bwrap" and "bubblewrap" in fields["sandbox_detail"]
    assert capsys.readouterr().out.startswith("sandbox: bwrap")


@needs_bwrap
@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="the seccomp filter is written for x86_64")
def test_a_seccomp_filter_is_loaded_on_x86_64():
    code = "def f():\n    return [ln for ln in open('/proc/self/status') if ln.startswith('Seccomp')]\n"
    status = dict(ln.split(":") for ln in run_code(code, "f", [[]], FAST).outputs[0]["ok"])
    assert status["Seccomp"].strip() == "2" and int(status["Seccomp_filters"]) >= 1, status
    assert "a seccomp filter" in bwrap_status()[1]
