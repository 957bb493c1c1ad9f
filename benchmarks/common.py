"""Shared pieces of the benchmarks: the benchmark models, prompts, the machine's matmul ceiling, load."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer

# name -> (hidden, layers, heads, intermediate); Qwen2 architecture, the 17-token character vocabulary
SCRATCH_MODELS = {"3.17M": (256, 4, 4, 688), "25M": (512, 8, 8, 1376)}


def scratch_policy(name: str, seed: int = 0) -> Policy:
    """A randomly initialised benchmark model with the addition task's tokenizer."""
    hidden, layers, heads, inter = SCRATCH_MODELS[name]
    tok = char_tokenizer("0123456789+= ")
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return Policy(Qwen2ForCausalLM(cfg).eval(), tok)


def smollm2_policy() -> Policy:
    from ascent.policy.model import load_hf
    from ascent.policy.pretrained import smollm2_path

    policy = load_hf(smollm2_path())
    policy.model.eval()
    return policy


def addition_prompts(n: int, seed: int = 0) -> list[str]:
    import random

    rng = random.Random(seed)
    return [f"{rng.randrange(10, 100)}+{rng.randrange(10, 100)}=" for _ in range(n)]


def matmul_gflops(size: int = 2048, repeats: int = 5, device: str = "cpu", dtype: torch.dtype = torch.float32) -> float:
    """Measured matmul throughput of this machine (the roofline's ceiling), GFLOP/s (fp32 on the CPU by
    default; on a GPU, size it up: a 2048 matmul is over in microseconds)."""
    a, b = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    a @ b
    sync()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - t)
    return 2 * size**3 / statistics.median(times) / 1e9


def load() -> str:
    """The 1/5/15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> dict[str, object]:
    """CPU model, ISA features, threads, load, versions: what every benchmark prints with its figures."""
    from ascent.kernels.machine import describe

    return describe()


def print_machine() -> None:
    """One line on stderr naming the machine (CPU, ISA features, threads, load, torch)."""
    import sys

    from ascent.kernels.machine import describe_line

    print(f"machine: {describe_line()}", file=sys.stderr, flush=True)


def params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def out_dir() -> Path:
    path = Path(__file__).resolve().parent / "results"
    path.mkdir(exist_ok=True)
    return path


T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
"""Student's t 0.975 quantile by degrees of freedom (1.96 beyond the table)."""


def ci95(xs: list[float], digits: int = 4) -> list[float]:
    """The 95% t-interval of the mean of `xs`, rounded to `digits` ([mean, mean] for a single value).

    >>> ci95([1.0, 2.0, 3.0])
    [-0.4843, 4.4843]
    """
    m = statistics.mean(xs)
    if len(xs) < 2:
        return [round(m, digits), round(m, digits)]
    h = T95.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / len(xs) ** 0.5
    return [round(m - h, digits), round(m + h, digits)]


def paired_summary(
    rows: list[dict], keys: tuple[str, ...], arm: str, control: str, shown: tuple[str, ...] = ()
) -> dict[str, dict]:
    """Per metric `key`: the mean over `rows` of each arm in `shown` (default: control, arm), then the paired
    difference arm - control (mean, sd, 95% t-interval). Each row holds `{arm_name: {key: value}}`.

    >>> rows = [{"a": {"x": 1.0}, "b": {"x": 2.0}}, {"a": {"x": 1.0}, "b": {"x": 4.0}}]
    >>> paired_summary(rows, ("x",), arm="b", control="a")["x"]["diff_mean"]
    2.0
    """
    out = {}
    for key in keys:
        diffs = [r[arm][key] - r[control][key] for r in rows]
        out[key] = {name: round(statistics.mean(r[name][key] for r in rows), 4) for name in shown or (control, arm)}
        out[key] |= {
            "diff_mean": round(statistics.mean(diffs), 4),
            "diff_sd": round(statistics.stdev(diffs), 4) if len(diffs) > 1 else 0.0,
            "ci95": ci95(diffs),
        }
    return out


def frozen_agent(recipe: str, warmstart: str | Path):
    """An agent recipe's policy loaded from a warm start and frozen, with its task, engine and agent loop, one
    torch thread: (cfg, task, policy, engine, loop), for benchmarks that compare agents around a fixed policy."""
    from ascent.app.pipeline import agent_loop, new_policy
    from ascent.config.loader import load_config
    from ascent.rollout import make_engine
    from ascent.tasks.base import load_task
    from ascent.trainer.checkpoint import load_weights

    cfg = load_config(recipe, ["threads=1"])
    task = load_task(cfg.data, cfg.seed)
    policy = new_policy(cfg, task)
    load_weights(policy.model, Path(warmstart))
    policy.model.eval()
    return cfg, task, policy, make_engine(cfg.rollout, precision="model"), agent_loop(cfg)
