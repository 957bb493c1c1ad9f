"""Where one ascent GRPO step spends its time, per rollout configuration, in one process.

The workload is `step_vs_trl.py`'s (3.17M Qwen2, 16 prompts x 8 samples x 64 tokens, beta 0, one AdamW
step per batch on all 128 sequences, fp32 learner). Each configuration runs `--warmup` untimed and `--steps`
timed `RLTrainer.step()` calls. Configurations: `hf` (HF generate and a plain per-row learner forward:
TRL's scheme), `ascent-plain` (ascent's decoder in one batch, plain learner forward), `ascent` (the
defaults: sharded CPU decoding, `rollout.shards=0`, and the shared-prefix learner forward,
`train.shared_prefix=true`), `ascent-bf16` (the same with bf16 rollouts). The script splits the step into

    rollout     the engine's generate (hf: `model.generate`; ascent: its decoder, fp32 or bf16 matrices)
    reward+adv  rewards, advantages and batch assembly (the step minus rollout and update)
    forward     the learner's forward + loss over the batch (with grad; shared prefix: prompts once per group)
    backward    loss.backward()
    optimizer   gradient clipping + AdamW step
    recompute   what a separate no-grad log-prob pass over the batch costs: ascent skips it when there is
                one optimizer step per batch (the old log-probs are the forward's own, detached); shown
                so the saving is visible, not added to the step

and prints one JSON line per configuration (medians over the timed steps) and a table. The timing hooks
wrap `Learner.micro_loss`, `loss.backward` (through the loss tensor) and `clip_and_step`; they add no work.

    .venv/bin/python benchmarks/step_profile.py [--configs hf,ascent-plain,ascent,ascent-bf16] [--steps 3]
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
import step_vs_trl as base  # noqa: E402  (the workload: model folder, rows, ascent overrides)

CONFIGS = {  # name -> rollout.backend, rollout.precision, train.shared_prefix, rollout.shards
    "hf": ("hf", "model", "off", 1),  # HF generate, a plain per-row learner forward: TRL's scheme
    "ascent-plain": ("ascent", "model", "off", 1),  # ascent's decoder in one batch, plain learner forward
    "ascent": ("ascent", "model", "on", 0),  # the defaults: sharded decoding, shared-prefix learner forward
    "ascent-bf16": ("ascent", "bfloat16", "on", 0),
}


def profile(name: str, args: argparse.Namespace, folder: Path, data: Path) -> dict:
    import torch

    import ascent.rollout.decoder as decoder_mod
    import ascent.trainer.learner as learner_mod
    from ascent.config import load_config

    backend, precision, shared_prefix, shards = CONFIGS[name]
    wargs = argparse.Namespace(
        **{**vars(args), "backend": backend, "precision": precision, "shared_prefix": shared_prefix, "shards": shards}
    )
    cfg = load_config("default", base.ascent_overrides(wargs, folder, data))
    clock: dict[str, float] = {}

    def add(key: str, dt: float) -> None:
        clock[key] = clock.get(key, 0.0) + dt

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as run_dir:
        run, trainer = base.ascent_trainer(cfg, Path(run_dir))
        policy = trainer.learner.policy
        learner = trainer.learner
        micro_loss, clip_and_step, update = learner.micro_loss, learner_mod.clip_and_step, learner.update
        linear_weight = decoder_mod.linear_weight
        captured = {}

        def timed_micro_loss(*a, **k):
            t = time.perf_counter()
            loss, metrics, mismatch = micro_loss(*a, **k)
            add("forward", time.perf_counter() - t)

            def backward(*ba, **bk):
                t0 = time.perf_counter()
                torch.Tensor.backward(loss, *ba, **bk)
                add("backward", time.perf_counter() - t0)

            loss.backward = backward  # instance attribute: the learner calls loss.backward()
            return loss, metrics, mismatch

        def timed_clip_and_step(*a, **k):
            t = time.perf_counter()
            out = clip_and_step(*a, **k)
            add("optimizer", time.perf_counter() - t)
            return out

        def capturing_update(batch, *a, **k):
            captured["batch"] = batch
            return update(batch, *a, **k)

        def timed_linear_weight(*a, **k):
            t = time.perf_counter()
            out = linear_weight(*a, **k)
            add("lora_merge", time.perf_counter() - t)
            return out

        learner.micro_loss, learner.update = timed_micro_loss, capturing_update
        learner_mod.clip_and_step = timed_clip_and_step
        decoder_mod.linear_weight = timed_linear_weight
        try:
            rows = []
            for i in range(args.warmup + args.steps):
                clock.clear()
                t0 = time.perf_counter()
                m = trainer.step()
                wall = time.perf_counter() - t0
                if i >= args.warmup:
                    t = time.perf_counter()
                    learner.logprobs(policy.model, captured["batch"])
                    recompute = time.perf_counter() - t
                    fwd, bwd, opt = clock.get("forward", 0.0), clock.get("backward", 0.0), clock.get("optimizer", 0.0)
                    rows.append(
                        {
                            "step": wall,
                            "rollout": m["time/rollout"],  # includes lora_merge
                            "lora_merge": clock.get("lora_merge", 0.0),
                            "reward+adv": wall - m["time/rollout"] - m["time/update"],
                            "forward": fwd,
                            "backward": bwd,
                            "optimizer": opt,
                            "update_other": m["time/update"] - fwd - bwd - opt,
                            "recompute": recompute,
                            "mismatch": m["rollout/logprob_mismatch"],
                        }
                    )
        finally:
            learner_mod.clip_and_step = clip_and_step
            decoder_mod.linear_weight = linear_weight
        run.logger.close()
    med = {k: round(statistics.median(r[k] for r in rows), 4 if k != "mismatch" else 8) for k in rows[0]}
    return {
        "config": name,
        "backend": backend,
        "precision": precision,
        "shared_prefix": shared_prefix,
        "shards": shards,
        **med,
        "steps": args.steps,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--configs", default="hf,ascent-plain,ascent,ascent-bf16", help=f"comma-separated of {', '.join(CONFIGS)}"
    )
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--model", choices=["scratch", "smollm2"], default="scratch", help="as in step_vs_trl.py")
    p.add_argument("--lora", action="store_true", help="LoRA r=16 on all projections (else full fine-tuning)")
    p.add_argument("--micro", type=int, default=0, help="train.micro_batch_size (0: the whole batch)")
    p.add_argument("--prompts", type=int, default=0, help="0: 16 scratch, 8 smollm2")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=base.ROOT / ".cache")
    args = p.parse_args()
    args.prompts = args.prompts or (8 if args.model == "smollm2" else 16)
    args.bf16 = False
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    base.log(f"load before: {base.load_average()}")
    base.log("machine: " + base.machine_line())
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.model == "smollm2":
        folder, n_params = base.smollm2_folder()
    else:
        folder, n_params = base.build_model_folder(base.ModelSpec(seed=args.seed), args.cache)
    with tempfile.TemporaryDirectory(prefix="bench-profile-data-") as tmp:
        rows = base.make_rows(args.prompts, args.seed, args.model == "smollm2")
        data = base.write_jsonl(rows, Path(tmp) / "prompts.jsonl")
        sys.path.insert(0, str(base.HELPER.parent))  # the reward `step_vs_trl:digit_fraction`
        results = []
        for name in args.configs.split(","):
            res = profile(name, args, folder, data)
            results.append(res)
            print(json.dumps({**res, "params": n_params, "load": base.load_average()}), flush=True)
    cols = ["step", "rollout", "lora_merge", "reward+adv", "forward", "backward", "optimizer", "update_other"]
    cols.append("recompute")
    print(f"{'config':12} " + " ".join(f"{c:>12}" for c in cols) + f" {'mismatch':>10}")
    for r in results:
        print(f"{r['config']:12} " + " ".join(f"{r[c]:12.3f}" for c in cols) + f" {r['mismatch']:10.2e}")
    base.log(f"load after: {base.load_average()}")


if __name__ == "__main__":
    main()
