"""Bad input, one table: each row is something a user or a model can get wrong, the message the user sees, and a
test that it is exactly that message (or a recorded, skipped sample) and never a crash deep in a stack trace.

`python tests/test_bad_inputs.py` prints the table as Markdown with the messages as they come out
(docs/reliability.md carries it).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ascent.cli import main  # noqa: E402

TINY = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "warmstart.steps=0",
    "train.steps=1",
    "control.enabled=false",
    "logging.progress=false",
    "eval.pass_k=0",
    "data.num_eval=4",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
]


def cli(args: list[str]) -> str:
    """The last line `ascent` prints to stderr for `args`; the exit status must be 2 (a user error)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(args)
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code
    lines = [x for x in err.getvalue().strip().splitlines() if x.strip()]
    assert rc == 2, (rc, lines[-5:])
    return lines[-1]


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def train_with_reward(tmp: Path, body: str, *extra: str) -> str:
    path = write(tmp, "reward_fn.py", body)
    return cli(["train", "default", f"reward={path}:r", f"output_dir={tmp}", "name=r", *TINY, *extra])


def jsonl_run(tmp: Path, text: str) -> str:
    good = write(
        tmp, "good.jsonl", "\n".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) for i in range(9))
    )
    bad = write(tmp, "train.jsonl", text)
    return cli(["train", "default", f"data.train={bad}", f"data.eval={good}", f"output_dir={tmp}", *TINY])


def runner_case(reward_body: str, completions: list[str]) -> str:
    """A reward that fails on some samples only: those are recorded and skipped, the others scored."""
    import tempfile

    from ascent.rewards import RewardRunner

    path = write(Path(tempfile.mkdtemp()), "partial.py", reward_body)
    runner = RewardRunner([f"{path}:r"], timeout_s=5)
    res = runner.score(["p"] * len(completions), completions, [{}] * len(completions))
    return f"valid {res.valid.tolist()}; recorded: {runner.failure_log[-1].splitlines()[0][:120]}"


