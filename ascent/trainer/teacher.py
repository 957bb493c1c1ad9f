"""The frozen teacher of distillation losses (DistIL): loaded from `algorithm.teacher`, a checkpoint
folder as ascent writes it (Checkpointer / warm start: an HF model folder or a peft adapter folder inside
a run directory) or a run directory (its latest checkpoint, else its warm start, resolved exactly as
`ascent eval RUN_OR_CKPT` does). The teacher must share the student's tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch

from ascent.policy.model import Policy


class TeacherError(ValueError):
    """The teacher cannot be used with this student."""


def resolve_teacher(path: str | Path) -> tuple[Path | None, Path]:
    """(run directory or None, model folder) for a run directory or a checkpoint folder."""
    from ascent.trainer.checkpoint import resolve_model_folder as find_config

    target = Path(path)
    if not target.exists():
        raise FileNotFoundError(f"algorithm.teacher={str(target)!r} does not exist (give a checkpoint folder or a run directory)")
    if (target / "config.yaml").exists() or not (target / "config.json").exists():
        return find_config(target)
    return None, target  # a standalone HF model folder


def load_teacher(path: str | Path, student: Policy) -> torch.nn.Module:
    """The teacher model, frozen, in eval mode, on the student's device; checked to share its vocabulary."""
    from ascent.policy.model import load_hf

    run_dir, folder = resolve_teacher(path)
    if (folder / "config.json").exists():
        teacher = load_hf(folder, str(next(student.model.parameters()).dtype).removeprefix("torch."))
        model, tokenizer = teacher.model, teacher.tokenizer
    else:  # a peft adapter: rebuild the run's model, load the adapter, fold it in
        import yaml

        from ascent.config.loader import config_from_dict
        from ascent.policy.model import build_policy
        from ascent.trainer.checkpoint import load_weights

        cfg = config_from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
        with torch.random.fork_rng(devices=[]):  # building re-seeds torch; leave the run's RNG alone
            model = build_policy(cfg.model, student.tokenizer, cfg.seed).model
        load_weights(model, folder)
        model = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
        tokenizer = None
    check_same_vocabulary(model, tokenizer, student, folder)
    model = model.to(student.device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def check_same_vocabulary(model: torch.nn.Module, tokenizer, student: Policy, folder: Path) -> None:
    """Raise TeacherError unless the teacher's output vocabulary (and tokenizer, when saved) match the student's."""
    t_vocab = model.get_output_embeddings().weight.shape[0]
    s_vocab = student.model.get_output_embeddings().weight.shape[0]
    if t_vocab != s_vocab:
        raise TeacherError(f"teacher {folder} has {t_vocab} output tokens, the student {s_vocab}: distillation compares the two distributions token by token, so the teacher must share the student's tokenizer and vocabulary")
    if tokenizer is not None and tokenizer.get_vocab() != student.tokenizer.get_vocab():
        raise TeacherError(f"teacher {folder} uses a different tokenizer than the student (same size, different tokens); distillation needs the same tokenizer")
