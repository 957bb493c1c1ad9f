"""The code sandbox under hostile completions: infinite loops, fork bombs, memory bombs, shell commands,
file deletion, sockets, huge prints and forged results. Each must end as a recorded failure within the
limits, and leave the host (its files, its processes, its network peers) and the run untouched."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from ascent.rewards import RewardRunner, sandbox
from ascent.rewards.sandbox import CodeTests, Limits, extract_code, score_tests

FAST = Limits(cpu_s=3, call_s=1.0, wall_s=6.0)
ROOMY = Limits(cpu_s=10, call_s=10.0, wall_s=60.0)  # where a correct run must pass even on a loaded machine
ADD = "def add(a, b):\n    return a + b\n"


def run_code(code, entry_point, inputs, limits):
    """bubblewrap where it works (tests/rewards/test_sandbox_escapes.py insists on it), else the fallback."""
    return sandbox.run_code(code, entry_point, inputs, limits, mode="unsafe-local")


def leftovers() -> list[str]:
    """Processes still running the sandbox child, and its temporary directories."""
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"sandbox_child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                procs.append(pid)
        except OSError:
            pass
    dirs = [p.name for p in Path(tempfile.gettempdir()).glob("ascent-sandbox-*")]
    return procs + dirs


@pytest.fixture(autouse=True)
def host_is_clean_afterwards():
    before = set(leftovers())
    yield
    deadline = time.monotonic() + 3
    while set(leftovers()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(leftovers()) - before, "the sandbox left processes or directories behind"


def test_a_correct_solution_passes_and_a_wrong_one_fails():
    ok = run_code(ADD, "add", [[1, 2], [0.5, 0.25], ["a", "b"]], ROOMY)
    assert ok.status == "ok" and ok.outputs == [{"ok": 3}, {"ok": 0.75}, {"ok": "ab"}] and ok.sandbox
    assert score_tests(ok, [3, 0.75, "ab"]) == 1.0
    assert score_tests(ok, [3, 0.7500000001, "ab"]) == 1.0  # floats to 1e-6 relative
    assert score_tests(ok, [3, 1.0, "ab"]) == pytest.approx(2 / 3)
    flag = run_code("def f(x):\n    return x > 0\n", "f", [[1]], ROOMY)
    assert score_tests(flag, [1]) == 0.0  # True is not 1
    broken = run_code("def add(a, b) return a", "add", [[1, 2]], ROOMY)
    assert broken.outputs[0]["error"].startswith("SyntaxError") and score_tests(broken, [3]) == 0.0
    missing = run_code(ADD, "sub", [[1, 2]], ROOMY)
    assert missing.outputs == [{"error": "KeyError: 'sub'"}]


def test_standard_modules_import():
    code = "import math, collections, itertools, re\ndef f(n):\n    return math.isqrt(n) + len(re.findall('a', 'aa'))\n"
    assert run_code(code, "f", [[17]], ROOMY).outputs == [{"ok": 6}]


@pytest.mark.parametrize(
    "code",
    [
        "def f():\n    while True:\n        pass\n",  # in the call
        "while True:\n    pass\n",  # in the module body
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ndef f():\n    while True:\n        pass\n",
    ],
    ids=["call", "module", "alarm_ignored"],
)
def test_infinite_loops_end_at_the_limits(code):
    t0 = time.monotonic()
    r = run_code(code, "f", [[]], FAST)
    assert time.monotonic() - t0 < FAST.wall_s + 2
    assert score_tests(r, [None]) == 0.0 and "error" in r.outputs[0]


def test_a_fork_bomb_is_contained():
    t0 = time.monotonic()
    r = run_code("import os\ndef f():\n    while True:\n        os.fork()\n", "f", [[]], FAST)
    assert time.monotonic() - t0 < FAST.wall_s + 2 and "error" in r.outputs[0]
    # the autouse fixture checks that no process of it survives


def test_memory_bombs_fail_inside_the_sandbox():
    r = run_code("def f():\n    return len(bytearray(50 * 2**30))\n", "f", [[]], FAST)
    assert r.outputs[0]["error"].startswith("MemoryError")
    r = run_code("x = [0] * (10**10)\ndef f():\n    return 1\n", "f", [[]], FAST)
    assert "MemoryError" in r.outputs[0]["error"]


def test_shell_commands_and_file_deletion_do_not_reach_the_host(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("mine")
    pwned = tmp_path / "pwned"
    code = f"""
