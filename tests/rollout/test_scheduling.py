"""Length-aware scheduling in the ascent engine: a cap on active sequences with continuous batching and a
longest-predicted-first queue. Neither the cap nor the order may change what a sequence samples."""

from __future__ import annotations

import pytest
import torch

from ascent.policy.model import token_logprobs
from ascent.rollout import ENGINES, SamplingSettings, assemble, make_engine
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.scheduling import LengthPredictor, RequestQueue

PROMPTS = ["12+34=", "7+8=", "99+1=", "5=", "1+2+3="]


def ids_of(tokenizer):
    return [tokenizer(p)["input_ids"] for p in PROMPTS]


def natural_model(tokenizer):
    """Random init, ~1/17 EOS chance per token: lengths vary a lot within and across groups."""
    from tests.conftest import tiny_qwen

    return tiny_qwen(tokenizer, seed=5, hidden=64, layers=2)


def settings(tokenizer, **kw):
    return SamplingSettings(
        max_new_tokens=kw.pop("max_new_tokens", 40), eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw
    )


def same(a, b):
    """Identical tokens, lengths and EOS flags; log-probs equal up to float rounding (a row's position in
    the batch and the batch's size may change the last bits of a matmul on CPU)."""
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths) and torch.equal(a.finished, b.finished)
    assert torch.allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_cap_and_order_do_not_change_samples(temperature, tokenizer):
    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer, temperature=temperature)
    ref = FastEngine().generate(model, ids, 8, s, torch.Generator().manual_seed(7))
    if temperature:
        assert 0.3 < float(ref.finished.float().mean()) < 1.0 and int(ref.lengths.max()) > 3 * int(ref.lengths.min())
    for engine in (
        FastEngine(max_active_sequences=5),
        FastEngine(max_active_sequences=5, schedule="fifo"),
        FastEngine(max_active_sequences=13),
    ):
        same(ref, engine.generate(model, ids, 8, s, torch.Generator().manual_seed(7)))
    # with a predictor trained on the same prompts (reversed history: longest-first order differs from fifo)
    trained = FastEngine(max_active_sequences=5)
    history = trained.generate(model, ids, 8, s, torch.Generator().manual_seed(1))
    predicted = [trained.predictor.predict(p) for p in ids]
    assert predicted == pytest.approx(history.lengths.reshape(len(ids), 8).float().mean(-1).tolist())
    if temperature:  # (greedy: every group is 40 tokens long, a tie that longest-first breaks in fifo order)
        assert predicted != sorted(predicted, reverse=True), "longest-first must pop the groups out of fifo order"
    same(ref, trained.generate(model, ids, 8, s, torch.Generator().manual_seed(7)))
    assert trained.last_stats["mean_active"] <= 5


def test_capped_sampled_logprobs_match_teacher_forced(tokenizer):
    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer, temperature=0.8, max_new_tokens=24)
    engine = make_engine("ascent", max_active_sequences=6)
    for seed in (0, 1):  # the second call is ordered by the first call's lengths
        gen = engine.generate(model, ids, 4, s, torch.Generator().manual_seed(seed))
        batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)
        with torch.no_grad():
            lp = token_logprobs(model, batch.input_ids, batch.attention_mask, 0.8)
        assert float(((lp - batch.sampled_logprobs).abs() * batch.completion_mask).max()) <= 1e-4
        assert torch.equal(batch.completion_mask.sum(-1).long(), gen.lengths)


def test_capped_greedy_equals_hf_generate(tokenizer):
    model, ids = natural_model(tokenizer), ids_of(tokenizer)
    s = settings(tokenizer, temperature=0.0, max_new_tokens=12)
    ours = make_engine("ascent", max_active_sequences=3).generate(model, ids, 2, s, None)
    hf = make_engine("hf").generate(model, ids, 2, s, None)
    assert torch.equal(ours.tokens, hf.tokens) and torch.equal(ours.lengths, hf.lengths)


def test_cap_runs_fewer_rows_for_more_steps(tokenizer):
    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer)
    free, capped = FastEngine(), FastEngine(max_active_sequences=8)
    free.generate(model, ids, 8, s, torch.Generator().manual_seed(0))
    capped.generate(model, ids, 8, s, torch.Generator().manual_seed(0))
    assert capped.last_stats["mean_active"] <= 8 < free.last_stats["mean_active"]
    assert capped.last_stats["decode_steps"] > free.last_stats["decode_steps"]


