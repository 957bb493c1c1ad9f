"""The typed config of `ascent make-steps` and `ascent train-prm`: where the labelled steps come from (`prm.*`:
trajectories sampled from a policy, Monte Carlo completions from each step) and how the process reward model
trains (`rm.*`, the record `ascent train-rm` uses), next to the recipe's own run config.

    ascent train-prm search-agent prm.policy=runs/search-agent prm.completions=4 rm.init=runs/search-agent rm.steps=200

Keys under `prm.` and `rm.` build these records; every other `key=value` overrides the recipe as in `ascent train`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from ascent.config.loader import load_config, parse_overrides
from ascent.config.reward_model import RewardModelConfig
from ascent.config.schema import RunConfig
from ascent.typed import build


@dataclass(frozen=True)
class StepDataConfig:
    """Labelled steps (Math-Shepherd, Wang et al. 2024, arXiv:2312.08935): trajectories of an agent task, a step
    = a model turn, each step labelled by Monte Carlo completions from the trajectory's prefix through it."""

    policy: Optional[str] = None
    """Who samples the trajectories and the completions: a run directory, a checkpoint in one or a HF folder, or
    `demonstrator` (the task's scripted demonstrator); needed unless `file` is given."""
    file: Optional[str] = None
    """A step-data JSONL (steps.train.jsonl of `ascent make-steps` / a PRM folder) to train on instead."""
    eval_file: Optional[str] = None
    """Held-out step data with `file` (None: the last `eval_frac` of `file`)."""
    eval_frac: float = 0.1
    """With `file` and no `eval_file`: the share of its trajectories held out (the last ones), in (0, 1)."""
    samples: int = 2
    """Trajectories sampled per task row; >= 1."""
    completions: int = 4
    """Monte Carlo completions from each step but the last (the last step's label is the trajectory's own
    outcome); 0: every step labelled with the trajectory's outcome (outcome supervision; e.g. expert data for
    `q_evolve(demos=...)`, which reads only the outcomes); >= 0."""
    temperature: float = 1.0
    """Sampling temperature of trajectories and completions; > 0."""
    success: float = 1.0
    """A trajectory or completion reaches the right answer when its reward is >= this."""
    label: Literal["soft", "hard"] = "soft"
    """The PRM's training target: `soft` (the share of completions that succeed) or `hard` (1 if any does)."""
    num_train: int = 200
    """Training task rows to sample from (each gives `samples` trajectories); >= 1."""
    num_eval: int = 40
    """Held-out task rows (from the task's held-out split); >= 1."""
    seed: Optional[int] = None
    """Seed of the sampling (None: the recipe's seed)."""

    def __post_init__(self) -> None:
        if self.samples < 1 or self.completions < 0:
            raise ValueError(f"samples must be >= 1 and completions >= 0, got {self.samples}, {self.completions}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.num_train < 1 or self.num_eval < 1:
            raise ValueError(f"num_train and num_eval must be >= 1, got {self.num_train}, {self.num_eval}")
        if not 0 < self.eval_frac < 1:
            raise ValueError(f"eval_frac must be in (0, 1), got {self.eval_frac}")
        if self.file is not None and self.policy is not None:
            raise ValueError("prm.file reads step data, prm.policy samples it: set one of the two")
        if self.eval_file is not None and self.file is None:
            raise ValueError("eval_file needs file (the training steps); set prm.file too")


@dataclass(frozen=True)
class ProcessRewardJob:
    """Everything `ascent make-steps` / `ascent train-prm` need: the recipe's run config and the two records."""

    run: RunConfig
    prm: StepDataConfig
    rm: RewardModelConfig = field(default_factory=RewardModelConfig)

    @property
    def out_dir(self) -> Path:
        return Path(self.rm.out) if self.rm.out else Path("prms") / self.run.name

    @property
    def prm_seed(self) -> int:
        return self.run.seed if self.prm.seed is None else self.prm.seed

    @property
    def rm_seed(self) -> int:
        return self.run.seed if self.rm.seed is None else self.rm.seed


SECTIONS = ("prm", "rm")


def load_prm_job(recipe: str | Path = "default", overrides: Optional[list[str]] = None) -> ProcessRewardJob:
    """The recipe with its `key=value` overrides (as `ascent train`), and the `prm.*` / `rm.*` overrides built
    into their checked records."""
    items = overrides or []
    own = [o for o in items if o.split("=", 1)[0].split(".", 1)[0] in SECTIONS]
    raw = parse_overrides(own)
    run = load_config(recipe, [o for o in items if o not in own])
    return ProcessRewardJob(
        run, build(StepDataConfig, raw.get("prm"), "prm"), build(RewardModelConfig, raw.get("rm"), "rm")
    )
