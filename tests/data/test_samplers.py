"""The sampler registry's contract: Draw checks, the uniform sampler, variable group sizes in the collector."""

from __future__ import annotations

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.data.sampler import RowSampler
from ascent.data.samplers import SAMPLERS, Draw, SamplerContext, group_rewards
from ascent.rollout.backends import make_engine
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.types import SamplingSettings


def test_draw_rejects_mismatched_or_empty_sample_counts():
    with pytest.raises(ValueError, match="2 sample counts for 3 prompts"):
        Draw([1, 2, 3], [4, 4])
    with pytest.raises(ValueError, match=">= 1 sample"):
        Draw([1, 2], [4, 0])


def test_uniform_sampler_is_the_row_sampler_and_resumes():
    rows = [{"prompt": str(i)} for i in range(10)]
    s = SAMPLERS.resolve("uniform")(SamplerContext(rows, seed=3, samples_per_prompt=4))
    ref = RowSampler(10, 3)
    draws = [s.next(4).indices for _ in range(3)]
    assert draws == [ref.next(4) for _ in range(3)]
    state = s.state_dict()
    again = SAMPLERS.resolve("uniform")(SamplerContext(rows, seed=3, samples_per_prompt=4))
    again.load_state_dict(state)
    assert again.next(7).indices == s.next(7).indices


def test_group_rewards_skips_invalid_samples():
    out = group_rewards(torch.tensor([0, 0, 1]), torch.tensor([1.0, 0.0, 2.0]), torch.tensor([True, False, True]))
    assert out == {0: [1.0], 1: [2.0]}


