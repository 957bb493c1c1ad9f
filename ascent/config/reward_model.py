"""The typed config of `ascent make-pairs` and `ascent train-rm`: where preference pairs come from (`pairs.*`) and
how the reward model trains (`rm.*`), next to the recipe's own run config (task, model shape, seed).

    ascent train-rm default pairs.label_noise=0.2 rm.init=runs/default/warmstart rm.steps=400

Keys under `pairs.` and `rm.` build these records; every other `key=value` overrides the recipe as in
`ascent train`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ascent.config.loader import load_config, parse_overrides
from ascent.config.schema import OptimConfig, RunConfig
from ascent.typed import build


@dataclass(frozen=True)
class PairsConfig:
    """Preference pairs (`prompt`, `chosen`, `rejected`, optional `margin`), read from JSONL or made from the task."""

    file: Optional[str] = None
    """JSONL pairs to train on; None: make them from the recipe's task (training rows) with its verifier."""
    eval_file: Optional[str] = None
    """JSONL held-out pairs; None: made from the task's held-out rows (or, with `file`, the last `eval_frac`)."""
    eval_frac: float = 0.1
    """With `file` and no `eval_file`: the share of the file's pairs held out (the last ones), in (0, 1)."""
    policy: Optional[str] = None
    """Sample the completions from this policy (a run directory, a checkpoint in one, or a HF folder) and pair a
    correct sample with a wrong one of the same prompt; None: pair the row's answer with the task teacher's wrong
    answer, or with a corrupted answer (one digit or character changed) when the teacher is right."""
    wrong: list[str] = field(default_factory=lambda: ["teacher"])
    """Without `policy`, where the wrong candidate comes from: `teacher` (the task teacher's answer where it errs,
    else a corruption), `corrupt` (the right answer with one character changed), or both (the rejected one drawn
    among them). A labeller that only ever sees the teacher's mistakes teaches their direction (dropped carries
    make sums smaller, so "larger is better"), which RL on the reward model then exploits."""
    samples: int = 8
    """With `policy`: completions sampled per prompt (prompts whose samples are all right or all wrong give no
    pair)."""
    temperature: float = 1.0
    """With `policy`: the sampling temperature."""
    num_train: int = 2000
    """Training pairs to make (at most one per training row)."""
    num_eval: int = 200
    """Held-out pairs to make (at most one per held-out row); their labels are never flipped."""
    label_noise: float = 0.0
    """Share of training pairs whose chosen and rejected are swapped (a noisy labeller): exactly
    round(label_noise * n) pairs, picked with `seed`; in [0, 0.5)."""
    seed: Optional[int] = None
    """Seed of sampling, corruption and label flips (None: the recipe's seed)."""

    def __post_init__(self) -> None:
        if not 0 <= self.label_noise < 0.5:
            raise ValueError(
                f"label_noise must be in [0, 0.5) (at 0.5 the labels carry no signal), got {self.label_noise}"
            )
        if not 0 < self.eval_frac < 1:
            raise ValueError(f"eval_frac must be in (0, 1), got {self.eval_frac}")
        if self.policy is not None and self.samples < 2:
            raise ValueError(f"samples must be >= 2 to find a right and a wrong sample, got {self.samples}")
        if self.num_train < 1 or self.num_eval < 1:
            raise ValueError(f"num_train and num_eval must be >= 1, got {self.num_train}, {self.num_eval}")
        if self.eval_file is not None and self.file is None:
            raise ValueError("eval_file needs file (the training pairs); set pairs.file too")
        if self.file is not None and self.policy is not None:
            raise ValueError("pairs.file reads pairs, pairs.policy makes them: set one of the two")
        if not self.wrong or set(self.wrong) - {"teacher", "corrupt"}:
            raise ValueError(f"wrong must be a non-empty list of 'teacher' and/or 'corrupt', got {self.wrong}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


@dataclass(frozen=True)
class RewardModelConfig:
    """How `ascent train-rm` trains the reward model."""

    init: Optional[str] = None
    """Trunk to start from: a run directory (its latest checkpoint, else its warm start), a checkpoint folder in
    one (e.g. runs/default/warmstart) or a HF causal-LM folder; None: a scratch model of the recipe's `model.*`."""
    out: Optional[str] = None
    """Folder to write (None: rms/<recipe name>); also gets the pairs used, as pairs.train.jsonl / pairs.eval.jsonl."""
    overwrite: bool = False
    """Replace an existing `out`."""
    steps: int = 300
    """Optimizer steps."""
    batch_size: int = 32
    """Pairs per optimizer step (drawn in order from a seeded shuffle, reshuffled every epoch)."""
    micro_batch_size: int = 32
    """Pairs per forward/backward; the gradient of a batch is accumulated over batch_size / micro_batch_size."""
    score_micro_batch_size: int = 64
    """Sequences per forward when the saved model scores as a reward (recorded in reward_model.json)."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4, warmup_steps=10, weight_decay=0.01))
    """AdamW and its schedule (`rm.optim.lr=3e-4`, ...)."""
    use_margin: bool = True
    """Subtract a pair's `margin` inside the sigmoid (pairs without one: 0)."""
    lora: bool = False
    """Train LoRA adapters on the trunk (settings from the recipe's model.lora) and the head, instead of all
    weights; the adapters are merged into the saved trunk."""
    max_length: int = 0
    """Longest scored sequence in tokens (longer ones keep their end); 0: the trunk's max_position_embeddings."""
    eval_every: int = 50
    """Held-out pair accuracy every this many steps (0: at the end only)."""
    seed: Optional[int] = None
    """Seed of the head's init, scratch trunks and batch order (None: the recipe's seed)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.micro_batch_size < 1 or self.score_micro_batch_size < 1:
            raise ValueError("steps, batch_size, micro_batch_size and score_micro_batch_size must be >= 1")
        if self.batch_size % self.micro_batch_size:
            raise ValueError(
                f"batch_size={self.batch_size} is not a multiple of micro_batch_size={self.micro_batch_size}; "
                "change one of them"
            )
        if self.max_length < 0 or self.eval_every < 0:
            raise ValueError(f"max_length and eval_every must be >= 0, got {self.max_length}, {self.eval_every}")
        if self.max_length == 1:
            raise ValueError("max_length must hold at least one token and EOS (>= 2, or 0 for the trunk's limit)")


@dataclass(frozen=True)
class RewardModelJob:
    """Everything `ascent make-pairs` / `ascent train-rm` need: the recipe's run config and the two records."""

    run: RunConfig
    pairs: PairsConfig
    rm: RewardModelConfig

    @property
    def out_dir(self) -> Path:
        return Path(self.rm.out) if self.rm.out else Path("rms") / self.run.name

    @property
    def pairs_seed(self) -> int:
        return self.run.seed if self.pairs.seed is None else self.pairs.seed

    @property
    def rm_seed(self) -> int:
        return self.run.seed if self.rm.seed is None else self.rm.seed


SECTIONS = ("pairs", "rm")


def load_rm_job(recipe: str | Path = "default", overrides: Optional[list[str]] = None) -> RewardModelJob:
    """The recipe with its `key=value` overrides (as `ascent train`), and the `pairs.*` / `rm.*` overrides built
    into their checked records."""
    items = overrides or []
    own = [o for o in items if o.split("=", 1)[0].split(".", 1)[0] in SECTIONS]
    raw = parse_overrides(own)
    run = load_config(recipe, [o for o in items if o not in own])
    return RewardModelJob(
        run, build(PairsConfig, raw.get("pairs"), "pairs"), build(RewardModelConfig, raw.get("rm"), "rm")
    )