import os
def f():
    errors = []
    for action in (lambda: os.system("touch {pwned}"), lambda: os.remove("{keep}"),
                   lambda: os.rmdir("{tmp_path}"), lambda: open("{pwned}", "w").write("x"),
                   lambda: os.rename("{keep}", "{pwned}")):
        try:
            action()
        except BaseException as exc:
            errors.append(type(exc).__name__)
    return errors
"""
    r = run_code(code, "f", [[]], FAST)
    assert r.status == "ok" and len(r.outputs[0]["ok"]) == 5, r.outputs  # every attempt raised
    assert keep.read_text() == "mine" and not pwned.exists()
    sub = run_code("import subprocess\ndef f():\n    return subprocess.run(['true']).returncode\n", "f", [[]], FAST)
    assert "error" in sub.outputs[0]


def test_sockets_reach_nothing():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = f"""
def f():
    import socket
    s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
    s.sendall(b"hello")
    return 1
"""
    r = run_code(code, "f", [[]], FAST)
    assert "error" in r.outputs[0]
    with pytest.raises(socket.timeout):
        server.accept()  # nobody connected
    server.close()


def test_huge_prints_and_files_are_bounded_and_forged_results_do_not_count():
    t0 = time.monotonic()
    r = run_code("def f():\n    for _ in range(10**6):\n        print('x' * 10**4)\n    return 1\n", "f", [[]], FAST)
    assert time.monotonic() - t0 < FAST.wall_s + 2 and score_tests(r, [1]) in (0.0, 1.0)
    big = run_code("def f():\n    open('big', 'wb').write(b'0' * 10**8)\n    return 1\n", "f", [[]], FAST)
    assert "error" in big.outputs[0]  # larger than file_bytes
    # writing to the result channel: a flood is cut at output_bytes, a forged "pass" line breaks the parse
    spray = "import os\ndef spray(data):\n    for fd in range(3, 64):\n        try:\n            os.write(fd, data)\n"
    spray += "        except OSError:\n            pass\n"
    flood = run_code(spray + "def f():\n    spray(b'x' * 10**7)\n    return 1\n", "f", [[]], FAST)
    assert flood.status == "crashed" and score_tests(flood, [1]) == 0.0
    # result lines written straight to the channel gain nothing over returning a value: the child never sees
    # the expected outputs, so a forged line is a guess like any other (here a wrong one, ahead of f's own)
    forged = spray + "spray(b'{\"ok\": 41}\\n')\ndef f():\n    return 0\n"
    assert score_tests(run_code(forged, "f", [[]], FAST), [42]) == 0.0
    always = "class A:\n    def __eq__(self, o):\n        return True\ndef f():\n    return A()\n"
    assert score_tests(run_code(always, "f", [[]], FAST), [42]) == 0.0  # not a plain value
    printed = "def f():\n    print(42)\n"
    assert score_tests(run_code(printed, "f", [[]], FAST), [42]) == 0.0


def test_code_tests_reward_through_the_runner():
    tests = [{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}]
    completions = [
        f"Here is my solution:\n```python\n{ADD}```",
        "```python\ndef add(a, b):\n    return 3\n```",
        "```python\ndef add(a, b):\n    while True:\n        pass\n```",
        "no code at all",
        "whatever",
    ]
    fields = [{"entry_point": "add", "tests": tests}] * 4 + [{"entry_point": None, "tests": None}]
    runner = RewardRunner(["code_tests(sandbox=unsafe-local)"], timeout_s=60)
    res = runner.score(["p"] * 5, completions, fields)
    assert res.components[:4, 0].tolist() == [1.0, 0.5, 0.0, 0.0] and not bool(res.valid[4])
    assert CodeTests(sandbox="unsafe-local")(["p"], ["x"]) == [None]


def test_extract_code_takes_the_last_block():
    assert extract_code("```python\na = 1\n```\nbetter:\n```py\na = 2\n```") == "a = 2\n"
