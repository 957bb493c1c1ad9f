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


def trained_policy(run_dir: str | Path, prompts: int, seed: int = 0):
    """A run's policy as RL samples from it, for benchmarks of rollouts: the run's config, task and model, the
    weights of its latest RL checkpoint, else its warm start (`warmstart/`, else the newest whole checkpoint of
    a warm start still under way), and `prompts` of its training prompts (drawn with `seed`) encoded as the
    run encodes them. Returns (policy, prompt ids, the run's name, the weights' folder)."""
    import random

    from ascent.app.pipeline import new_policy
    from ascent.config.loader import load_config
    from ascent.data.prompts import PromptEncoder
    from ascent.tasks.base import load_task
    from ascent.trainer.checkpoint import Checkpointer, load_weights

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise SystemExit(f"--checkpoint {run_dir}: not a run directory (no config.yaml)")
    cfg = load_config(run_dir / "config.yaml")
    task = load_task(cfg.data, cfg.seed)
    policy = new_policy(cfg, task)
    weights = Checkpointer(run_dir / "checkpoints").latest() if (run_dir / "checkpoints").is_dir() else None
    if weights is None and (run_dir / "warmstart" / "model.safetensors").is_file():
        weights = run_dir / "warmstart"
    if weights is None and (run_dir / "warmstart_checkpoints").is_dir():
        weights = Checkpointer(run_dir / "warmstart_checkpoints").latest()
    if weights is None:
        raise SystemExit(
            f"--checkpoint {run_dir}: no trained weights (checkpoints/, warmstart/, warmstart_checkpoints/)"
        )
    load_weights(policy.model, Path(weights))
    policy.model.eval()
    encoder = PromptEncoder(policy.tokenizer, cfg.data.chat_template, cfg.data.system_prompt)
    rows = random.Random(seed).sample(task.train, min(prompts, len(task.train)))
    return policy, [encoder(r["prompt"]) for r in rows], cfg.name, Path(weights)


def warm_started_run(recipe: str, model: str, steps: int, run_dir: str | Path) -> Path:
    """Imitation-train benchmark model `model` (`SCRATCH_MODELS`' shape) on `recipe`'s task with the pipeline's
    own warm start (`ascent train RECIPE warmstart.steps=STEPS train.steps=0`) into `run_dir`, or reuse the
    run already there (a stopped one continues); returns the run directory for `trained_policy`."""
    from ascent.app.pipeline import train
    from ascent.config.loader import load_config

    hidden, layers, heads, inter = SCRATCH_MODELS[model]
    run_dir = Path(run_dir)
    overrides = [
        f"model.hidden_size={hidden}",
        f"model.num_layers={layers}",
        f"model.num_heads={heads}",
        f"model.num_kv_heads={heads}",
        f"model.intermediate_size={inter}",
        f"warmstart.steps={steps}",
        "warmstart.eval_every=0",
        "train.steps=0",
        "eval.before=false",
        f"name={run_dir.name}",
        f"output_dir={run_dir.parent}",
    ]
    if (run_dir / "warmstart" / "model.safetensors").is_file():
        return run_dir
    resume = (run_dir / "state.json").is_file()
    train(load_config(recipe, overrides), run_dir, resume=resume, overrides=overrides)
    return run_dir


def policy_regime(model: torch.nn.Module, ids: list[list[int]], out, rows: int = 32) -> dict[str, float]:
    """What the policy's next-token distributions look like on its own samples: the mean entropy (nats) of
    the full distribution at each generated position and the mean probability of the sampled token
    (teacher-forced over the first `rows` sequences of `out`, a Generation of len(ids) x n samples at
    temperature 1), with the completion lengths' quartiles. A near-uniform policy over V tokens has entropy
    ~ln V and sampled-token probability ~1/V; drafts can only be accepted as often as the policy repeats."""
    n = out.tokens.shape[0] // len(ids)
    ent, prob, count = 0.0, 0.0, 0
    with torch.no_grad():
        for i in range(min(rows, out.tokens.shape[0])):
            length = int(out.lengths[i])
            if length == 0:
                continue
            seq = torch.tensor(ids[i // n] + out.tokens[i, :length].tolist())[None]
            logits = model(seq).logits[0, len(ids[i // n]) - 1 : -1].float()  # predicts the generated tokens
            logp = torch.log_softmax(logits, -1)
            ent += float(-(logp.exp() * logp).sum(-1).sum())
            prob += float(logp.gather(-1, out.tokens[i, :length, None]).exp().sum())
            count += length
    lengths = out.lengths.float()
    q = torch.quantile(lengths, torch.tensor([0.25, 0.5, 0.75]))
    return {
        "policy_entropy_nats": round(ent / max(count, 1), 3),
        "sampled_token_prob": round(prob / max(count, 1), 3),
        "length_q1": round(float(q[0]), 1),
        "length_median": round(float(q[1]), 1),
        "length_q3": round(float(q[2]), 1),
        "length_max": int(lengths.max()),
    }