def test_predictor_is_updated_after_each_call(tokenizer):
    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer)
    engine = make_engine("ascent", max_active_sequences=4)
    gen = engine.generate(model, ids, 8, s, torch.Generator().manual_seed(0))
    means = gen.lengths.reshape(len(ids), 8).float().mean(-1)
    for p, m in zip(ids, means.tolist()):
        assert engine.predictor.predict(p) == pytest.approx(m)
    gen2 = engine.generate(model, ids, 8, s, torch.Generator().manual_seed(1))
    d = engine.predictor.decay
    expected = d * means + (1 - d) * gen2.lengths.reshape(len(ids), 8).float().mean(-1)
    assert engine.predictor.predict(ids[0]) == pytest.approx(float(expected[0]))


def test_queue_orders_longest_first_with_sibling_context():
    q = RequestQueue(groups=3, n=2, history=[5.0, 50.0, None], longest=True, unknown=100.0)
    assert q.pop(2) == [4, 5]  # the unknown group counts as the longest
    assert q.pop(1) == [2]  # then group 1 (history 50), sample 0 first
    q.observe_finished([2], [1])  # group 1's sample finished at 1: (2 x 50 + 1) / 3 = 33.7, still above group 0
    assert q.estimate(1) == pytest.approx(101 / 3)
    q.observe_finished([4, 5], [1, 1])
    q.observe_running([], [])
    assert q.pop(1) == [3]
    fifo = RequestQueue(groups=2, n=2, history=[1.0, 9.0], longest=False, unknown=10.0)
    assert fifo.pop(4) == [0, 1, 2, 3]


def test_queue_short_siblings_demote_a_group():
    q = RequestQueue(groups=2, n=4, history=[30.0, 20.0], longest=True, unknown=100.0)
    assert q.pop(2) == [0, 1]
    q.observe_finished([0, 1], [2, 2])  # (2 x 30 + 4) / 4 = 16 < 20
    assert q.pop(1) == [4]


def test_queue_running_siblings_raise_the_estimate():
    q = RequestQueue(groups=2, n=3, history=[10.0, 20.0], longest=True, unknown=100.0)
    assert q.pop(1) == [3]
    q.observe_running([3], [5])
    q.observe_running([0], [40])  # replaces the running set: group 0 has a sibling 40 tokens long, unfinished
    assert q.pop(1) == [0]


@pytest.mark.parametrize("schedule", ["longest", "fifo"])
def test_simulator_matches_engine_steps(schedule, tokenizer):
    from ascent.rollout.scheduling import simulate

    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer)
    engine = FastEngine(max_active_sequences=6, schedule=schedule)
    engine.generate(model, ids, 8, s, torch.Generator().manual_seed(3))  # history for the second call
    history = [engine.predictor.predict(p) for p in ids] if schedule == "longest" else [None] * len(ids)
    gen = engine.generate(model, ids, 8, s, torch.Generator().manual_seed(4))
    queue = RequestQueue(len(ids), 8, history, schedule == "longest", unknown=float(s.max_new_tokens))
    assert simulate(gen.lengths.reshape(len(ids), 8).tolist(), 6, queue) == engine.last_stats["decode_steps"]


def test_predictor_keys_and_memory_bound():
    p = LengthPredictor(decay=0.0, max_prompts=2)
    p.update([[1], [2], [3]], [[4, 6], [1, 1], [2, 2]])
    assert p.predict([1]) is None and p.predict([2]) == 1.0 and p.predict([3]) == 2.0  # oldest forgotten
    assert LengthPredictor.key([1, 2]) == LengthPredictor.key((1, 2)) != LengthPredictor.key([2, 1])


def test_cap_is_validated(tokenizer):
    with pytest.raises(ValueError, match="max_active_sequences"):
        make_engine("ascent", max_active_sequences=-1)
    with pytest.raises(ValueError, match="'ascent' and 'vllm'"):
        make_engine("hf", max_active_sequences=4)
    assert type(make_engine("cached", max_active_sequences=0)) is ENGINES.get("cached")  # 0 (no cap): any backend
    # 0 means no cap: the engine runs every row at once, exactly as an engine built without a cap
    model, ids, s = natural_model(tokenizer), ids_of(tokenizer), settings(tokenizer)
    uncapped, free = make_engine("ascent", max_active_sequences=0), FastEngine()
    for engine in (uncapped, free):
        engine.generate(model, ids, 8, s, torch.Generator().manual_seed(0))
    assert uncapped.last_stats == free.last_stats and uncapped.last_stats["mean_active"] > 8
