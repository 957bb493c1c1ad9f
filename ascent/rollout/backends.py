"""The rollout backends (`rollout.backend`): the `ENGINES` registry and `make_engine`, which builds one from the
run's `RolloutConfig`. What an engine is: `ascent.rollout.engine.RolloutEngine`."""

from __future__ import annotations

import dataclasses
from typing import Any

from ascent import papers
from ascent.config.schema import RolloutConfig, RunConfig
from ascent.kernels import machine
from ascent.registry import Registry
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.cached_engine import CachedEngine
from ascent.rollout.decoder import ATTENTION, DECODE_STEP
from ascent.rollout.engine import RolloutEngine
from ascent.rollout.hf_engine import HFGenerateEngine
from ascent.rollout.vllm_engine import make_vllm_engine

ENGINES: Registry = Registry("rollout backend")

ENGINES.register(
    "ascent",
    "ascent's functional decoder: preallocated KV cache, shared prompt prefill, finished rows compacted out (default)",
    paper=papers.SEER,
    fidelity="ascent",
    departures=(
        "from Seer its length-aware ordering of requests (`schedule=longest`, continuous batching) and, as the "
        "option rollout.speculative=seer_group (`ascent.rollout.speculative`), its grouped speculative decoding",
    ),
)(FastEngine)
ENGINES.register(
    "cached",
    "HF-forward engine with a DynamicCache, shared prefill and early exit (any HF causal LM)",
    paper=None,
    fidelity="ascent",
)(CachedEngine)
ENGINES.register("hf", "Hugging Face model.generate (baseline)", paper=None, fidelity="ascent")(HFGenerateEngine)
ENGINES.register(
    "vllm",
    "vLLM (optional extra ascent[vllm], CUDA GPU): policy weights pushed in before each rollout",
    paper=None,
    fidelity="ascent",
)(make_vllm_engine)


AUTO_TIS_CAP = 2.0
"""The truncated-importance-sampling cap `rollout.precision=auto` sets when it picks bf16 and none is set."""


def auto_precision(backend: str, device: str = "cpu") -> tuple[str, str]:
    """What `rollout.precision=auto` means here, and why: bf16 sampling with the `ascent` backend on CPUs with
    AMX-BF16 tile units and on bf16-capable GPUs, the model's own precision elsewhere. Measured (benchmarks/
    README.md): on a Sapphire Rapids Xeon (AMX) bf16 rollouts ran 2.09x (25M) and 3.70x (SmolLM2) HF fp32;
    on an AMD Zen 4 (AVX512-BF16, no AMX) they were no faster than fp32 rollouts, which take the native
    fp32 decode step (3.17M 16,987 vs 16,599 tok/s, SmolLM2 571 vs 594), so AVX512-BF16 alone is not enough;
    without any bf16 unit oneDNN emulates bf16."""
    import torch

    if backend != "ascent":
        return "model", f"auto -> model: the {backend!r} backend samples in the model's precision"
    if str(device).startswith("cuda"):
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return ("bfloat16", "auto -> bfloat16: the GPU supports bf16") if ok else ("model", "auto -> model: no bf16")
    if machine.amx_bf16():
        return "bfloat16", f"auto -> bfloat16: this CPU has AMX-BF16 ({machine.isa_summary()})"
    if machine.native_bf16():
        return "model", "auto -> model: AVX512-BF16 without AMX: bf16 rollouts measured no faster than fp32's"
    return "model", "auto -> model: this CPU has no bf16 units (bf16 would be emulated, slower)"


