"""Kill drill: SIGKILL a training run at random moments, resume it each time, and check that it finishes whole.

    python benchmarks/fault_drill.py --runtime local --kills 20
    python benchmarks/fault_drill.py --runtime ray --kills 20

A small run of the default task (tiny model, short warm start, RL with a checkpoint every step and samples
logged every 2 steps) is started as `python -m ascent.cli train ...` in its own process group. After a delay
drawn uniformly from [--min-delay, --max-delay] seconds the whole process group gets SIGKILL (the Ray driver
and, with runtime=ray, the workers it started), and the run is resumed with `ascent train --resume`; after
`--kills` kills the last resume runs to the end. Then:

- summary.json reports every RL step (`steps` == train.steps);
- metrics.jsonl holds each RL step exactly once, samples.jsonl each logged step exactly once;
- the newest checkpoint passes its manifest check and loads into a fresh model;
- no process of the run is left (with Ray: no raylet or worker of its session).

Prints one JSON line per kill (delay, where the run was: its phase and last step) and a final JSON verdict;
exit status 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUN = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=addition(digits=1)",
    "data.num_eval=20",
    "warmstart.steps=300",
    "warmstart.batch_size=16",
    "warmstart.eval_every=0",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "train.eval_every=0",
    "train.checkpoint_every=1",
    "train.optim.lr=1e-3",
    "eval.pass_k=0",
    "control.enabled=false",
    "logging.progress=false",
    "logging.samples_every=2",
    "threads=1",
]


def where(run_dir: Path) -> dict:
    """The phase and step of the last metrics line (what the run had done when it was killed)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return {"phase": "start", "step": 0}
    lines = [x for x in path.read_text().splitlines() if x.strip()]
    if not lines:
        return {"phase": "start", "step": 0}
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"phase": "torn line", "step": None}
    return {"phase": last.get("phase"), "step": last.get("step")}


def start(cmd: list[str], log) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)


def leftovers(marker: str) -> list[str]:
    """Processes whose command line mentions `marker` (the run's directory)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and int(pid) != os.getpid():
            out.append(f"{pid}: {cmdline[:120]}")
    return out


def ray_leftovers(since: float) -> list[str]:
    """Ray daemons (raylet, gcs_server, workers) started after `since`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            started = Path(f"/proc/{pid}").stat().st_ctime
        except OSError:
            continue
        if started >= since and any(k in cmdline for k in ("raylet", "gcs_server", "ray::", "default_worker.py")):
            out.append(f"{pid}: {cmdline[:100]}")
    return out


def check(run_dir: Path, steps: int) -> dict:
    from ascent.config import load_config
    from ascent.policy.model import Policy  # noqa: F401 - the model class comes from the checkpoint's config
    from ascent.trainer.checkpoint import Checkpointer, verify_folder

    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rl_steps = [r["step"] for r in rows if r["phase"] == "rl"]
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()]
    sample_steps = sorted({s["step"] for s in samples})
    per_step = {s: sum(1 for x in samples if x["step"] == s) for s in sample_steps}
    latest = Checkpointer(run_dir / "checkpoints").latest()
    problem = verify_folder(latest) if latest else "no checkpoint"
    loaded = False
    if latest is not None and problem is None:
        from transformers import AutoModelForCausalLM

        AutoModelForCausalLM.from_pretrained(latest)
        loaded = True
    cfg = load_config(str(run_dir / "config.yaml"))
    want_samples = cfg.train.prompts_per_step * cfg.rollout.samples_per_prompt
    checks = {
        "summary_steps": summary.get("steps") == steps,
        "metrics_each_rl_step_once": rl_steps == list(range(1, steps + 1)),
        "samples_each_logged_step_once": sample_steps == list(range(2, steps + 1, 2))
        and all(n == want_samples for n in per_step.values()),
        "checkpoint_whole_and_loads": problem is None and loaded and latest.name == f"step_{steps:06d}",
    }
    return {"checks": checks, "latest": str(latest), "rl_lines": len(rl_steps)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runtime", choices=["local", "ray"], default="local")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--steps", type=int, default=60, help="RL steps of the drilled run")
    p.add_argument("--min-delay", type=float, default=1.0)
    p.add_argument("--max-delay", type=float, default=0.0, help="0: 8 s local, 25 s ray")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="parent of the run directory (default: a temp dir)")
    args = p.parse_args()
    max_delay = args.max_delay or (8.0 if args.runtime == "local" else 25.0)
    rng = random.Random(args.seed)
    parent = args.out or Path(tempfile.mkdtemp(prefix="ascent-drill-"))
    run_dir = parent / f"drill-{args.runtime}"
    overrides = RUN + [
        f"train.steps={args.steps}",
        f"runtime={args.runtime}",
        f"output_dir={parent}",
        f"name={run_dir.name}",
    ]
    if args.runtime == "ray":
        overrides += [
            "ray.rollout_workers=1",
            "ray.num_cpus_per_worker=0.5",
            "ray.max_staleness=1",
            "algorithm.tis_cap=2.0",
        ]
    first = [sys.executable, "-m", "ascent.cli", "train", "default", *overrides, "--overwrite"]
    resume = [sys.executable, "-m", "ascent.cli", "train", "--resume", str(run_dir)]
    t_start = time.time()
    kills, log_path = 0, parent / f"drill-{args.runtime}.log"
    with open(log_path, "a") as log:
        proc = start(first, log)
        while True:
            delay = rng.uniform(args.min_delay, max_delay)
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                if kills < args.kills:
                    at = where(run_dir)
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    print(json.dumps({"kill": kills, "after_s": round(delay, 2), **at}), flush=True)
                    proc = start(resume, log)
                continue
            if proc.returncode != 0:
                print(json.dumps({"error": f"the run exited with {proc.returncode}; see {log_path}"}), flush=True)
                if kills < args.kills or not (run_dir / "summary.json").exists():
                    proc = start(resume, log)  # a crash that is not ours would show up here
                    continue
            if kills >= args.kills:
                break
            # finished before enough kills: the drill needs a longer run
            print(json.dumps({"error": f"the run finished after {kills} kills; use more --steps"}), flush=True)
            break
    time.sleep(2.0)
    result = check(run_dir, args.steps)
    left = leftovers(str(run_dir)) + (ray_leftovers(t_start) if args.runtime == "ray" else [])
    result["checks"]["no_processes_left"] = not left
    verdict = {
        "runtime": args.runtime,
        "kills": kills,
        "steps": args.steps,
        "passed": all(result["checks"].values()) and kills == args.kills,
        **result,
        "leftovers": left[:10],
        "wall_s": round(time.time() - t_start, 1),
        "run_dir": str(run_dir),
    }
    print(json.dumps(verdict), flush=True)
    sys.exit(0 if verdict["passed"] else 1)


if __name__ == "__main__":
    main()
