"""The rollout backends (`rollout.backend`): the `ENGINES` registry and `make_engine`, which builds one from the
run's `RolloutConfig`. What an engine is: `ascent.rollout.engine.RolloutEngine`."""

from __future__ import annotations

import dataclasses
from typing import Any

from ascent.config.schema import RolloutConfig
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
)(FastEngine)
ENGINES.register("cached", "HF-forward engine with a DynamicCache, shared prefill and early exit (any HF causal LM)")(
    CachedEngine
)
ENGINES.register("hf", "Hugging Face model.generate (baseline)")(HFGenerateEngine)
ENGINES.register("vllm", "vLLM (optional extra ascent[vllm], CUDA GPU): policy weights pushed in before each rollout")(
    make_vllm_engine
)


def make_engine(cfg: RolloutConfig | str = "ascent", **fields: Any) -> RolloutEngine:
    """The engine of `cfg` (`RolloutConfig`; a backend name stands for that backend's default config), with
    `fields` replacing config fields (e.g. `make_engine(cfg.rollout, precision="model")`). It uses:
    `backend`; `max_active_sequences` (0: no cap), how many sequences decode at once, supported by the
    `ascent` and `vllm` backends; `precision`, "model" or "bfloat16", the latter for the `ascent` backend
    only; `shards`, CPU decode shards of the `ascent` backend (0: automatic, 1: none); `attention`, the
    `ascent` backend's decode attention, "auto", "native" or "torch"; `decode_step`, the `ascent` backend's
    one-thread decode step, "auto", "native" (one C call per step) or "torch". The sampling fields
    (temperature, ...) are not the engine's: they reach each call as `SamplingSettings`."""
    cfg = RolloutConfig(backend=cfg) if isinstance(cfg, str) else cfg
    cfg = dataclasses.replace(cfg, **fields) if fields else cfg
    name, max_active_sequences, precision, shards = cfg.backend, cfg.max_active_sequences, cfg.precision, cfg.shards
    attention, decode_step = cfg.attention, cfg.decode_step
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
        )
    if name == "vllm":
        return engine(max_active_sequences=max_active_sequences)
    if max_active_sequences:
        raise ValueError(
            f"rollout.max_active_sequences is supported by the 'ascent' and 'vllm' backends, not {name!r}; set it to 0"
        )
    return engine()
