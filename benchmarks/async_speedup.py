"""Synchronous (runtime=local) vs asynchronous (runtime=ray, K = 1, 2) RL under slow, variable-latency rewards.

Workload: prompts "i+j=" (i, j < 20; 100 held out), reward 1 when the completion starts with "7" (the
tests' seven task); the training reward also sleeps a random 0-`--max-sleep` s PER SAMPLE, one sample
after another, as a code-execution verifier would. Completions end at EOS (at most `--max-new-tokens`), so
lengths vary. Every run has the same seed, model, steps and batch; only the runtime and K differ.

Throughput is steady-state: samples of steps 2..N over the time from the end of step 1 to the end of step N
(step 1 carries Ray's and the workers' start-up, reported apart as `startup_s`). Held-out accuracy is greedy
(plus pass@1 over 8 samples at temperature 1), scored with the plain (non-sleeping) reward. The sleeps change
timings only: every run's trajectory is fixed by its seed (the async schedule does not depend on timing), so
`--max-sleep 0` gives the same accuracies in seconds (a cheap check over more seeds).

    python benchmarks/async_speedup.py                 # sync, K=1, K=2; prints one JSON object
    python benchmarks/async_speedup.py --ks 1 --steps 10
    # each K with rollout workers scoring, then 3 reward workers:
    python benchmarks/async_speedup.py --ks 2 --reward-workers 0,3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import zlib
from pathlib import Path

from ascent.kernels.machine import describe

HERE = Path(__file__).resolve()


def seven(prompts, completions, **fields):
    """1 when the completion starts with "7"."""
    return [1.0 if c.startswith("7") else 0.0 for c in completions]


def sleepy_seven(prompts, completions, **fields):
    """`seven`, after sleeping U(0, ASYNC_BENCH_MAX_SLEEP) s per sample, one after another (seeded by the text)."""
    top = float(os.environ.get("ASYNC_BENCH_MAX_SLEEP", "0.2"))
    for p, c in zip(prompts, completions):
        time.sleep(random.Random(zlib.crc32(f"{p}|{c}".encode())).uniform(0.0, top))
    return seven(prompts, completions)


def write_task(folder: Path) -> list[str]:
    rows = [{"prompt": f"{i}+{j}=", "answer": "7"} for i in range(20) for j in range(20)]
    random.Random(0).shuffle(rows)
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[100:]))
    (folder / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:100]))
    return [f"data.train={folder}/train.jsonl", f"data.eval={folder}/eval.jsonl", f"output_dir={folder}"]


def one_run(args, task: list[str], runtime: list[str]) -> dict:
    """Train with `runtime` overrides; throughput, timings, final held-out accuracy."""
    from ascent.app.pipeline import prepare
    from ascent.config import load_config
    from ascent.rewards.runner import RewardRunner
    from ascent.rollout import make_engine
    from ascent.runtime import make_trainer
    from ascent.trainer.evaluate import Evaluator
    from ascent.trainer.rl import RLParts

    model = [
        "model.hidden_size=64",
        "model.num_layers=2",
        "model.num_heads=2",
        "model.num_kv_heads=1",
        "model.intermediate_size=128",
    ]
    common = [
        "warmstart.steps=0",
        "control.enabled=false",
        "logging.progress=false",
        "train.eval_every=0",
        "threads=1",
        f"seed={args.seed}",
        f"train.steps={args.steps}",
        f"train.prompts_per_step={args.prompts}",
        f"rollout.samples_per_prompt={args.samples}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"train.optim.lr={args.lr}",
        "algorithm.tis_cap=2.0",
        f"reward={HERE}:sleepy_seven",
    ]
    cfg = load_config("default", model + common + task + runtime)
    run, policy = prepare(cfg, Path(cfg.output_dir) / "bench", {})
    parts = RLParts(policy, run.task.train, run.encoder, make_engine(cfg.rollout.backend), run.rewards, run.settings)
    trainer = make_trainer(cfg, parts)
    ends, metrics = [], []
    t0 = time.perf_counter()
    trainer.fit(lambda step, m: (ends.append(time.perf_counter()), metrics.append(m)))
    samples = args.prompts * args.samples
    steady = (len(ends) - 1) * samples / (ends[-1] - ends[0])
    evaluator = Evaluator(
        run.task.eval, run.encoder, make_engine("ascent"), RewardRunner([f"{HERE}:seven"]), run.settings, 1.0, 512
    )
    heldout = evaluator(policy, 8, 1.0, cfg.seed)  # greedy accuracy; pass@1 over 8 samples per prompt at temperature 1
    mean = lambda key: sum(m.get(key, 0.0) for m in metrics[1:]) / max(1, len(metrics) - 1)  # noqa: E731
    return {
        "runtime": cfg.runtime,
        "max_staleness": cfg.ray.max_staleness if cfg.runtime == "ray" else None,
        "rollout_workers": cfg.ray.rollout_workers if cfg.runtime == "ray" else None,
        "reward_workers": cfg.ray.reward_workers if cfg.runtime == "ray" else None,
        "samples_per_s": round(steady, 2),
        "startup_s": round(ends[0] - t0, 2),
        "wall_s": round(ends[-1] - t0, 2),
        "final_heldout_accuracy": heldout["accuracy"],
        "final_heldout_pass@1": round(heldout["pass@1"], 4),
        "reward_last5": round(sum(m["reward/mean"] for m in metrics[-5:]) / 5, 3),
        "learner_wait_s_mean": round(mean("time/rollout"), 3),
        "update_s_mean": round(mean("time/update"), 3),
        "worker_reward_s_mean": round(mean("async/worker_reward_s"), 3),
        "staleness_mean": round(mean("async/staleness_mean"), 3),
        "tis_weight_mean": round(mean("async/tis_weight_mean"), 4) if cfg.runtime == "ray" else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--prompts", type=int, default=6, help="prompts per step")
    p.add_argument("--samples", type=int, default=4, help="samples per prompt")
    p.add_argument("--max-new-tokens", type=int, default=12)
    p.add_argument("--lr", type=float, default=3e-2)
    p.add_argument("--max-sleep", type=float, default=0.2, help="the reward sleeps U(0, this) seconds per sample")
    p.add_argument("--ks", default="1,2", help="max_staleness values of the async runs (K + 1 workers each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reward-workers", default="0", help="ray.reward_workers values of each async run (0: rollout workers score)"
    )
    p.add_argument("--rollout-workers", type=int, default=0, help="rollout workers of the async runs (0: K + 1)")
    args = p.parse_args()
    os.environ["ASYNC_BENCH_MAX_SLEEP"] = str(
        args.max_sleep
    )  # read by the reward, in the workers too (Ray copies the driver's environment)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        task = write_task(Path(tmp))
        runs = [one_run(args, task, [])]
        for k in [int(k) for k in args.ks.split(",") if k]:
            for m in [int(m) for m in args.reward_workers.split(",") if m]:
                workers = args.rollout_workers or k + 1
                cpus = min(
                    0.5, (os.cpu_count() or 1) / (workers + m)
                )  # logical reservations that fit the local Ray instance
                runs.append(
                    one_run(
                        args,
                        task,
                        [
                            "runtime=ray",
                            f"ray.max_staleness={k}",
                            f"ray.rollout_workers={workers}",
                            f"ray.reward_workers={m}",
                            f"ray.num_cpus_per_worker={cpus}",
                        ],
                    )
                )
                load.append(os.getloadavg()[0])
    sync = runs[0]
    out = {
        "sync_samples_per_s": sync["samples_per_s"],
        "sync_final_heldout_accuracy": sync["final_heldout_accuracy"],
        "sync_final_heldout_pass@1": sync["final_heldout_pass@1"],
        "machine": describe(),
    }
    for r in runs[1:]:
        k = f"k{r['max_staleness']}" + (f"_rw{r['reward_workers']}" if r["reward_workers"] else "")
        out[f"async_samples_per_s_{k}"] = r["samples_per_s"]
        out[f"speedup_async_vs_sync_{k}"] = round(r["samples_per_s"] / sync["samples_per_s"], 3)
        out[f"async_final_heldout_accuracy_{k}"] = r["final_heldout_accuracy"]
        out[f"async_final_heldout_pass@1_{k}"] = r["final_heldout_pass@1"]
    if len(runs) > 1:
        best = max(runs[1:], key=lambda r: r["samples_per_s"])
        out.update(
            async_samples_per_s=best["samples_per_s"],
            speedup_async_vs_sync=round(best["samples_per_s"] / sync["samples_per_s"], 3),
            async_best_k=best["max_staleness"],
        )
    out.update(settings=vars(args), load_1min=[round(x, 2) for x in load], runs=runs)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
