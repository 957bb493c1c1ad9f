"""The README's worked example runs as written: its Python block makes the data and reward, its command trains."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from ascent.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


def example_blocks() -> tuple[str, str]:
    text = README.read_text().split("### Worked example", 1)[1]
    python = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    bash = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return python, bash


def test_readme_worked_example(tmp_path, monkeypatch):
    python, bash = example_blocks()
    (tmp_path / "make_reverse_data.py").write_text(python)
    monkeypatch.chdir(tmp_path)
    subprocess.run([sys.executable, "make_reverse_data.py"], check=True)
    command = [line for line in bash.replace("\\\n", " ").splitlines() if line.startswith("ascent train")][0]
    argv = shlex.split(command)[1:] + ["logging.progress=false"]
    assert main(argv) == 0
    summary = json.loads((tmp_path / "runs" / "reverse" / "summary.json").read_text())
    assert summary["steps"] == 20
    metrics = [json.loads(line) for line in (tmp_path / "runs" / "reverse" / "metrics.jsonl").read_text().splitlines()]
    rl = [m for m in metrics if m["phase"] == "rl"]
    assert len(rl) == 20 and all(m["reward/failed_frac"] == 0.0 for m in rl)
    # the warm start learned the reversals from the rows' `answer` field (a random policy scores ~0; 1.0 here) and
    # every RL step scored them with the user's reward (1 for a reversal, 0.2 for the right `length`; ~0.98 here)
    assert summary["accuracy_before_rl"] >= 0.8
    assert min(m["reward/mean"] for m in rl) > 0.8
    assert summary["accuracy_after_rl"] >= summary["accuracy_before_rl"] - 0.1
