"""Explorers (ascent/rollout/explorers.py): parameter noise restores the weights bit for bit and changes the
samples; prefix and exit force a stored trace's prefix out of the loss and keep groups intact; replay swaps a
kept success only into all-failed groups; branch forces each root's prefix up to its least likely token; every
explorer's state makes the next batch reproducible."""

from __future__ import annotations

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.data.samplers import Draw
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.explorers import (
    EXPLORERS,
    BranchParams,
    ExplorerContext,
    ParamNoiseParams,
    PrefixParams,
    Trace,
    TraceStore,
    prefix_of,
)

ROWS = [{"prompt": p, "answer": a} for p, a in [("12+34=", "46"), ("7+8=", "15"), ("99+1=", "100"), ("5+5=", "10")]]
N = 4


def context(policy, tokenizer, rows=ROWS, max_new_tokens=8) -> ExplorerContext:
    encoder, engine = PromptEncoder(tokenizer), make_engine("ascent")
    s = SamplingSettings(max_new_tokens=max_new_tokens, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    collector = SingleTurnCollector(policy, rows, encoder, engine, s, N)
    return ExplorerContext(collector, policy, rows, encoder, engine, s, N, seed=0)


def make(name, ctx, spec=""):
    return EXPLORERS.resolve(f"{name}({spec})" if spec else name)(ctx)


def completion(ctx, batch, i):
    """(completion ids, their mask, their sampled log-probs) of sequence i."""
    start, end = len(ctx.encoder(batch.prompts[i])), int(batch.attention_mask[i].sum())
    return (
        batch.input_ids[i, start:end].tolist(),
        batch.completion_mask[i, start:end],
        batch.sampled_logprobs[i, start:end],
    )


def same_batch(a, b) -> bool:
    return (
        torch.equal(a.input_ids, b.input_ids)
        and torch.equal(a.completion_mask, b.completion_mask)
        and torch.equal(a.sampled_logprobs, b.sampled_logprobs)
        and torch.equal(a.group_index, b.group_index)
        and a.completions == b.completions
    )


def seeded_rewards(batch, succeed) -> torch.Tensor:
    """1.0 where succeed(sequence index, row) else 0.0."""
    return torch.tensor([float(succeed(i, int(r))) for i, r in enumerate(batch.row_index.tolist())])


def all_valid(batch) -> torch.Tensor:
    return torch.ones(len(batch), dtype=torch.bool)


def test_params_are_checked():
    with pytest.raises(ValueError, match="sigma"):
        ParamNoiseParams(sigma=0.0)
    with pytest.raises(ValueError, match="min_frac"):
        PrefixParams(min_frac=0.8, max_frac=0.5)
    assert set(EXPLORERS.names()) >= {"plain", "param_noise", "prefix", "exit", "replay"}


def test_prefix_of_and_bounded_store():
    assert prefix_of([1, 2, 3, 4, 5], 0.4, 10) == [1, 2]
    assert prefix_of([1, 2, 3, 4, 5], 0.9, 3) == [1, 2]  # leaves one token to sample
    store = TraceStore(per_row=2, max_rows=2)
    for row, toks in [(0, [1]), (0, [2]), (0, [2]), (0, [3]), (1, [4]), (2, [5])]:
        store.add(row, Trace(toks))
    assert 0 not in store.rows  # the row stored to longest ago left
    assert [t.tokens for t in store.get(1)] == [[4]] and len(store) == 2
    by_priority = TraceStore(per_row=2, max_rows=9, by_priority=True)
    for toks, pr in [([1], 0.5), ([2], 0.1), ([3], 0.3)]:
        by_priority.add(0, Trace(toks, priority=pr))
    assert [t.tokens for t in by_priority.get(0)] == [[1], [3]]


def test_param_noise_restores_weights_bitwise_and_changes_samples(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    draw = Draw([0, 1, 2, 3])
    plain = make("plain", ctx).collect(draw, torch.Generator().manual_seed(5))
    explorer = make("param_noise", ctx, "sigma=0.5")
    noisy = explorer.collect(draw, torch.Generator().manual_seed(5))
    after = tiny_policy.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # bit for bit
    assert not torch.equal(plain.input_ids, noisy.input_ids)
    assert torch.equal(plain.row_index, noisy.row_index)
    again = make("plain", ctx).collect(draw, torch.Generator().manual_seed(5))
    assert same_batch(plain, again)  # the clean policy is back
    assert explorer.metrics()["explore/noise_sigma"] == 0.5
    # the recorded log-probs are the noisy policy's: they differ from the clean policy's on the same tokens
    assert not torch.allclose(noisy.sampled_logprobs, plain.sampled_logprobs)


def test_param_noise_moves_a_fresh_lora_policy(tiny_policy, tokenizer):
    # at the start of a LoRA run B = 0: noise on the adapters would leave W + BA (and the samples) unchanged
    from ascent.config.schema import LoraConfig, ModelConfig
    from ascent.policy.model import Policy, add_lora

    lora = add_lora(tiny_policy.model, ModelConfig(lora=LoraConfig(enabled=True, r=4, alpha=8)))
    policy = Policy(model=lora, tokenizer=tokenizer)
    ctx = context(policy, tokenizer)
    before = {k: v.clone() for k, v in lora.state_dict().items()}
    draw = Draw([0, 1, 2, 3])
    plain = make("plain", ctx).collect(draw, torch.Generator().manual_seed(5))
    noisy = make("param_noise", ctx, "sigma=0.5").collect(draw, torch.Generator().manual_seed(5))
    assert not torch.allclose(noisy.sampled_logprobs, plain.sampled_logprobs)  # the noisy policy differs
    after = lora.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # restored bit for bit, base weights included


def test_param_noise_share_keeps_every_group(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("param_noise", ctx, "sigma=0.5,share=0.5")
    batch = explorer.collect(Draw([0, 1, 2, 3]), torch.Generator().manual_seed(1))
    assert explorer.metrics()["explore/noisy_groups"] == 2.0
    assert sorted(batch.row_index.tolist()) == sorted([0, 1, 2, 3] * N)
    assert batch.group_index.bincount().tolist() == [N] * 4


def test_param_noise_adaptive_sigma_follows_diversity(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("param_noise", ctx, "sigma=0.01,target_diversity=1.0,adapt=2.0")
    batch = explorer.collect(Draw([0]), torch.Generator().manual_seed(0))
    batch.completions = ["same"] * len(batch)  # no diversity: sigma goes up
    explorer.observe(batch, torch.zeros(len(batch)), all_valid(batch))
    assert explorer.sigma == pytest.approx(0.02)


def scored(explorer, batch, rewards, valid=None):
    """The trainer's order after scoring: amend, then observe; returns the amended round."""
    valid = all_valid(batch) if valid is None else valid
    components = rewards[:, None].clone()  # (N, 1): one reward
    batch, rewards, valid, components = explorer.amend(batch, rewards, valid, components)
    explorer.observe(batch, rewards, valid)
    return batch, rewards, valid, components


def store_successes(ctx, explorer, draw, seed=0, succeed=lambda i, row: i % N == 0):
    batch = make("plain", ctx).collect(draw, torch.Generator().manual_seed(seed))
    rewards = seeded_rewards(batch, succeed)
    scored(explorer, batch, rewards)
    return batch, rewards


def test_prefix_forces_a_stored_success_out_of_the_loss(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("prefix", ctx, "share=0.5")
    first, _ = store_successes(ctx, explorer, Draw([0, 1]))  # the first sample of rows 0 and 1 succeeded
    stored = {r: [t.tokens for t in explorer.store.get(r)] for r in (0, 1)}
    assert stored == {0: [completion(ctx, first, 0)[0]], 1: [completion(ctx, first, N)[0]]}
    batch = explorer.collect(Draw([0, 2, 1]), torch.Generator().manual_seed(1))
    assert batch.group_index.bincount().tolist() == [N, N, N]  # groups intact: one group per prompt
    for g, row in enumerate([0, 2, 1]):
        assert set(batch.row_index[batch.group_index == g].tolist()) == {row}
    forced_rows = 0
    for i in range(len(batch)):
        ids, mask, logprobs = completion(ctx, batch, i)
        assert batch.completions[i] == tokenizer.decode(ids, skip_special_tokens=True)  # prefix + suffix
        forced = int((mask == 0).sum())
        assert torch.all(mask[:forced] == 0) and torch.all(mask[forced:] == 1)  # forced, then sampled
        assert torch.all(logprobs[:forced] == 0) and torch.all(logprobs[forced:] < 0)
        if forced:
            forced_rows += 1
            row = int(batch.row_index[i])
            assert row in (0, 1) and ids[:forced] == stored[row][0][:forced]
    assert forced_rows == 2 * (N // 2)  # share 0.5 of rows 0 and 1; row 2 has no success
    assert explorer.metrics()["explore/prefixed_groups"] == 2.0


def test_prefix_uses_a_reference_solution_field(tiny_policy, tokenizer):
    rows = [{"prompt": "12+34=", "solution": "46 46 46"}, {"prompt": "7+8="}]
    ctx = context(tiny_policy, tokenizer, rows=rows)
    explorer = make("prefix", ctx, "share=1.0,min_frac=0.5,max_frac=0.5")
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    for i in range(len(batch)):
        ids, mask, _ = completion(ctx, batch, i)
        forced = int((mask == 0).sum())
        if int(batch.row_index[i]) == 0:
            assert forced == 4 and batch.completions[i].startswith("46 4")
        else:
            assert forced == 0


def test_prefix_without_traces_is_plain(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    a = make("prefix", ctx).collect(Draw([0, 1]), torch.Generator().manual_seed(3))
    b = make("plain", ctx).collect(Draw([0, 1]), torch.Generator().manual_seed(3))
    assert same_batch(a, b)


def test_exit_keeps_only_mixed_outcome_rows(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("exit", ctx, "share=1.0")
    # row 0: all succeed, row 1: mixed, row 2: all fail
    store_successes(ctx, explorer, Draw([0, 1, 2]), succeed=lambda i, row: row == 0 or (row == 1 and i % 2 == 0))
    assert list(explorer.store.rows) == [1] and len(explorer.store.get(1)) >= 2
    assert all(t.priority == pytest.approx(0.25) for t in explorer.store.get(1))  # variance of 0/1 at p = 0.5
    kept = [t.tokens for t in explorer.store.get(1)]
    batch = explorer.collect(Draw([0, 1, 2]), torch.Generator().manual_seed(2))
    assert batch.group_index.bincount().tolist() == [N, N, N]
    for i in range(len(batch)):
        ids, mask, _ = completion(ctx, batch, i)
        forced = int((mask == 0).sum())
        if int(batch.row_index[i]) == 1:  # the whole group restarts from one partial history
            assert forced > 0 and any(ids[:forced] == k[:forced] for k in kept)
            assert torch.all(mask[forced:] == 1)
        else:
            assert forced == 0
    assert explorer.metrics()["explore/restarted_groups"] == 1.0


def test_replay_swaps_a_success_only_into_all_failed_groups(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("replay", ctx)
    first, _ = store_successes(ctx, explorer, Draw([0, 1]))  # one success kept for rows 0 and 1
    kept = {r: explorer.store.get(r)[0] for r in (0, 1)}
    assert kept[0].tokens == completion(ctx, first, 0)[0]
    assert torch.equal(torch.tensor(kept[0].logprobs), completion(ctx, first, 0)[2])
    fresh_batch = explorer.collect(Draw([0, 1, 2]), torch.Generator().manual_seed(7))
    fresh = fresh_batch.input_ids.clone()
    fresh_rewards = seeded_rewards(fresh_batch, lambda i, row: row == 1 and i % N == 1)  # rows 0, 2 fail; 2 has none
    batch, rewards, valid, components = scored(explorer, fresh_batch, fresh_rewards.clone())
    assert explorer.metrics()["explore/replayed"] == 1.0
    assert torch.equal(fresh_batch.input_ids, fresh) and float(fresh_rewards.sum()) == 1.0  # the inputs untouched
    assert torch.equal(components[:, 0], rewards)  # the replayed sample's components came with it
    swapped = [i for i in range(len(batch)) if completion(ctx, batch, i)[0] == kept[0].tokens]
    assert len(swapped) >= 1 and all(int(batch.row_index[i]) == 0 for i in swapped)
    i = next(i for i in swapped if float(rewards[i]) == 1.0)
    ids, mask, logprobs = completion(ctx, batch, i)
    assert torch.all(mask == 1) and torch.equal(logprobs, torch.tensor(kept[0].logprobs))
    assert batch.completions[i] == tokenizer.decode(kept[0].tokens, skip_special_tokens=True)
    assert float(rewards[batch.row_index == 0].sum()) == 1.0  # one sample of the failed group swapped
    assert float(rewards[batch.row_index == 1].sum()) == 1.0  # the group with a success is untouched
    for j in range(len(batch)):
        if int(batch.row_index[j]) != 0:
            assert torch.equal(batch.input_ids[j, : fresh.shape[1]], fresh[j])


def one_round(ctx, explorer, draw, seed_gen, succeed, round_):
    batch = explorer.collect(draw, seed_gen)
    rewards = seeded_rewards(batch, lambda i, row: succeed(i, row, round_))
    return scored(explorer, batch, rewards)[0]


@pytest.mark.parametrize(
    "name,spec",
    [
        ("param_noise", "sigma=0.3,share=0.5,target_diversity=0.9"),
        ("prefix", ""),
        ("exit", "share=0.7"),
        ("replay", ""),
        ("branch", ""),
    ],
)
def test_state_dict_round_trip_reproduces_the_next_batch(tiny_policy, tokenizer, name, spec):
    ctx = context(tiny_policy, tokenizer)
    succeed = lambda i, row, r: (i + row + r) % 3 == 0 and (row != 0 or r == 0)  # noqa: E731 row 0 fails later
    draw = Draw([0, 1, 2, 3])
    explorer, gen = make(name, ctx, spec), torch.Generator().manual_seed(11)
    one_round(ctx, explorer, draw, gen, succeed, 0)
    one_round(ctx, explorer, draw, gen, succeed, 1)
    state, gen_state = explorer.state_dict(), gen.get_state()
    expected = one_round(ctx, explorer, draw, gen, succeed, 2)
    resumed, gen2 = make(name, ctx, spec), torch.Generator()
    resumed.load_state_dict(state)
    gen2.set_state(gen_state)
    got = one_round(ctx, resumed, draw, gen2, succeed, 2)
    assert same_batch(expected, got)
    assert resumed.state_dict() == explorer.state_dict()
    used = {"prefix": "explore/prefixed_groups", "exit": "explore/restarted_groups", "replay": "explore/replayed"}
    used["branch"] = "explore/branches"
    if name in used:  # the round exercised the explorer's own path, not only the plain one
        assert resumed.metrics()[used[name]] > 0


def recomputed_logprobs(policy, batch, temperature) -> torch.Tensor:
    """(N, T) log-probs of each token under softmax(logits / temperature) of `policy`, by a plain forward."""
    with torch.no_grad():
        logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits  # (N, T, V)
    lp = torch.log_softmax(logits[:, :-1].float() / temperature, -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    return torch.nn.functional.pad(lp, (1, 0))  # (N, T), aligned with input_ids


def test_probe_samples_part_of_each_group_hotter_and_records_that_distribution(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("probe", ctx, "share=0.5, temperature=2.5")
    batch = explorer.collect(Draw([0, 1, 2]), torch.Generator().manual_seed(3))
    assert len(batch) == 3 * N and torch.bincount(batch.group_index).tolist() == [N, N, N]
    for g in range(3):  # one prompt per group
        assert len({p for p, gi in zip(batch.prompts, batch.group_index.tolist()) if gi == g}) == 1
    assert explorer.metrics() == {"explore/probe_samples": 3 * N / 2}
    mask = batch.completion_mask.bool()
    cold, hot = recomputed_logprobs(tiny_policy, batch, 1.0), recomputed_logprobs(tiny_policy, batch, 2.5)
    is_hot = [torch.allclose(batch.sampled_logprobs[i][mask[i]], hot[i][mask[i]], atol=1e-4) for i in range(len(batch))]
    is_cold = [
        torch.allclose(batch.sampled_logprobs[i][mask[i]], cold[i][mask[i]], atol=1e-4) for i in range(len(batch))
    ]
    assert sum(is_hot) == 3 * N // 2 and sum(is_cold) == 3 * N // 2  # each sample carries its sampler's log-probs
    assert not any(h and c for h, c in zip(is_hot, is_cold))
    off = make("probe", ctx, "share=0").collect(Draw([0, 1]), torch.Generator().manual_seed(3))
    plain = make("plain", ctx).collect(Draw([0, 1]), torch.Generator().manual_seed(3))
    assert same_batch(off, plain)
    with pytest.raises(Exception, match="temperature"):
        make("probe", ctx, "temperature=0")


def test_branch_continues_each_root_before_its_least_likely_token(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("branch", ctx, "root_share=0.5")
    batch = explorer.collect(Draw([0, 2, 1]), torch.Generator().manual_seed(4))
    assert batch.group_index.tolist() == [g for g in range(3) for _ in range(N)]  # groups intact, contiguous
    assert [batch.row_index[g * N].item() for g in range(3)] == [0, 2, 1]
    for g in range(3):  # one prompt per group
        assert len({p for p, gi in zip(batch.prompts, batch.group_index.tolist()) if gi == g}) == 1
    cold = recomputed_logprobs(tiny_policy, batch, 1.0)
    prefixes = []
    for g in range(3):
        roots = [completion(ctx, batch, g * N + j) for j in range(2)]  # r = 2 roots first, then one branch each
        for ids, mask, logprobs in roots:
            assert torch.all(mask == 1) and torch.all(logprobs < 0)  # fully sampled
        for b in range(2):
            i = g * N + 2 + b
            root_ids, _, root_lp = roots[b % 2]  # round-robin over the roots
            c = max(1, int(torch.argmin(root_lp[:-1])))  # lowest sampled log-prob, last token excluded, min_prefix 1
            ids, mask, logprobs = completion(ctx, batch, i)
            assert c >= 1 and ids[:c] == root_ids[:c]  # the root's prefix up to (not including) that token
            assert torch.all(mask[:c] == 0) and torch.all(logprobs[:c] == 0)
            assert torch.all(mask[c:] == 1) and torch.all(logprobs[c:] < 0)
            assert batch.completions[i] == tokenizer.decode(ids, skip_special_tokens=True)
            prefixes.append(c)
    on = batch.completion_mask.bool()
    assert torch.allclose(batch.sampled_logprobs[on], cold[on], atol=1e-4)  # the policy's own sampling log-probs
    assert explorer.metrics() == {"explore/branches": 6.0, "explore/branch_point_mean": sum(prefixes) / 6}


def test_branch_edge_cases(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("branch", ctx, "root_share=0")  # one root, every other sample branches from it
    batch = explorer.collect(Draw([1]), torch.Generator().manual_seed(2))
    root_ids, root_mask, root_lp = completion(ctx, batch, 0)
    c = max(1, int(torch.argmin(root_lp[:-1])))
    assert torch.all(root_mask == 1) and explorer.metrics()["explore/branches"] == N - 1
    for i in range(1, N):
        ids, mask, _ = completion(ctx, batch, i)
        assert ids[:c] == root_ids[:c] and int((mask == 0).sum()) == c
    mixed = explorer.collect(Draw([0, 1], samples=[3, 1]), torch.Generator().manual_seed(2))
    assert mixed.group_index.tolist() == [0, 0, 0, 1] and explorer.metrics()["explore/branches"] == 2.0
    for spec, draw in [("", Draw([0, 1], samples=[1, 1])), ("root_share=1", Draw([0, 1]))]:  # no branch: plain
        got = make("branch", ctx, spec).collect(draw, torch.Generator().manual_seed(3))
        assert same_batch(got, make("plain", ctx).collect(draw, torch.Generator().manual_seed(3)))
    with pytest.raises(ValueError, match="root_share"):
        BranchParams(root_share=1.5)
    with pytest.raises(ValueError, match="min_prefix"):
        BranchParams(min_prefix=-1)


def test_samplers_learn_from_fresh_samples_not_replayed_successes(tiny_policy, tokenizer):
    from ascent.data.samplers import SAMPLERS, SamplerContext
    from ascent.rewards.runner import RewardResult
    from ascent.trainer.rl import observe_round

    ctx = context(tiny_policy, tokenizer)
    explorer = make("replay", ctx)
    store_successes(ctx, explorer, Draw([0, 1]))  # a kept success for rows 0 and 1
    sampler = SAMPLERS.resolve("pass_rate")(SamplerContext(ROWS, 0, N, 10))
    fresh = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(7))
    rewards = seeded_rewards(fresh, lambda i, row: False)  # every fresh sample failed
    scores = RewardResult(rewards, all_valid(fresh), rewards[:, None].clone(), {})
    batch, amended = observe_round(explorer, sampler, fresh, scores)
    assert float(amended.rewards.sum()) == 2.0  # replay swapped a success into each failed group
    assert sampler.rates.est[0] == 0.0 and sampler.rates.est[1] == 0.0  # the sampler saw the policy's 0 of 4
