"""Frozen models a piece may need next to the policy (e.g. a teacher to imitate): loaded from a checkpoint
folder as ascent writes it (an HF model folder or a peft adapter folder inside a run directory), a run
directory (its latest checkpoint, else its warm start, resolved as `ascent eval RUN_OR_CKPT` does) or a
standalone HF model folder; checked to share the policy's tokenizer, frozen, in eval mode."""

from __future__ import annotations

from pathlib import Path

import torch

from ascent.config.loader import config_from_dict
from ascent.policy.model import Policy, build_policy, load_hf
from ascent.trainer.checkpoint import load_weights, resolve_model_folder


class VocabularyMismatchError(ValueError):
    """A frozen model that does not share the policy's tokenizer and vocabulary."""


def resolve_frozen(path: str | Path) -> tuple[Path | None, Path]:
    """(run directory or None, model folder) for a run directory, a checkpoint folder or an HF model folder."""
    target = Path(path)
    if not target.exists():
        raise FileNotFoundError(f"{str(target)!r} does not exist (give a checkpoint folder or a run directory)")
    if (target / "config.yaml").exists() or not (target / "config.json").exists():
        return resolve_model_folder(target)
    return None, target  # a standalone HF model folder


def load_frozen_model(path: str | Path, policy: Policy) -> torch.nn.Module:
    """The model at `path`, frozen, in eval mode, on the policy's device; checked to share its vocabulary."""
    import yaml

    run_dir, folder = resolve_frozen(path)
    if (folder / "config.json").exists():
        loaded = load_hf(folder, str(next(policy.model.parameters()).dtype).removeprefix("torch."))
        model, tokenizer = loaded.model, loaded.tokenizer
    else:  # a peft adapter: rebuild the run's model, load the adapter, fold it in
        cfg = config_from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
        with torch.random.fork_rng(devices=[]):  # building re-seeds torch; leave the run's RNG alone
            model = build_policy(cfg.model, policy.tokenizer, cfg.seed).model
        load_weights(model, folder)
        model = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
        tokenizer = None
    check_same_vocabulary(model, tokenizer, policy, folder)
    model = model.to(policy.device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def check_same_vocabulary(model: torch.nn.Module, tokenizer, policy: Policy, folder: Path) -> None:
    """Raise VocabularyMismatchError unless the model's output vocabulary (and tokenizer, when saved) match
    the policy's: token-by-token comparisons of the two distributions need the same tokenizer."""
    vocab = model.get_output_embeddings().weight.shape[0]
    own = policy.model.get_output_embeddings().weight.shape[0]
    if vocab != own:
        raise VocabularyMismatchError(
            f"{folder} has {vocab} output tokens, the policy {own}: comparing the two distributions token by token "
            "needs the policy's tokenizer and vocabulary"
        )
    if tokenizer is not None and tokenizer.get_vocab() != policy.tokenizer.get_vocab():
        raise VocabularyMismatchError(
            f"{folder} uses a different tokenizer than the policy (same size, different tokens); "
            "it needs the same tokenizer"
        )
