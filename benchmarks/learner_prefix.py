"""The learner's shared-prefix forward against the plain per-row forward, in one process, on the same batch.

`train.shared_prefix=true` (the default) runs each distinct prompt of a micro-batch once and reuses its KV
cache for the group's completions (Prefix Grouper); `false` forwards every row's prompt again. This script
collects one rollout batch, then times `Learner.update` on it alternately with the two settings (ABBA
order, so the machine's drift hits both alike) and prints, per workload, one JSON line with the medians and
the median of the paired ratios:

    3.17M    `step_vs_trl.py`'s workload: 16 prompts x 8 samples, 7-token prompts, 64-token completions,
             one micro-batch of 128 rows, full fine-tuning
    smollm2  the `smollm2-gsm` recipe: SmolLM2-135M-Instruct + LoRA, chat-templated prompts (~40-50
             tokens), 4 prompts x 4 samples, completions up to 32 tokens, micro-batches of 8 rows

    .venv/bin/python benchmarks/learner_prefix.py [--workloads 3.17M,smollm2] [--repeats 4]

The parameters change a little at every update (one optimizer step each); the batch is fixed, so both
settings do the same work at every repeat.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_vs_trl as svt  # noqa: E402  (the 3.17M workload)


def trainer_for(name: str, tmp: Path, cache: Path):
    from ascent.config import load_config

    if name == "smollm2":
        cfg = load_config("smollm2-gsm", ["train.checkpoint_every=0", "logging.progress=false", f"output_dir={tmp}"])
    else:
        args = svt.parse_args(["--cache", str(cache)])
        folder, _ = svt.build_model_folder(svt.ModelSpec(), args.cache)
        data = svt.write_jsonl(svt.make_rows(args.prompts, args.seed), tmp / "prompts.jsonl")
        sys.path.insert(0, str(svt.HELPER.parent))  # the reward `step_vs_trl:digit_fraction`
        cfg = load_config("default", svt.ascent_overrides(args, folder, data))
    return svt.ascent_trainer(cfg, tmp / "run")[1], cfg


def bench(name: str, repeats: int, cache: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-prefix-") as tmp:
        trainer, cfg = trainer_for(name, Path(tmp), cache)
        batch, scores, _ = trainer.collect()
        adv = trainer.advantages(batch, scores)
        learner = trainer.learner
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(repeats + 1):  # the first round warms both paths up
            for shared in (True, False) if i % 2 == 0 else (False, True):
                learner.shared_prefix = shared
                t = time.perf_counter()
                learner.update(batch, adv, scores.valid, rewards=scores.rewards)
                if i:
                    times[shared].append(time.perf_counter() - t)
        prompt = batch.completion_mask.argmax(-1).float()
        return {
            "workload": name,
            "rows": len(batch),
            "micro_batch_size": cfg.train.micro_batch_size,
            "prompt_len_mean": round(float(prompt.mean()), 1),
            "completion_len_mean": round(float(batch.completion_mask.sum(-1).mean()), 1),
            "shared_update_s": round(statistics.median(times[True]), 4),
            "plain_update_s": round(statistics.median(times[False]), 4),
            "ratio_paired": round(statistics.median(a / b for a, b in zip(times[True], times[False])), 4),
            "repeats": repeats,
            "load": svt.load_average(),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="3.17M,smollm2", help="comma-separated: 3.17M, smollm2")
    p.add_argument("--repeats", type=int, default=4, help="timed updates per setting")
    p.add_argument("--cache", type=Path, default=svt.ROOT / ".cache", help="where the 3.17M model folder is cached")
    args = p.parse_args()
    svt.log(f"load before: {svt.load_average()}")
    svt.log("machine: " + svt.machine_line())
    for name in args.workloads.split(","):
        print(json.dumps(bench(name, args.repeats, args.cache)), flush=True)


if __name__ == "__main__":
    main()
