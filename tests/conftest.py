"""Shared fixtures: tiny models and tokenizers built locally (no downloads)."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer


@pytest.fixture
def native():
    """ascent's native CPU kernels (built on first use); the test is skipped where they cannot be built."""
    from ascent import kernels

    lib = kernels.load()
    if lib is None:
        pytest.skip(f"native kernels unavailable here: {kernels.unavailable()}")
    return lib


if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two pytest-xdist workers: one torch thread each
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Every test starts with the process's torch thread count: code under test may set it (classic runs pick
    one thread, workers set theirs) and must not slow every later test in the same process."""
    before = torch.get_num_threads()
    yield
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture
def threads():
    """torch.set_num_threads for the test; the count is restored afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture
def one_thread(threads):
    threads(1)


@pytest.fixture
def two_threads(threads):
    threads(2)


@pytest.fixture(scope="session")
def tokenizer():
    return char_tokenizer("0123456789+= ")


def tiny_qwen(tokenizer, seed: int = 0, hidden: int = 32, layers: int = 2, tie: bool = True) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=tie,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(cfg).eval()


@pytest.fixture
def tiny_policy(tokenizer) -> Policy:
    return Policy(model=tiny_qwen(tokenizer), tokenizer=tokenizer)


@pytest.fixture
def uniform_policy(tokenizer) -> Policy:
    """A real HF model whose output logits are all zero: every token has probability 1/V."""
    model = tiny_qwen(tokenizer, tie=False)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return Policy(model=model, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance (2 CPUs, no dashboard) for one test module of tests/runtime, shut down after it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


# The tiny scratch-model run shared by the trainer-level tests (RL only, no warm start, no evaluation).
TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "warmstart.steps=0",
    "control.enabled=false",
    "logging.progress=false",
    "train.eval_every=0",
    "rollout.max_new_tokens=3",
]
