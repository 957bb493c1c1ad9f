"""Grouped speculative decoding (`rollout.speculative=seer_group`, ascent/rollout/speculative.py): the drafter's
proposals on hand-built sibling sequences, the same tokens as the engine without it (greedy and sampled, with
rejected drafts rolled back out of the KV cache), and a chi-square test that the sampled distribution of the
first two tokens is the policy's (temperature and top-p applied)."""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare

from ascent.config import ConfigError
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.ascent_engine import FastEngine
from ascent.rollout.sampling import filter_logits
from ascent.rollout.speculative import DRAFTERS, GroupDrafter, GroupDraftParams


def drafter(groups, prompts, **kw) -> GroupDrafter:
    return GroupDrafter(GroupDraftParams(**kw), groups, prompts)


def test_siblings_drafts_follow_the_group_and_only_the_group():
    d = drafter([0, 0, 1], [[1, 2], [1, 2], [1, 2]], min_match=2, ngram=3, min_score=0.0)
    d.extend(0, [5, 6, 7, 8])
    d.extend(1, [5, 6])
    assert d.propose(1, 3) == [7, 8]  # sibling 0 went 5 6 -> 7 8; the table has nothing after 7 8
    assert d.propose(1, 1) == [7]
    assert d.propose(2, 3) == []  # group 1 never saw 5 6 (and its own context, 1 2, has no continuation)
    d.extend(2, [9])
    assert d.propose(2, 2) == []
    assert d.propose(1, 0) == []


def test_drafts_take_the_most_frequent_continuation_and_stop_on_low_score():
    d = drafter([0, 0, 0, 0], [[3, 4]] * 4, min_match=1, ngram=2, min_score=0.5)
    d.extend(0, [1, 2, 7])
    d.extend(1, [1, 2, 7])
    d.extend(2, [1, 2, 9])
    d.extend(3, [1])
    # after "1 2": 7 twice, 9 once -> 7 with share 2/3 >= 0.5; then "2 7" is a dead end
    assert d.propose(3, 4) == [2, 7]
    strict = drafter([0, 0, 0, 0], [[3, 4]] * 4, min_match=1, ngram=2, min_score=0.7)
    for i, toks in enumerate([[1, 2, 7], [1, 2, 7], [1, 2, 9], [1]]):
        strict.extend(i, toks)
    assert strict.propose(3, 4) == [2]  # 1.0 * 2/3 < 0.7: the second token is not drafted
    ties = drafter([0, 0, 0], [[3]] * 3, min_match=1, ngram=1, min_score=0.0)
    ties.extend(0, [5, 8])
    ties.extend(1, [5, 6])
    ties.extend(2, [5])
    assert ties.propose(2, 1) == [6]  # 6 and 8 once each after 5: the lower id


def test_longest_context_wins_and_min_match_is_respected():
    d = drafter([0, 0], [[0], [0]], min_match=1, ngram=3, min_score=0.0)
    d.extend(0, [1, 2, 3, 4, 9, 2, 5])  # after "2": 3 once, 5 once; after "1 2": 3
    d.extend(1, [1, 2])
    assert d.propose(1, 1) == [3]
    long_only = drafter([0, 0], [[0], [0]], min_match=3, ngram=3, min_score=0.0)
    long_only.extend(0, [1, 2, 3])
    long_only.extend(1, [7, 2])
    assert long_only.propose(1, 2) == []  # "0 7 2" never seen; "2" alone is shorter than min_match


def test_a_group_whose_drafts_are_rejected_stops_drafting():
    prompts = [[1, 2, 1, 2, 1, 2]] * 3
    d = drafter([0, 0, 1], prompts, min_match=1, ngram=2, min_accept=0.3, warmup=4, prior=2.0)
    assert d.propose(0, 2) == [1, 2]
    d.record(0, 2, 0)
    assert d.propose(1, 2) == [1, 2]  # 2 verified < warmup
    d.record(1, 2, 0)
    # call rate (0 + 1) / (4 + 2) = 1/6; group 0: (0 + 2/6) / (4 + 2) < 0.3; group 1 (no drafts yet): 1/6
    assert d.propose(0, 2) == [] and d.propose(2, 2) == []
    d.record(2, 6, 6)  # a group whose drafts are accepted: call rate 7/12, group 1 (6 + 2 * 7/12) / 8 >= 0.3
    assert d.propose(2, 1) == [1]
    assert d.acceptance(0) == pytest.approx((0 + 2 * 7 / 12) / (4 + 2))
    assert d.propose(0, 1) == []  # still below: 0.19