def resolve_rollout_precision(cfg: RunConfig) -> tuple[RunConfig, str | None]:
    """`cfg` with `rollout.precision=auto` made concrete for this machine (`auto_precision`), and a line saying
    what was picked and why (None when it was not auto). Picking bf16 also sets `algorithm.tis_cap` to
    `AUTO_TIS_CAP` when none is set, so the learner corrects the sampler/learner mismatch (truncated
    importance sampling, Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL
    Training")."""
    if cfg.rollout.precision != "auto":
        return cfg, None
    precision, why = auto_precision(cfg.rollout.backend, cfg.model.device)
    cfg = dataclasses.replace(cfg, rollout=dataclasses.replace(cfg.rollout, precision=precision))
    if precision == "bfloat16" and cfg.algorithm.tis_cap is None:
        cfg = dataclasses.replace(cfg, algorithm=dataclasses.replace(cfg.algorithm, tis_cap=AUTO_TIS_CAP))
        why += f"; algorithm.tis_cap={AUTO_TIS_CAP}"
    return cfg, why


def make_engine(cfg: RolloutConfig | str = "ascent", **fields: Any) -> RolloutEngine:
    """The engine of `cfg` (`RolloutConfig`; a backend name stands for that backend's default config), with
    `fields` replacing config fields (e.g. `make_engine(cfg.rollout, precision="model")`). It uses:
    `backend`; `max_active_sequences` (0: no cap), how many sequences decode at once, supported by the
    `ascent` and `vllm` backends; `precision`, "model", "bfloat16" (the `ascent` backend only) or "auto"
    (`auto_precision` on this CPU); `shards`, CPU decode shards of the `ascent` backend (0: automatic, 1:
    none); `attention`, the `ascent` backend's decode attention, "auto", "native" or "torch"; `decode_step`,
    the `ascent` backend's one-thread decode step, "auto", "native" (one C call per step) or "torch";
    `speculative`, the `ascent` backend's grouped speculative decoding (`ascent.rollout.speculative`). The
    sampling fields (temperature, ...) are not the engine's: they reach each call as `SamplingSettings`."""
    cfg = RolloutConfig(backend=cfg) if isinstance(cfg, str) else cfg
    cfg = dataclasses.replace(cfg, **fields) if fields else cfg
    name, max_active_sequences, precision, shards = cfg.backend, cfg.max_active_sequences, cfg.precision, cfg.shards
    if precision == "auto":  # a run resolves it first (`resolve_rollout_precision`); here: this CPU
        precision = auto_precision(name)[0]
    attention, decode_step, speculative = cfg.attention, cfg.decode_step, cfg.speculative
    if speculative != "none" and name != "ascent":
        raise ValueError(
            f"rollout.speculative={speculative!r} needs the 'ascent' backend, not {name!r}; set it to none"
        )
    if max_active_sequences < 0:
        raise ValueError(f"rollout.max_active_sequences must be >= 0 (0: no cap), got {max_active_sequences}")
    engine = ENGINES.get(name)
    if precision != "model" and name != "ascent":
        raise ValueError(
            f"rollout.precision={precision!r} is supported by the 'ascent' backend, not {name!r}; set it to 'model'"
        )
    if shards < 0 or (shards > 1 and name != "ascent"):
        raise ValueError(
            f"rollout.shards must be >= 0 and values above 1 need the 'ascent' backend; got {shards} with {name!r}"
        )
    if attention not in ATTENTION or (attention != "auto" and name != "ascent"):
        raise ValueError(
            f"rollout.attention must be one of {ATTENTION} and other than 'auto' only with the 'ascent' backend; "
            f"got {attention!r} with {name!r}"
        )
    if decode_step not in DECODE_STEP or (decode_step != "auto" and name != "ascent"):
        raise ValueError(
            f"rollout.decode_step must be one of {DECODE_STEP} and other than 'auto' only with the 'ascent' backend; "
            f"got {decode_step!r} with {name!r}"
        )
    if name == "ascent":
        return engine(
            max_active_sequences=max_active_sequences,
            precision=precision,
            shards=shards,
            attention=attention,
            decode_step=decode_step,
            speculative=speculative,
        )
    if name == "vllm":
        return engine(max_active_sequences=max_active_sequences)
    if max_active_sequences:
        raise ValueError(
            f"rollout.max_active_sequences is supported by the 'ascent' and 'vllm' backends, not {name!r}; set it to 0"
        )
    return engine()