def test_collector_samples_groups_of_different_sizes(tiny_policy, tokenizer):
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(5)]
    settings = SamplingSettings(max_new_tokens=3, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    enc = PromptEncoder(tokenizer)
    collector = SingleTurnCollector(tiny_policy, rows, enc, make_engine("hf"), settings, n=4)
    batch = collector.collect([0, 3, 4], torch.Generator().manual_seed(0), samples=[2, 5, 2])
    assert len(batch) == 9
    sizes = torch.bincount(batch.group_index).tolist()
    rows_of_groups = [int(batch.row_index[batch.group_index == g][0]) for g in range(3)]
    assert dict(zip(rows_of_groups, sizes)) == {0: 2, 4: 2, 3: 5}
    for g in range(3):  # every sequence of a group answers the same prompt
        assert len({p for p, gi in zip(batch.prompts, batch.group_index.tolist()) if gi == g}) == 1
    same = collector.collect([0, 3], torch.Generator().manual_seed(0), samples=[4, 4])
    plain = collector.collect([0, 3], torch.Generator().manual_seed(0))
    assert torch.equal(same.input_ids, plain.input_ids)


# The adaptive samplers: pass_rate, staged, coba, rapo_prune.


def make(spec, rows=16, n=4, total_steps=0, seed=0, fields=None):
    data = [{"prompt": str(i), **(fields(i) if fields else {})} for i in range(rows)]
    return SAMPLERS.resolve(spec)(SamplerContext(data, seed=seed, samples_per_prompt=n, total_steps=total_steps))


def feed(sampler, groups):
    """observe() one scored round: {row: [reward, ...]}."""
    rows = [r for r, xs in groups.items() for _ in xs]
    rewards = [x for xs in groups.values() for x in xs]
    sampler.observe(torch.tensor(rows), torch.tensor(rewards), torch.ones(len(rows), dtype=torch.bool))


EASY, HARD, MIXED = [1.0] * 4, [0.0] * 4, [1.0, 0.0, 1.0, 0.0]


def test_pass_rate_skips_all_correct_and_all_wrong_rows_and_keeps_mixed_and_unseen():
    s = make("pass_rate(revisit=0.0)")
    feed(s, {**{i: EASY for i in range(4)}, **{i: HARD for i in range(4, 8)}, **{i: MIXED for i in range(8, 12)}})
    for _ in range(3):  # every draw, in every epoch: only the mixed rows (8..11) and the unseen ones (12..15)
        assert sorted(s.next(8).indices) == list(range(8, 16))
    m = s.metrics()
    assert m["sampler/pool_size"] == 8 and m["sampler/skipped"] >= 1 and m["sampler/mean_pass_rate"] == 0.5
    feed(s, {0: HARD})  # the EMA (weight 0.5) moves row 0 from 1.0 to 0.5: eligible again
    assert s.rates.est[0] == 0.5 and 0 in s.next(9).indices
    few = make("pass_rate(revisit=0.0)", rows=4)  # too few eligible rows: topped up with the nearest skipped
    feed(few, {0: EASY, 1: [1.0, 1.0, 1.0, 0.0], 2: MIXED})
    assert sorted(few.next(3).indices) == [1, 2, 3]


def test_pass_rate_revisits_skipped_rows_at_the_configured_rate():
    s = make("pass_rate(revisit=0.25)")
    feed(s, {i: EASY for i in range(8)})
    drawn = [i for _ in range(200) for i in s.next(4).indices]
    easy = sum(i < 8 for i in drawn) / len(drawn)
    assert 0.05 < easy < 0.35  # easy rows come back now and then, far less often than the 8 eligible ones


def test_staged_draws_stage_by_stage_from_a_difficulty_field():
    s = make("staged(stages=3)", rows=12, total_steps=6, fields=lambda i: {"difficulty": i % 3})
    levels = [sorted({i % 3 for i in s.next(2).indices}) for _ in range(6)]
    assert levels == [[0], [0], [1], [1], [2], [2]]
    assert s.metrics()["sampler/stage"] == 2.0 and s.metrics()["sampler/stage_rows"] == 4.0
    with pytest.raises(ValueError, match="1 of 3 rows lack the field 'difficulty'"):
        SAMPLERS.resolve("staged")(SamplerContext([{"difficulty": 1}, {"difficulty": 2}, {}], 0, 4))


def test_staged_by_pass_rate_starts_easy_and_advances_at_the_threshold():
    s = make("staged(stages=2, advance_at=0.5)", rows=8)  # no difficulty field, no step count: by pass rate
    feed(s, {**{i: [0.0, 0.0, 0.0, 1.0] for i in range(4)}, **{i: HARD for i in range(4, 8)}})
    assert sorted(s.next(4).indices) == [0, 1, 2, 3]  # the easiest half (pass rate 0.25 < 0.5: stay)
    assert s.metrics()["sampler/stage"] == 0.0
    feed(s, {i: EASY for i in range(4)})  # EMA 0.625 >= 0.5: the next draw moves on to the harder half
    assert sorted(s.next(4).indices) == [4, 5, 6, 7]
    assert s.metrics()["sampler/stage"] == 1.0


def test_coba_signal_probability_and_greedy_allocation_by_hand():
    from math import comb

    from ascent.data.samplers import allocate, signal_prob

    for n in range(1, 8):  # Beta(1, 1): E[p^n] = 1/(n+1); Beta(9, 1): E[p^n] = 9/(9+n), E[(1-p)^n] = 1/C(9+n, n)
        assert signal_prob(1.0, 1.0, n) == pytest.approx((n - 1) / (n + 1))
        assert signal_prob(9.0, 1.0, n) == pytest.approx(1 - 9 / (9 + n) - 1 / comb(9 + n, n))
    # budget 12, 2..8 each: the 6 extra samples go, by gain, to A (1/6), A (1/10), B (0.0818), A (1/15),
    # B (0.0608), B (0.0504); then A's next gain (1/21 = 0.0476) and C's (0.0452) lose: [5, 5, 2]
    beliefs = [(1.0, 1.0), (9.0, 1.0), (1.0, 19.0)]
    assert allocate(beliefs, 12, 2, 8) == [5, 5, 2]
    assert allocate(beliefs, 12, 2, 4) == [4, 4, 4]  # capped: the rest goes to the next best
    assert allocate(beliefs, 6, 2, 8) == [2, 2, 2]
    with pytest.raises(ValueError, match="budget of 30"):
        allocate(beliefs, 30, 2, 8)


def test_coba_gives_uncertain_prompts_more_samples_within_the_exact_budget():
    s = make("coba(decay=1.0)", rows=6, n=4)
    first = s.next(6)
    assert first.samples == [4] * 6  # nothing observed: equal beliefs, the budget split evenly
    for _ in range(3):
        feed(s, {0: EASY, 1: EASY, 2: HARD, 3: HARD, 4: MIXED, 5: MIXED})
    draw = s.next(6)
    got = dict(zip(draw.indices, draw.samples))
    assert sum(draw.samples) == 24 and all(2 <= x <= 8 for x in draw.samples)
    assert min(got[4], got[5]) > max(got[0], got[1], got[2], got[3])
    assert s.varies_samples and s.metrics()["sampler/samples_max"] == max(draw.samples)


def test_rapo_prune_removes_saturated_prompts_and_readmits_them():
    s = make("rapo_prune(window=2, replay=0.0)", rows=8)
    feed(s, {0: EASY, 1: EASY, 2: EASY, 3: EASY})
    feed(s, {0: EASY, 1: EASY, 2: [1.0, 1.0, 0.0, 1.0]})  # rows 0, 1: solved twice in a row; 2: reset; 3: once
    assert sorted(s.next(6).indices) == [2, 3, 4, 5, 6, 7]
    assert s.metrics()["sampler/pool_size"] == 6.0 and s.metrics()["sampler/pruned"] == 2.0
    always = make("rapo_prune(window=1, replay=1.0)", rows=4)
    feed(always, {0: EASY})
    assert 0 in always.next(4).indices and always.metrics()["sampler/replayed"] == 1.0
    feed(always, {0: MIXED})  # the replayed prompt failed a sample: back in the pool
    assert always.metrics()["sampler/pool_size"] == 4.0
    sometimes = make("rapo_prune(window=1, replay=0.2)", rows=8)
    feed(sometimes, {i: EASY for i in range(4)})
    drawn = [i for _ in range(200) for i in sometimes.next(2).indices]
    assert 0 < sum(i < 4 for i in drawn) < 0.3 * len(drawn)


@pytest.mark.parametrize("spec", ["pass_rate(revisit=0.3)", "staged(stages=2)", "coba", "rapo_prune(replay=0.3)"])
def test_adaptive_samplers_resume_exactly(spec):
    import io

    def run(sampler, draws, start):
        out = []
        for d in range(start, start + draws):
            draw = sampler.next(3)
            out.append((draw.indices, draw.samples, sampler.metrics()))
            feed(sampler, {r: [float((r * 7 + d + j) % 3 == 0) for j in range(4)] for r in draw.indices})
        return out

    full = make(spec, rows=10, total_steps=8)
    expected = run(full, 8, 0)
    half = make(spec, rows=10, total_steps=8)
    run(half, 4, 0)
    buf = io.BytesIO()
    torch.save(half.state_dict(), buf)
    resumed = make(spec, rows=10, total_steps=8)
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=False))
    assert run(resumed, 4, 4) == expected[4:]