def peaked(policy, scale: float = 25.0):
    """The tiny policy with its logits scaled: confident, repetitive outputs that drafts can predict."""
    with torch.no_grad():
        policy.model.lm_head.weight.mul_(scale)
    return policy


PROMPTS = ["12+12=", "7+7+7=", "99+1=", "5="]


def run(engine, policy, tokenizer, n, s, seed):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    return engine.generate(policy.model, ids, n, s, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shards", [1, 2])
def test_greedy_is_bitwise_the_engine_without_it(tiny_policy, tokenizer, shards):
    policy = peaked(tiny_policy)
    s = SamplingSettings(40, tokenizer.eos_token_id, tokenizer.pad_token_id, temperature=0.0)
    base = run(make_engine("ascent", shards=shards), policy, tokenizer, 4, s, 0)
    engine = make_engine("ascent", shards=shards, speculative="seer_group(budget=0)")
    spec = run(engine, policy, tokenizer, 4, s, 0)
    assert engine.last_stats["spec_accepted"] > 20  # drafts were proposed and accepted
    assert torch.equal(spec.tokens, base.tokens) and torch.equal(spec.lengths, base.lengths)
    assert torch.equal(spec.finished, base.finished)
    assert torch.allclose(spec.logprobs, base.logprobs, atol=1e-5)


@pytest.mark.parametrize(
    "kw, spec",
    [
        (dict(temperature=1.0), "seer_group(budget=0, min_score=0.0, warmup=1000000)"),
        (dict(temperature=1.3, top_p=0.9), "seer_group(budget=0, min_score=0.0, warmup=1000000)"),
        (dict(top_k=3), "seer_group(budget=0, min_score=0.0, warmup=1000000)"),
        (dict(temperature=1.0), "seer_group(budget=23, min_score=0.0, warmup=1000000)"),  # plain steps, then drafts
    ],
)
def test_sampled_tokens_are_those_of_the_engine_without_it(tiny_policy, tokenizer, kw, spec):
    """Same pre-drawn uniforms, same tokens: a rejected draft's KV columns are rolled back (the sequences go
    on for many tokens after rejections and still agree); with a budget, plain one-token steps (24 live rows
    > 23) and verify steps (once sequences have ended, on the unscaled model, which ends some) alternate."""
    policy = peaked(tiny_policy, 1.0 if "budget=23" in spec else 6.0)
    s = SamplingSettings(48, tokenizer.eos_token_id, tokenizer.pad_token_id, **kw)
    engine = make_engine("ascent", speculative=spec)
    for seed in (0, 1):
        base = run(make_engine("ascent"), policy, tokenizer, 6, s, seed)
        spec = run(engine, policy, tokenizer, 6, s, seed)
        st = engine.last_stats
        assert 0 < st["spec_verify_steps"] < st["decode_steps"]  # plain and verify steps
        assert 0 < st["spec_accepted"] < st["spec_drafted"] or "budget=23" in spec  # both verdicts happened
        assert torch.equal(spec.tokens, base.tokens) and torch.equal(spec.lengths, base.lengths)
        assert torch.allclose(spec.logprobs, base.logprobs, atol=1e-5)


def exact_two_token_distribution(policy, prompt: list[int], s: SamplingSettings) -> torch.Tensor:
    """P(y0, y1) (V, V) under the policy with the engine's processing (temperature, top-k, top-p)."""

    def probs(ids: torch.Tensor) -> torch.Tensor:
        logits = policy.model(ids).logits[:, -1].float() / s.temperature
        return torch.softmax(filter_logits(logits, s.top_k, s.top_p), -1)

    with torch.no_grad():
        v = policy.model.config.vocab_size
        first = probs(torch.tensor([prompt]))[0]  # (V,)
        seconds = probs(torch.tensor([prompt + [t] for t in range(v)]))  # (V, V)
    return first[:, None] * seconds


def chi2_pvalue(counts: torch.Tensor, expected_p: torch.Tensor) -> float:
    exp = expected_p.flatten().double() * counts.sum()
    obs = counts.flatten().double()
    big = exp >= 5  # cells expected below 5 pooled into one
    f_obs = torch.cat([obs[big], obs[~big].sum()[None]])
    f_exp = torch.cat([exp[big], exp[~big].sum()[None]])
    assert float(obs[exp == 0].sum()) == 0  # nothing drawn outside the processed distribution's support
    return float(chisquare(f_obs.numpy(), f_exp.numpy() * (f_obs.sum() / f_exp.sum()).item()).pvalue)


def test_sampled_distribution_is_unchanged_chi_square(tiny_policy, tokenizer):
    """4000 samples of the first two tokens after a repetitive prompt (drafted from the prompt's own n-grams,
    so the first token is a verified draft) match the exact distribution; the same samples are rejected as
    draws at another temperature (the test has power)."""
    policy = peaked(tiny_policy, 6.0)
    s = SamplingSettings(
        2, tokenizer.eos_token_id, tokenizer.pad_token_id, temperature=0.8, top_p=0.95, ignore_eos=True
    )
    prompt = tokenizer("12121212")["input_ids"]
    engine = make_engine("ascent", speculative="seer_group(budget=0, min_score=0.0, min_match=1, warmup=1000000)")
    gen = engine.generate(policy.model, [prompt], 4000, s, torch.Generator().manual_seed(0))
    assert engine.last_stats["spec_drafted"] >= 4000  # every sequence's first token was a verified draft
    v = policy.model.config.vocab_size
    counts = torch.zeros(v * v, dtype=torch.long).index_add_(
        0, gen.tokens[:, 0] * v + gen.tokens[:, 1], torch.ones(len(gen.tokens), dtype=torch.long)
    )
    assert chi2_pvalue(counts, exact_two_token_distribution(policy, prompt, s)) > 1e-3
    hotter = SamplingSettings(2, s.eos_id, s.pad_id, temperature=1.2, top_p=0.95, ignore_eos=True)
    assert chi2_pvalue(counts, exact_two_token_distribution(policy, prompt, hotter)) < 1e-6


def test_configuration_errors(tiny_policy):
    with pytest.raises(ValueError, match="max_active_sequences=0"):
        FastEngine(max_active_sequences=4, speculative="seer_group")
    with pytest.raises(ValueError, match="needs the 'ascent' backend"):
        make_engine("cached", speculative="seer_group")
    with pytest.raises(ConfigError, match="tokens must be >= 1"):
        DRAFTERS.resolve("seer_group(tokens=0)")
    with pytest.raises(ConfigError, match="unknown speculative drafter"):
        DRAFTERS.resolve("eagle")
    assert DRAFTERS.resolve("none")() is None


def test_the_run_config_key_reaches_the_engine():
    from ascent.config.loader import load_config
    from ascent.rollout.backends import make_engine as build

    cfg = load_config("default", ["rollout.speculative=seer_group(tokens=3)"])
    assert cfg.rollout.speculative == "seer_group(tokens=3)"
    assert build(cfg.rollout).draft_params == GroupDraftParams(tokens=3)
    with pytest.raises(ConfigError):
        load_config("default", ["rollout.speculative=seer_group(tokens=-1)"])
    with pytest.raises(ConfigError, match="max_active_sequences=0"):
        load_config("default", ["rollout.speculative=seer_group", "rollout.max_active_sequences=8"])
    with pytest.raises(ConfigError, match="backend=ascent"):
        load_config("default", ["rollout.speculative=seer_group", "rollout.backend=hf"])


def test_a_draft_is_never_longer_than_asked():
    """The engine asks for at most the room left before max_new_tokens; the drafter never exceeds it."""
    d = drafter([0], [[1, 1, 1, 1, 1]], min_match=1, ngram=4, min_score=0.0)
    for k in range(5):
        assert d.propose(0, k) == [1] * k
    assert list(itertools.islice(d.history[0], 5)) == [1] * 5


def test_native_verify_is_the_one_token_steps(tiny_policy, native, one_thread):
    """The native verify forward (several token rows per cache row, `ascent_decode_step_rows`) gives each
    chain token the logits that feeding the chain one token at a time through the native step gives, writes
    the same keys and values, and agrees with the torch verify forward."""
    from ascent.rollout.decoder import Decoder
    from ascent.rollout.speculative import native_verify, verify_forward, verify_native

    torch.manual_seed(0)
    dec = Decoder(tiny_policy.model, torch.float32, "auto", "auto")
    assert native_verify(dec)
    a, ctx, k, vocab = 3, 5, 3, tiny_policy.model.config.vocab_size
    committed = dec.new_cache(a, ctx + k + 1)
    valid = torch.zeros(a, ctx + k + 1, dtype=torch.bool)
    with torch.inference_mode():
        for t in range(ctx):  # a committed prefix, one native step at a time; row 1 masks column 2 out
            valid[:, t] = t != 2 or torch.arange(a) != 1
            dec.forward(
                torch.randint(0, vocab, (a, 1)), torch.full((a, 1), t), committed, t, valid[:, None, None, : t + 1]
            )
        chains = torch.randint(0, vocab, (a, k + 1))  # each row's fed token and its draft of k
        stepped, expect = tuple(c.clone() for c in committed), []
        v = valid.clone()
        for j in range(k + 1):
            v[:, ctx + j] = True
            expect.append(
                dec.forward(
                    chains[:, j : j + 1], torch.full((a, 1), ctx + j), stepped, ctx + j, v[:, None, None, : ctx + j + 1]
                )
            )
        expect = torch.stack(expect, 1).reshape(a * (k + 1), -1)  # (row, offset) order
        rows, off = torch.arange(a).repeat_interleave(k + 1), torch.arange(k + 1).repeat(a)
        cols, end = ctx + off, ctx + k + 1
        mask = v[rows, :end] & (torch.arange(end) <= cols[:, None])
        native_cache = tuple(c.clone() for c in committed)
        got = verify_native(dec, chains.reshape(-1), cols, rows, cols, native_cache, mask)
        torch_cache = tuple(c.clone() for c in committed)
        block = v[:, None, :end] & (torch.arange(end) <= (ctx + torch.arange(k + 1))[None, :, None])
        via_torch = verify_forward(dec, chains.reshape(-1), cols, rows, off, cols, torch_cache, block[:, None])
    assert torch.allclose(got, expect, atol=1e-5, rtol=0)
    assert torch.allclose(via_torch, expect, atol=1e-4, rtol=0)
    for c_native, c_step in zip(native_cache, stepped):
        assert torch.allclose(c_native, c_step, atol=1e-6, rtol=0)
    assert not torch.allclose(got[: k + 1], got[k + 1 : 2 * (k + 1)])  # rows differ: a real check


def test_torch_verify_path_gives_the_same_tokens(tiny_policy, tokenizer, monkeypatch):
    """Where the native verify forward does not apply (several intra-op threads, bf16, no kernels), the torch one
    runs: the same tokens as the engine without speculation, drafts accepted and rejected."""
    import ascent.rollout.speculative as speculative

    monkeypatch.setattr(speculative, "native_verify", lambda dec: False)
    policy = peaked(tiny_policy, 6.0)
    s = SamplingSettings(48, tokenizer.eos_token_id, tokenizer.pad_token_id, temperature=1.0)
    engine = make_engine("ascent", speculative="seer_group(budget=0, min_score=0.0, warmup=1000000)")
    base = run(make_engine("ascent"), policy, tokenizer, 6, s, 0)
    spec = run(engine, policy, tokenizer, 6, s, 0)
    assert 0 < engine.last_stats["spec_accepted"] < engine.last_stats["spec_drafted"]
    assert torch.equal(spec.tokens, base.tokens) and torch.allclose(spec.logprobs, base.logprobs, atol=1e-5)