def tool_case(text: str) -> str:
    from ascent.envs.tools import ToolSet, tool

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first term.
            b: the second term.
        """
        return a + b

    return ToolSet([tool(add)]).run(text)[0].output


def reward_value(name: str, completion: str, **fields) -> str:
    from ascent.rewards import resolve_reward

    fn = resolve_reward(name)
    return f"reward {fn(['p'], [completion], **{k: [v] for k, v in fields.items()})[0]}"


def damaged_checkpoint(tmp: Path) -> str:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    train(load_config("default", [*TINY, "train.steps=2", f"output_dir={tmp}", "name=c"]), stop_at=1)
    ck = tmp / "c" / "checkpoints" / "step_000001"
    (ck / "model.safetensors").write_bytes(b"")
    return cli(["train", "--resume", str(tmp / "c")])


ADD_TESTS = {"entry_point": "add", "tests": [{"args": [1, 2], "expected": 3}]}

# (category, what goes wrong, how to provoke it (tmp dir -> message), the message must match this)
CASES: list[tuple[str, str, Callable[[Path], str], str]] = [
    (
        "config",
        "unknown key",
        lambda t: cli(["train", "default", "train.stepz=3"]),
        r"unknown key train.stepz .*valid keys: .*steps",
    ),
    (
        "config",
        "value of the wrong type",
        lambda t: cli(["train", "default", "train.steps=abc"]),
        r"train.steps: expected an integer, got 'abc'",
    ),
    (
        "config",
        "unknown piece name",
        lambda t: cli(["train", "default", "algorithm.loss=nope"]),
        r"unknown policy loss 'nope'; valid names: .*ppo_clip",
    ),
    (
        "config",
        "negative step count",
        lambda t: cli(["train", "default", "train.steps=-1"]),
        r"train.steps must be >= 0, got -1",
    ),
    ("config", "unknown recipe", lambda t: cli(["train", "nosuch"]), r"no recipe 'nosuch'; shipped recipes: .*default"),
    ("config", "two recipes", lambda t: cli(["train", "default", "smollm2-arith"]), r"one recipe at most"),
    (
        "config",
        "temperature below 0",
        lambda t: cli(["train", "default", "rollout.temperature=-1"]),
        r"rollout.temperature must be >= 0",
    ),
    (
        "config",
        "top_p out of range",
        lambda t: cli(["train", "default", "rollout.top_p=2"]),
        r"rollout.top_p must be in \(0, 1\]",
    ),
    (
        "config",
        "value not among the choices",
        lambda t: cli(["train", "default", "train.precision=fp8"]),
        r"train.precision: 'fp8' is not valid; choose one of 'fp32', 'bf16', 'auto'",
    ),
    (
        "config",
        "unknown task parameter",
        lambda t: cli(["train", "default", "data.task=addition(digitz=2)"]),
        r"unknown key .*digitz.*valid keys: column_drop, digits, .*teacher_carry_drop",
    ),
    (
        "config",
        "unknown task",
        lambda t: cli(["train", "default", "data.task=nosuch"]),
        r"unknown task 'nosuch'; valid names: .*addition",
    ),
    (
        "config",
        "TIS cap below 1",
        lambda t: cli(["train", "default", "algorithm.tis_cap=0.5"]),
        r"algorithm.tis_cap must be >= 1",
    ),
    (
        "config",
        "sample log every -1 steps",
        lambda t: cli(["train", "default", "logging.samples_every=-1"]),
        r"logging.samples_every must be >= 0",
    ),
    (
        "config",
        "recipe file that is not YAML",
        lambda t: cli(["train", str(write(t, "r.yaml", "train: [1, 2\n"))]),
        r"is not valid YAML",
    ),
    (
        "config",
        "recipe file that is a list",
        lambda t: cli(["train", str(write(t, "r.yaml", "- 1\n- 2\n"))]),
        r"must be a mapping of keys to values, got list",
    ),
    ("config", "unknown list kind", lambda t: cli(["list", "nosuch"]), r"invalid choice: 'nosuch'"),
    (
        "data",
        "row without a prompt",
        lambda t: jsonl_run(t, json.dumps({"question": "1+1=", "answer": "2"})),
        r"train.jsonl:1: each row needs a string field 'prompt' \(got keys: \['answer', 'question'\]\)",
    ),
    (
        "data",
        "line that is not JSON",
        lambda t: jsonl_run(t, '{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2=" \n'),
        r"train.jsonl:2: not valid JSON",
    ),
    ("data", "empty data file", lambda t: jsonl_run(t, ""), r"has no rows"),
    (
        "data",
        "data.train without data.eval",
        lambda t: cli(["train", "default", f"data.train={write(t, 'a.jsonl', '{}')}"]),
        r"needs both data.train=FILE.jsonl and data.eval=FILE.jsonl",
    ),
    (
        "reward",
        "unknown reward name",
        lambda t: cli(["train", "default", "reward=nosuch"]),
        r"unknown reward 'nosuch'; use a registered name",
    ),
    (
        "reward",
        "reward file with a syntax error",
        lambda t: train_with_reward(t, "def r(prompts, completions, **k):\n    return [1.0 for c in completions\n"),
        r"failed to import: SyntaxError",
    ),
    (
        "reward",
        "reward file without the function",
        lambda t: cli(["train", "default", f"reward={write(t, 'f.py', 'x = 1')}:r"]),
        r"has no callable 'r'",
    ),
    (
        "reward",
        "reward that raises on every sample",
        lambda t: train_with_reward(t, "def r(prompts, completions, **k):\n    raise ValueError('boom')\n"),
        r"step 1: every sample's reward failed \(.*ValueError: boom\); fix the reward function .* resume with --resume",
    ),
    (
        "reward",
        "reward that returns NaN",
        lambda t: train_with_reward(
            t, "def r(prompts, completions, **k):\n    return [float('nan')] * len(completions)\n"
        ),
        r"returned 4 non-finite or non-numeric values",
    ),
    (
        "reward",
        "reward that returns the wrong number of values",
        lambda t: train_with_reward(t, "def r(prompts, completions, **k):\n    return [1.0]\n"),
        r"returned 1 values for 4 completions",
    ),
    (
        "reward",
        "reward that hangs",
        lambda t: train_with_reward(
            t, "import time\ndef r(prompts, completions, **k):\n    time.sleep(60)\n", "reward_timeout_s=1"
        ),
        r"timed out after 1s \(reward_timeout_s\); the call is abandoned",
    ),
    (
        "reward",
        "reward that fails on one sample",
        lambda t: runner_case(
            "def r(prompts, completions, **k):\n    return [1.0 / len(c) for c in completions]\n", ["ab", ""]
        ),
        r"valid \[True, False\]; recorded: .*ZeroDivisionError",
    ),
    (
        "tool call",
        "arguments that are not JSON",
        lambda t: tool_case('<tool_call>{name: "add"}</tool_call>'),
        r"Error: malformed tool call: invalid JSON",
    ),
    (
        "tool call",
        "call never closed",
        lambda t: tool_case('<tool_call>{"name": "add"'),
        r"Error: malformed tool call: <tool_call> without a closing </tool_call>",
    ),
    (
        "tool call",
        "JSON that is not a call",
        lambda t: tool_case("<tool_call>[1, 2]</tool_call>"),
        r'Error: malformed tool call: expected \{"name": <string>, "arguments": \{\.\.\.\}\}',
    ),
    (
        "tool call",
        "unknown tool",
        lambda t: tool_case('<tool_call>{"name": "mul", "arguments": {}}</tool_call>'),
        r"Error: unknown tool 'mul'; available tools: add",
    ),
    (
        "tool call",
        "argument of the wrong type",
        lambda t: tool_case('<tool_call>{"name": "add", "arguments": {"a": "2", "b": 1}}</tool_call>'),
        r"Error: bad arguments for tool 'add': a must be of type integer, got str",
    ),
    (
        "tool call",
        "missing argument",
        lambda t: tool_case('<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'),
        r"Error: bad arguments for tool 'add': missing required argument 'b'",
    ),
    (
        "model output",
        "answer not in the asked-for form",
        lambda t: reward_value("answer_is", "I think 8", answer="8"),
        r"reward 0.0",
    ),
    (
        "model output",
        "code that does not parse",
        lambda t: reward_value("code_tests(sandbox=unsafe-local)", "```python\ndef add(a, b) return\n```", **ADD_TESTS),
        r"reward 0.0",
    ),
    (
        "model output",
        "code that never returns",
        lambda t: reward_value(
            "code_tests(sandbox=unsafe-local)", "def add(a, b):\n    while True:\n        pass\n", **ADD_TESTS
        ),
        r"reward 0.0",
    ),
    (
        "run directory",
        "resume of a folder that is no run",
        lambda t: cli(["train", "--resume", str(t / "nope")]),
        r"is not a run directory \(no config.yaml\); start a run with `ascent train RECIPE`",
    ),
    (
        "run directory",
        "a run of that name exists",
        lambda t: _twice(t),
        r"already holds a run: continue it with `ascent train --resume .*`, start over with --overwrite",
    ),
    (
        "run directory",
        "export of a folder that is no run",
        lambda t: cli(["export", str(t / "nope"), str(t / "out")]),
        r"cannot export .*: .* is neither a run directory nor a checkpoint inside one",
    ),
    (
        "run directory",
        "eval of a folder that is no run",
        lambda t: cli(["eval", str(t / "nope")]),
        r"is neither a run directory nor a checkpoint inside one",
    ),
    (
        "run directory",
        "report of a folder that is no run",
        lambda t: cli(["report", str(t / "nope")]),
        r"is not a run directory \(no metrics.jsonl or summary.json\)",
    ),
    (
        "run directory",
        "resume when every checkpoint is damaged",
        damaged_checkpoint,
        r"no whole checkpoint under .*checkpoints \(the newest, step_000001, is damaged\)",
    ),
    (
        "config",
        "one sample per prompt with a group baseline (trains nothing)",
        lambda t: cli(["train", "default", "rollout.samples_per_prompt=1"]),
        r"samples_per_prompt=1 with algorithm.advantage=grpo: .* nothing is trained; set rollout.samples_per_prompt",
    ),
    (
        "run directory",
        "output folder that is a file",
        lambda t: cli(["train", "default", *TINY, f"output_dir={write(t, 'afile', 'x')}/runs"]),
        r"cannot write the run folder .*afile/runs/default: .*afile is a file, not a folder",
    ),
    (
        "run directory",
        "a run folder in use by another run",
        lambda t: _in_use(t),
        r"x is in use by another running `ascent train`; wait for it to end, or choose another name=",
    ),
    (
        "run directory",
        "resume with a damaged config.yaml",
        lambda t: cli(["train", "--resume", str(write(t, "config.yaml", "seed: 1\ntrain: {steps: [1\n").parent)]),
        r"config.yaml is not valid YAML \(line 3, column 1\): expected ',' or ']', but got '<stream end>'",
    ),
]

# The hardening cases (the security probe, issue 36): values and folders that used to crash a run, run code or
# delete what they should not.
CASES += [
    (
        "config",
        "run name that leaves output_dir",
        lambda t: cli(["train", "default", "name=.."]),
        r"name='\.\.' cannot be a run name: use letters, digits and _ \. = -",
    ),
    (
        "data",
        "file that is not UTF-8",
        lambda t: _bytes_run(t, b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "caf\xe9=", "answer": "2"}\n'),
        r"train.jsonl:2: not UTF-8 text \(invalid continuation byte at byte 15 of the line\)",
    ),
    (
        "data",
        "NaN in a row",
        lambda t: jsonl_run(t, '{"prompt": "1+1=", "answer": "2", "difficulty": NaN}'),
        r"train.jsonl:1: NaN is not a JSON value; write null or a number",
    ),
    (
        "reward",
        "reward that returns an int too large for a float",
        lambda t: train_with_reward(t, "def r(prompts, completions, **k):\n    return [10**400] * len(completions)\n"),
        r"returned 4 non-finite or non-numeric values",
    ),
    (
        "reward",
        "reward that returns strings and booleans",
        lambda t: train_with_reward(t, "def r(prompts, completions, **k):\n    return ['1.0', True] * 2\n"),
        r"returned 4 non-finite or non-numeric values",
    ),
    (
        "model output",
        "code to run where bubblewrap is missing",
        lambda t: _without_bwrap(lambda: cli(["train", "code-functions", *TINY, f"output_dir={t}"])),
        r"code_tests: refusing to run model-written code: bubblewrap \(bwrap\) is not installed.*unsafe-local",
    ),
    (
        "run directory",
        "--overwrite of a folder ascent did not make",
        lambda t: _unmarked(t),
        r"does not look like a run made by ascent \(no \.ascent-run file\); --overwrite deletes only those",
    ),
    (
        "run directory",
        "export --overwrite into a folder that is no export",
        lambda t: _export_over(t),
        r"is not an earlier export \(no ascent_export.json\); --overwrite replaces only those",
    ),
    (
        "run directory",
        "resume of a run whose checkpoint would run code",
        lambda t: _tampered(t),
        r"trainer_state.pt holds objects ascent does not save \(.*posix.system.*\); refused: nothing in it was run",
    ),
]


def _bytes_run(tmp: Path, data: bytes) -> str:
    (tmp / "train.jsonl").write_bytes(data)
    good = write(tmp, "good.jsonl", json.dumps({"prompt": "1+1=", "answer": "2"}))
    return cli(["train", "default", f"data.train={tmp / 'train.jsonl'}", f"data.eval={good}", f"output_dir={tmp}"])


def _without_bwrap(provoke: Callable[[], str]) -> str:
    import os

    from ascent.rewards.sandbox import bwrap_status

    path = os.environ.get("PATH", "")
    os.environ["PATH"] = "/nonexistent"
    bwrap_status.cache_clear()
    try:
        return provoke()
    finally:
        os.environ["PATH"] = path
        bwrap_status.cache_clear()


def _unmarked(tmp: Path) -> str:
    (tmp / "x").mkdir()
    (tmp / "x" / "config.yaml").write_text("model: my own project's settings\n")  # no ascent run's config
    (tmp / "x" / "state.json").write_text("{}")
    return cli(["train", "default", *TINY, f"output_dir={tmp}", "name=x", "--overwrite"])


def _export_over(tmp: Path) -> str:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    train(load_config("default", [*TINY, f"output_dir={tmp}", "name=r"]))
    (tmp / "home").mkdir()
    (tmp / "home" / "thesis.tex").write_text("years of work")
    return cli(["export", str(tmp / "r"), str(tmp / "home"), "--overwrite"])


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


def _tampered(tmp: Path) -> str:
    import torch

    from ascent.app.pipeline import train
    from ascent.config import load_config
    from ascent.trainer.checkpoint import write_manifest

    train(load_config("default", [*TINY, "train.steps=2", f"output_dir={tmp}", "name=c"]), stop_at=1)
    ck = tmp / "c" / "checkpoints" / "step_000001"
    state = torch.load(ck / "trainer_state.pt", weights_only=False)
    torch.save({**state, "payload": _RunsCode()}, ck / "trainer_state.pt")
    (ck / "manifest.json").unlink()
    write_manifest(ck)
    return cli(["train", "--resume", str(tmp / "c")])


def _in_use(tmp: Path) -> str:
    """A second `ascent train` on the folder of a live run (the live run's lock held here)."""
    from ascent.app.runs import lock_run_dir, release_run_dir

    (tmp / "x").mkdir()
    lock_run_dir(tmp / "x")
    try:
        return cli(["train", "default", *TINY, f"output_dir={tmp}", "name=x", "--overwrite"])
    finally:
        release_run_dir(tmp / "x")


def _twice(tmp: Path) -> str:
    from ascent.app.pipeline import train
    from ascent.config import load_config

    train(load_config("default", [*TINY, f"output_dir={tmp}", "name=x"]))
    return cli(["train", "default", *TINY, f"output_dir={tmp}", "name=x"])


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_bad_input_gets_a_clear_message(case, tmp_path):
    category, what, provoke, expected = case
    message = provoke(tmp_path)
    assert re.search(expected, message), message
    assert "Traceback" not in message


def test_the_table_has_at_least_30_rows_across_every_category():
    assert len(CASES) >= 30
    assert {c[0] for c in CASES} == {"config", "data", "reward", "tool call", "model output", "run directory"}


def table() -> str:
    import tempfile

    lines = ["| # | input | what is wrong | what the user sees |", "|---|---|---|---|"]
    for i, (category, what, provoke, _) in enumerate(CASES, 1):
        with contextlib.redirect_stdout(io.StringIO()):  # runs print their config and progress
            message = provoke(Path(tempfile.mkdtemp())).replace("|", "\\|")
        message = re.sub(r"/tmp/[^\s:'\"]+/", "…/", message)
        lines.append(f"| {i} | {category} | {what} | `{message[:220]}` |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
