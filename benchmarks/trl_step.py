"""TRL's side of `step_vs_trl.py`: time GRPOTrainer steps on the benchmark workload; print JSON.

Runs inside TRL's own virtual environment (`step_vs_trl.py` creates it and calls this script); it needs
torch, transformers, datasets and trl, never ascent. The reward (`digit_fraction`) is imported from
`step_vs_trl.py`, whose top-level imports are standard library only.

Per-step wall time is measured by a `TrainerCallback` from `on_step_begin` to `on_step_end` (generation,
rewards, advantages, forward/backward and the optimizer step all happen in between; logging does not).
The generation and reward phases are timed by wrapping the trainer's `_generate`, `_calculate_rewards`
and `_generate_and_score_completions` methods; `update` is the rest of the step (loss, backward, AdamW).

EOS must not end a completion: `generation_kwargs={"min_new_tokens": N}` makes `model.generate` mask the
EOS logit until N tokens are out, so every completion is exactly max_completion_length = N tokens long.
The lengths are checked from each batch's completion mask and reported.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from functools import wraps
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_vs_trl import digit_fraction  # noqa: E402  (shared reward; stdlib-only module)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--model", type=Path, required=True, help="HF model folder (model + tokenizer)")
    p.add_argument("--data", type=Path, required=True, help="JSONL of rows with a `prompt` field")
    p.add_argument("--steps", type=int, default=5, help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--samples", type=int, default=8, help="completions per prompt (num_generations)")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per completion (exactly)")
    p.add_argument("--lr", type=float, default=1e-5, help="AdamW learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument(
        "--micro", type=int, default=0, help="rows per forward/backward (gradient accumulation); 0: all at once"
    )
    p.add_argument("--lora", action="store_true", help="LoRA r=16, alpha 32, no dropout, all projections (peft)")
    p.add_argument("--chat", action="store_true", help="conversational prompts: TRL applies the chat template")
    p.add_argument("--bf16", action="store_true", help="GRPOConfig(bf16=True): autocast on the CPU")
    p.add_argument(
        "--lockstep",
        action="store_true",
        help='before each step print {"event": "ready"} and wait for a line on stdin; '
        'after it print {"event": "step", ...}',
    )
    return p.parse_args()


class PhaseClock:
    """Accumulates seconds per named phase within the current step; `snapshot` closes the step."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self.lengths: list[int] = []
        self.reward_std: list[float] = []

    def wrap(self, name: str, fn: Callable, observe: Callable[[Any], None] | None = None) -> Callable:
        """`fn`, timed into phase `name`; `observe(result)` runs after the clock stops."""

        @wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            self.current[name] = self.current.get(name, 0.0) + time.perf_counter() - t0
            if observe is not None:
                observe(result)
            return result

        return timed

    def snapshot(self) -> dict[str, float]:
        out, self.current = self.current, {}
        return out


def make_step_callback(clock: PhaseClock, lockstep: bool = False):
    """A TrainerCallback recording each optimizer step's wall time and phase times. With `lockstep`, each
    step waits for a go-ahead line on stdin (after announcing it is ready) and reports itself when done, so
    that `step_vs_trl.py` can alternate TRL's steps with ascent's and never run the two at once."""
    import torch
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[dict[str, float]] = []
            self.threads = 0
            self._t0 = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            if lockstep:
                print(json.dumps({"event": "ready"}), flush=True)
                if not sys.stdin.readline():
                    raise SystemExit("step_vs_trl.py closed the lockstep pipe")
            clock.snapshot()
            self.threads = torch.get_num_threads()
            self._faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            wall = time.perf_counter() - self._t0
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self._faults
            self.steps.append({"wall": wall, "minor_faults": faults, **clock.snapshot()})
            if lockstep:
                print(json.dumps({"event": "step", **self.steps[-1]}), flush=True)

    return StepTimer()


def instrument(trainer, clock: PhaseClock) -> None:
    """Time generation and rewards; record every batch's completion lengths and reward spread."""
    trainer._generate = clock.wrap("rollout", trainer._generate)
    trainer._calculate_rewards = clock.wrap(
        "reward", trainer._calculate_rewards, lambda r: clock.reward_std.append(round(float(r.std()), 4))
    )
    trainer._generate_and_score_completions = clock.wrap(
        "prepare",
        trainer._generate_and_score_completions,
        lambda out: clock.lengths.extend(out["completion_mask"].sum(-1).tolist()),
    )


def grpo_config(args: argparse.Namespace, n_prompts: int, out_dir: str):
    """The GRPOConfig of the workload: one optimizer step per generation batch of all completions, CPU fp32.
    With `--micro`, the batch's forward/backward runs in micro-batches of that many rows with gradient
    accumulation (TRL generates the whole batch once, `steps_per_generation` = the accumulation steps)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out_dir,
        use_cpu=True,
        bf16=args.bf16,
        fp16=False,
        gradient_checkpointing=False,
        per_device_train_batch_size=args.micro or n_prompts * args.samples,
        gradient_accumulation_steps=(n_prompts * args.samples) // (args.micro or n_prompts * args.samples),
        num_generations=args.samples,
        max_completion_length=args.tokens,
        generation_kwargs={"min_new_tokens": args.tokens},
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        num_iterations=1,
        use_vllm=False,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        optim="adamw_torch",
        max_grad_norm=1.0,
        max_steps=args.warmup + args.steps,
        seed=args.seed,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
    )


def build_trainer(args: argparse.Namespace, out_dir: str):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    hf_logging.disable_progress_bar()

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if args.chat:  # conversational rows: TRL applies the tokenizer's chat template with a generation prompt
        dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in rows])
    else:
        dataset = Dataset.from_list([{"prompt": r["prompt"]} for r in rows])
    peft_config = None
    if args.lora:
        from peft import LoraConfig
        from step_vs_trl import LORA_TARGETS

        peft_config = LoraConfig(
            r=16, lora_alpha=32, lora_dropout=0.0, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"
        )
    return GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=grpo_config(args, len(rows), out_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def reward(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    """`digit_fraction` on the completion text (a conversational completion is a list of messages)."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return digit_fraction(prompts, texts, **kwargs)


def main() -> None:
    args = parse_args()
    import torch
    import transformers
    import trl

    if args.threads:
        torch.set_num_threads(args.threads)
    clock = PhaseClock()
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as out_dir:
        trainer = build_trainer(args, out_dir)
        instrument(trainer, clock)
        timer = make_step_callback(clock, args.lockstep)
        trainer.add_callback(timer)
        trainer.train()
    timed = timer.steps[args.warmup :]
    phases = {k: statistics.median(s.get(k, 0.0) for s in timed) for k in ("rollout", "reward", "prepare")}
    phases["update"] = statistics.median(s["wall"] - s.get("prepare", 0.0) for s in timed)
    phases["prepare_other"] = phases.pop("prepare") - phases["rollout"] - phases["reward"]
    print(
        json.dumps(
            {
                "step_s": [s["wall"] for s in timed],
                "warmup_s": [round(s["wall"], 4) for s in timer.steps[: args.warmup]],
                "phases": {k: round(v, 4) for k, v in phases.items()},
                "minor_faults_per_step": statistics.median(s["minor_faults"] for s in timed),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "completion_len_min": min(clock.lengths),
                "completion_len_max": max(clock.lengths),
                "completions_per_step": len(clock.lengths) // max(1, len(timer.steps)),
                "reward_std": clock.reward_std,
                "threads": timer.threads,
                "versions": {
                    "trl": trl.__version__,
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
