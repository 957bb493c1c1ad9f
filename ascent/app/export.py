"""`ascent export RUN_DIR OUT_DIR`: a run's model as a plain Hugging Face folder, LoRA merged.

The folder loads with `AutoModelForCausalLM.from_pretrained` + `AutoTokenizer.from_pretrained` in a process that
never imports ascent: model weights (safetensors, LoRA adapters folded in), config, generation_config (the run's
EOS and padding ids and completion length), the tokenizer with its chat template, and `ascent_export.json`
(source run, checkpoint, step, whether LoRA was merged, and how the run encoded prompts: `data.chat_template`
and `data.system_prompt`). Greedy decoding of prompts encoded that way gives the answers ascent's evaluation
scores.

The tokenizer is checked to come back from `AutoTokenizer.from_pretrained(OUT_DIR)` the same: same ids and text
for every vocabulary entry, same special tokens and chat template. A project tokenizer (`char_tokenizer`) of a
Qwen2 scratch model does not as it stands: transformers 5 loads any Qwen2 folder's tokenizer as a byte-level BPE
`Qwen2Tokenizer` rebuilt from the saved vocabulary, which drops spaces, newlines and the multi-character pieces.
Such a tokenizer is saved with every vocabulary entry an added token (matched longest-first on the raw text
before any normalisation, as the project tokenizer segments), which every tokenizer class reads back alike; the
one difference left is that a character outside its alphabet is dropped instead of encoded as <unk>.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

import torch

from ascent.app.runs import RunDirError, find_config, read_run_config
from ascent.config.schema import RunConfig
from ascent.policy.model import Policy, build_policy
from ascent.tasks import load_task
from ascent.trainer.checkpoint import load_weights, save_folder_atomic

MANIFEST = "ascent_export.json"
ADDED_TOKENS_MAX = 4096
"""Largest vocabulary `save_tokenizer` saves as added tokens (a project tokenizer has a few dozen to hundreds)."""


def export(target: Path, out_dir: Path, overwrite: bool = False) -> Path:
    """Write the model of `target` (a run directory: its latest RL checkpoint, else its warm start; or a
    checkpoint folder inside a run) to `out_dir` as a plain Hugging Face folder, atomically. Returns `out_dir`.

    Refuses (RunDirError) a target that is no run or checkpoint, an existing non-empty `out_dir` unless
    `overwrite`, and an `out_dir` that is, or holds, the run itself.
    """
    target, out = Path(target), Path(out_dir)
    try:
        run_dir, folder = find_config(target)
    except FileNotFoundError as err:
        raise RunDirError(f"cannot export {target}: {err}") from None
    check_out_dir(out, (run_dir, folder), overwrite)
    cfg = read_run_config(run_dir)
    policy = checkpoint_policy(cfg, folder)
    merged = hasattr(policy.model, "merge_and_unload")  # a peft model: fold the adapters into plain weights
    model = policy.model.merge_and_unload() if merged else policy.model
    set_generation_config(model, policy, cfg)
    manifest = {
        "source_run": run_dir.resolve().name,  # names, not the machine's absolute paths (exports get published)
        "checkpoint": folder.resolve().relative_to(run_dir.resolve()).as_posix(),
        "step": checkpoint_step(folder),
        "lora_merged": merged,
        "chat_template": cfg.data.chat_template,
        "system_prompt": cfg.data.system_prompt,
        "max_new_tokens": cfg.rollout.max_new_tokens,
    }

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp, safe_serialization=True)
        manifest["tokenizer_tokens_added"] = save_tokenizer(policy.tokenizer, tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        readable_by_all(tmp)

    return save_folder_atomic(out, write)


def readable_by_all(folder: Path) -> None:
    """Give every file the mode a plain write would (0644 under the usual umask 022): the weights are written
    through a private temporary file (0600), and a server running as another user must read them too."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o666 & ~umask)


def check_out_dir(out: Path, keep: tuple[Path, ...], overwrite: bool) -> None:
    """Raise RunDirError unless `out` may receive an export: absent or empty, or (with overwrite) an earlier
    export (it holds ascent_export.json; no symlink) that is none of `keep` (the run directory and the
    checkpoint exported) nor one above them: replacing it would delete them."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise RunDirError(f"{out} exists and is not a directory; choose another OUT_DIR")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise RunDirError(
            f"{out} already exists and is not empty; replace it with --overwrite or choose another OUT_DIR"
        )
    resolved = out.resolve()
    for path in keep:
        if resolved == path.resolve() or resolved in path.resolve().parents:
            raise RunDirError(f"{out} holds {path}; --overwrite would delete it, choose another OUT_DIR")
    if not (out / MANIFEST).is_file():
        raise RunDirError(
            f"{out} is not an earlier export (no {MANIFEST}); --overwrite replaces only those: "
            "choose another OUT_DIR or remove it yourself"
        )


def checkpoint_policy(cfg: RunConfig, folder: Path) -> Policy:
    """The run's policy as its config builds it (LoRA adapters included), with the weights of `folder`."""
    with torch.random.fork_rng(devices=[]):  # building re-seeds torch; leave the caller's RNG alone
        seed = cfg.seed if cfg.data.split_seed is None else cfg.data.split_seed
        tokenizer = load_task(cfg.data, seed).tokenizer if cfg.model.source == "scratch" else None
        policy = build_policy(cfg.model, tokenizer, cfg.seed)
    load_weights(policy.model, folder)
    policy.model.eval()
    return policy


