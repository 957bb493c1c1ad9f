"""The typed config of `ascent train-pref`: where the preference pairs come from (`pairs.*`, as for `ascent train-rm`)
and how the policy is optimised on them (`pref.*`), next to the recipe's own run config (task, model, evaluation).

    ascent train-pref default pairs.label_noise=0.2 pref.loss="dpo(beta=0.1)" pref.init=runs/default/warmstart

Keys under `pairs.` and `pref.` build these records; every other `key=value` overrides the recipe as in
`ascent train`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from ascent.algorithms.preference import PREFERENCE_LOSSES
from ascent.config.loader import load_config, parse_overrides
from ascent.config.reward_model import PairsConfig
from ascent.config.schema import OptimConfig, RunConfig
from ascent.typed import ConfigError, build, spec_from_raw


@dataclass(frozen=True)
class PrefConfig:
    """How `ascent train-pref` optimises the policy on preference pairs."""

    loss: str = "dpo"
    """The preference loss and its parameters (`ascent list preference --params`): `dpo(beta=0.1,
    label_smoothing=0.0)`, `ipo(tau=0.1)`, `simpo(beta=2.0, gamma=1.0)`."""
    init: Optional[str] = None
    """The policy to start from, also the frozen reference: a run directory (its latest checkpoint, else its warm
    start), a checkpoint folder in one, or a HF causal-LM folder; None: the recipe's warm start, trained first
    into `out`/warmstart as `ascent train` would (or the model as configured when warmstart.steps=0)."""
    out: Optional[str] = None
    """Run directory to write (None: output_dir/name, as `ascent train`); `ascent eval OUT` reads it."""
    overwrite: bool = False
    """Replace an existing `out`."""
    steps: int = 200
    """Optimizer steps."""
    batch_size: int = 32
    """Pairs per optimizer step (drawn in order from a seeded shuffle, reshuffled every epoch)."""
    micro_batch_size: int = 32
    """Pairs per forward/backward (2 sequences each); the gradient of a batch is accumulated over
    batch_size / micro_batch_size of them, the same update as one forward of the whole batch."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4, warmup_steps=10))
    """AdamW and its schedule (`pref.optim.lr=3e-4`, ...)."""
    lora: bool = False
    """Train LoRA adapters (settings from the recipe's model.lora) instead of all weights; merged when saved."""
    eval_every: int = 50
    """Held-out pair accuracy and greedy accuracy every this many steps (0: before and after only)."""
    seed: Optional[int] = None
    """Seed of the batch order and LoRA init (None: the recipe's seed)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.micro_batch_size < 1:
            raise ValueError(
                f"steps, batch_size and micro_batch_size must be >= 1, got {self.steps}, {self.batch_size}, "
                f"{self.micro_batch_size}"
            )
        if self.batch_size % self.micro_batch_size:
            raise ValueError(
                f"batch_size={self.batch_size} is not a multiple of micro_batch_size={self.micro_batch_size}; "
                "change one of them"
            )
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0, got {self.eval_every}")


@dataclass(frozen=True)
class PrefJob:
    """Everything `ascent train-pref` needs: the recipe's run config and the two records (the loss spec checked
    against `PREFERENCE_LOSSES` and written back in its canonical form)."""

    run: RunConfig
    pairs: PairsConfig
    pref: PrefConfig

    @property
    def out_dir(self) -> Path:
        return Path(self.pref.out) if self.pref.out else Path(self.run.output_dir) / self.run.name

    @property
    def pairs_seed(self) -> int:
        return self.run.seed if self.pairs.seed is None else self.pairs.seed

    @property
    def pref_seed(self) -> int:
        return self.run.seed if self.pref.seed is None else self.pref.seed


SECTIONS = ("pairs", "pref")


def load_pref_job(recipe: str | Path = "default", overrides: Optional[list[str]] = None) -> PrefJob:
    """The recipe with its `key=value` overrides (as `ascent train`), and the `pairs.*` / `pref.*` overrides built
    into their checked records; `pref.loss` may be a spec string or set by `pref.loss.NAME.PARAM=value`."""
    items = overrides or []
    own = [o for o in items if o.split("=", 1)[0].split(".", 1)[0] in SECTIONS]
    raw = parse_overrides(own)
    run = load_config(recipe, [o for o in items if o not in own])
    pref_raw = dict(raw.get("pref") or {})
    if "loss" in pref_raw:
        pref_raw["loss"] = spec_from_raw(pref_raw["loss"], "pref.loss")
    pref = build(PrefConfig, pref_raw, "pref")
    pref = replace(pref, loss=PREFERENCE_LOSSES.resolve(pref.loss, key="pref.loss").spec)
    if pref.init is None and run.model.lora.enabled:
        raise ConfigError(
            "pref.init is unset and the recipe trains LoRA adapters (model.lora.enabled): train its warm start "
            "with `ascent train RECIPE train.steps=0` and give pref.init=RUN_DIR (and pref.lora=true for adapters)"
        )
    return PrefJob(run, build(PairsConfig, raw.get("pairs"), "pairs"), pref)
