"""Sharded CPU decoding in the ascent engine: groups split across threads, each with its share of the
intra-op threads. Sharding may change when a sequence is computed, never what it samples."""

from __future__ import annotations

import pytest
import torch

from ascent.policy.model import token_logprobs
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.scheduling import balance_groups

PROMPTS = ["12+34=", "7+8=", "99+1=", "5=", "1+2+3="]


def ids_of(tokenizer, prompts=PROMPTS):
    return [tokenizer(p)["input_ids"] for p in prompts]


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 40), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


def natural_model(tokenizer):
    """Random init, ~1/17 EOS chance per token: lengths vary within and across groups (compaction runs)."""
    from tests.conftest import tiny_qwen

    return tiny_qwen(tokenizer, seed=5, hidden=64, layers=2)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


def same(a, b):
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths) and torch.equal(a.finished, b.finished)
    assert torch.allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
@pytest.mark.parametrize("cap", [0, 12])
def test_shards_sample_what_one_shard_samples(temperature, cap, tokenizer, two_threads):
    model = natural_model(tokenizer)
    s = settings(tokenizer, temperature=temperature)
    one = FastEngine(max_active_sequences=cap, shards=1)
    ref = one.generate(model, ids_of(tokenizer), 8, s, torch.Generator().manual_seed(4))
    assert one.last_stats["shards"] == 1
    for k in (2, 3):
        engine = FastEngine(max_active_sequences=cap, shards=k)
        gen = engine.generate(model, ids_of(tokenizer), 8, s, torch.Generator().manual_seed(4))
        same(gen, ref)
        assert engine.last_stats["shards"] == k
        assert torch.get_num_threads() == 2  # restored after the call
    if temperature:
        assert 0.2 < float(ref.finished.float().mean()) < 1.0  # some rows ended early, some ran to the end


def test_sharded_logprobs_match_teacher_forced(tokenizer, two_threads):
    model = natural_model(tokenizer)
    ids = ids_of(tokenizer)
    gen = FastEngine(shards=2).generate(model, ids, 8, settings(tokenizer), torch.Generator().manual_seed(1))
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 8, tokenizer)
    with torch.no_grad():
        lp = token_logprobs(model, batch.input_ids, batch.attention_mask)
    assert float(((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max()) <= 1e-4


def test_automatic_shard_count(tokenizer, two_threads):
    s, cpu = settings(tokenizer), torch.device("cpu")
    engine = FastEngine()
    assert len(engine.shard_plan(ids_of(tokenizer), 16, s, cpu)) == 2  # 80 rows, 2 threads: 2 shards of >= 32
    assert len(engine.shard_plan(ids_of(tokenizer), 8, s, cpu)) == 1  # 40 rows: one shard would get < 32
    assert len(engine.shard_plan(ids_of(tokenizer)[:1], 64, s, cpu)) == 1  # one group cannot be split
    torch.set_num_threads(1)
    assert len(engine.shard_plan(ids_of(tokenizer), 16, s, cpu)) == 1  # one thread: no shards
    assert len(FastEngine(shards=4).shard_plan(ids_of(tokenizer), 1, s, cpu)) == 4  # explicit: even small
    assert len(FastEngine(shards=9).shard_plan(ids_of(tokenizer), 1, s, cpu)) == 5  # at most one per group


def test_shards_apply_to_cpu_only(tokenizer):
    engine = FastEngine(shards=2)
    with pytest.warns(RuntimeWarning, match="CPU rollouts only"):
        plan = engine.shard_plan(ids_of(tokenizer), 16, settings(tokenizer), torch.device("cuda"))
    assert plan == [list(range(len(PROMPTS)))]


def test_groups_are_balanced_by_predicted_length(tokenizer):
    """A group known to be long gets a shard to itself; unseen groups count as max_new_tokens long."""
    ids = [[1, 2, 3], [1, 2, 4], [1, 2, 5], [1, 2, 6], [1, 2, 7]]
    engine = FastEngine(shards=2)
    engine.predictor.update(ids, [[200] * 4, [10] * 4, [20] * 4, [30] * 4, [40] * 4])
    plan = engine.shard_plan(ids, 4, settings(tokenizer, max_new_tokens=256), torch.device("cpu"))
    assert plan == [[0], [1, 2, 3, 4]]
    assert balance_groups([1.0, 1.0, 1.0], 2) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="k must be >= 1"):
        balance_groups([1.0], 0)


def test_a_failing_shard_raises_and_restores_threads(tokenizer, two_threads, monkeypatch):
    engine = FastEngine(shards=2)
    real = FastEngine._decode

    def flaky(self, dec, prompt_ids, *args):
        if len(prompt_ids) == 2:  # the second shard (groups 1 and 3 of five)
            raise RuntimeError("shard failed")
        return real(self, dec, prompt_ids, *args)

    monkeypatch.setattr(FastEngine, "_decode", flaky)
    with pytest.raises(RuntimeError, match="shard failed"):
        engine.generate(
            natural_model(tokenizer), ids_of(tokenizer), 8, settings(tokenizer), torch.Generator().manual_seed(0)
        )
    assert torch.get_num_threads() == 2


def test_shards_are_validated():
    with pytest.raises(ValueError, match="shards must be >= 0"):
        FastEngine(shards=-1)
    with pytest.raises(ValueError, match="need the 'ascent' backend"):
        make_engine("hf", shards=2)
    assert make_engine("ascent", shards=3).shards == 3
