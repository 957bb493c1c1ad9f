"""Disk-full drill: a run on a filesystem that fills up while it checkpoints, then resumed once there is room.

    sudo python benchmarks/disk_full_drill.py      # needs root: it mounts a small tmpfs

A tmpfs of --size KiB is mounted and a small run of the default task writes its run directory there with a
checkpoint every step, until the disk is full. Then it checks what the user got — a one-line error naming the
checkpoint that is still whole, not a traceback deep in torch — and that this checkpoint passes its manifest
check. The tmpfs is then remounted bigger and the run resumed; it must finish with every RL step logged once.
Prints one JSON verdict; exit status 0 when every check passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fault_drill import RUN  # noqa: E402


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1000, help="KiB of the tmpfs the run fills (a checkpoint is ~300)")
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    if os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root to mount a tmpfs"}))
        sys.exit(0)
    mnt = Path(tempfile.mkdtemp(prefix="ascent-diskfull-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size}k", "tmpfs", str(mnt)], check=True)
    try:
        run_dir = mnt / "drill"
        cmd = [sys.executable, "-m", "ascent.cli", "train", "default", *RUN, f"train.steps={args.steps}"]
        cmd += [f"output_dir={mnt}", "name=drill", "train.keep_checkpoints=2"]
        first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        err = [x for x in first.stderr.strip().splitlines() if x.strip()]
        from ascent.trainer.checkpoint import Checkpointer, verify_folder

        kept = Checkpointer(run_dir / "checkpoints").latest()
        checks = {
            "failed_with_exit_2": first.returncode == 2,
            "one_line_message": bool(err)
            and err[-1].startswith("ascent: error:")
            and "no space left" in err[-1].lower(),
            "names_the_intact_checkpoint": bool(err) and kept is not None and kept.name in err[-1],
            "kept_checkpoint_whole": kept is not None and verify_folder(kept) is None,
            "no_half_written_folder": not any(x.name.startswith(".tmp-") for x in (run_dir / "checkpoints").iterdir()),
        }
        stopped_at = int(kept.name.split("_")[1]) if kept else 0
        subprocess.run(["mount", "-o", "remount,size=262144k", str(mnt)], check=True)
        second = subprocess.run(
            [sys.executable, "-m", "ascent.cli", "train", "--resume", str(run_dir)], cwd=ROOT, capture_output=True
        )
        rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        rl = [r["step"] for r in rows if r["phase"] == "rl"]
        checks["resumed_to_the_end"] = second.returncode == 0 and rl == list(range(1, args.steps + 1))
        verdict = {
            "passed": all(checks.values()),
            "checks": checks,
            "message": err[-1] if err else None,
            "disk_full_at_step": stopped_at,
            "tmpfs_kib": args.size,
        }
        print(json.dumps(verdict))
        sys.exit(0 if verdict["passed"] else 1)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


if __name__ == "__main__":
    main()