def policy_at(target: str | Path, cfg: RunConfig) -> Policy:
    """The policy stored at `target`: a run directory (its latest checkpoint, else its warm start) or a checkpoint
    folder inside one, built by that run's config; else a plain HF causal-LM folder (e.g. `ascent export`'s, in
    `cfg.model.dtype`). LoRA adapters are merged. Raises RunDirError for anything else."""
    from ascent.policy.model import load_hf

    try:
        run_dir, folder = find_config(Path(target))
    except FileNotFoundError:
        try:
            policy = load_hf(target, cfg.model.dtype)
        except (OSError, ValueError) as err:
            raise RunDirError(f"{target} is neither a run, a checkpoint in one, nor a HF model folder: {err}") from None
    else:
        policy = checkpoint_policy(read_run_config(run_dir), folder)
    if hasattr(policy.model, "merge_and_unload"):
        policy = Policy(model=policy.model.merge_and_unload(), tokenizer=policy.tokenizer)
    return policy


def set_generation_config(model: Any, policy: Policy, cfg: RunConfig) -> None:
    """The run's EOS and padding ids (ascent stops a completion at the tokenizer's EOS only) and completion
    length into the model's generation_config; sampling settings stay the model's (generate is greedy unless
    asked otherwise, as ascent's evaluation)."""
    gen = model.generation_config
    gen.eos_token_id = policy.eos_id
    gen.pad_token_id = policy.pad_id
    if policy.tokenizer.bos_token_id is not None:
        gen.bos_token_id = int(policy.tokenizer.bos_token_id)
    gen.max_new_tokens = cfg.rollout.max_new_tokens


def save_tokenizer(tokenizer: Any, folder: Path) -> bool:
    """Save `tokenizer` into the model folder `folder` so that `AutoTokenizer.from_pretrained(folder)` gives it
    back (`same_tokenizer`); when the plain save does not, save it with every vocabulary entry an added token
    (see the module docstring) and return True. Raises RuntimeError when neither comes back the same."""
    from tokenizers import AddedToken

    tokenizer.save_pretrained(folder)
    if same_tokenizer(tokenizer, folder):
        return False
    if len(tokenizer) > ADDED_TOKENS_MAX:
        raise RuntimeError(
            f"the tokenizer ({type(tokenizer).__name__}, {len(tokenizer)} tokens) does not load back the same with "
            "AutoTokenizer.from_pretrained"
        )
    added = copy.deepcopy(tokenizer)
    specials = set(added.all_special_tokens)
    entries = sorted(added.get_vocab().items(), key=lambda kv: kv[1])
    added.add_tokens([AddedToken(t, normalized=False, special=False) for t, _ in entries if t not in specials])
    added.save_pretrained(folder)
    if not same_tokenizer(tokenizer, folder):
        raise RuntimeError(
            f"the tokenizer ({type(tokenizer).__name__}) does not load back the same with AutoTokenizer.from_pretrained"
        )
    return True


def same_tokenizer(tokenizer: Any, folder: Path) -> bool:
    """Whether `AutoTokenizer.from_pretrained(folder)` encodes and decodes like `tokenizer` the vocabulary's
    entries concatenated (in order, reversed, each twice: texts of in-vocabulary characters only, spaces and
    newlines included where the vocabulary has them), with the same special tokens and chat template."""
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(folder)
    specials = set(tokenizer.all_special_tokens)
    entries = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]) if t not in specials]
    for text in ("".join(entries), "".join(reversed(entries)), "".join(e + e for e in entries)):
        ids = tokenizer(text)["input_ids"]
        if loaded(text)["input_ids"] != ids:
            return False
        if loaded.decode(ids, skip_special_tokens=True) != tokenizer.decode(ids, skip_special_tokens=True):
            return False
    keys = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "chat_template")
    return len(loaded) == len(tokenizer) and all(getattr(loaded, k) == getattr(tokenizer, k) for k in keys)


def checkpoint_step(folder: Path) -> Optional[int]:
    """The RL step of a `checkpoints/step_N` folder; None for the warm start (or any other folder)."""
    found = re.fullmatch(r"step_(\d+)", folder.name)
    return int(found.group(1)) if found else None
