"""EAPO's action-level injection (`eapo_inject`, ascent/rollout/experience.py): the prior's action exactly at the
current policy's high-entropy positions, recorded with the prior's log-prob (a uniform prior: −log V), the policy's
own log-probs elsewhere; the explorer's groups mix own and augmented samples."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.data.samplers import Draw
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.experience import EapoInjectParams, inject_sample
from ascent.rollout.explorers import EXPLORERS, ExplorerContext

ROWS = [{"prompt": p, "answer": a} for p, a in [("12+34=", "46"), ("7+8=", "15"), ("99+1=", "100")]]
N = 4


def policy_entropy_and_logprob(model, prompt, tokens):
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float(), -1)
    ent = -(lp.exp() * lp).sum(-1)
    return ent, lp.gather(-1, torch.tensor(tokens)[:, None])[:, 0]


@pytest.mark.parametrize("threshold", [0.5, 2.3, 1e9])
def test_injection_at_high_entropy_positions_with_the_priors_logprob(tiny_policy, uniform_policy, tokenizer, threshold):
    s = SamplingSettings(max_new_tokens=6, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    prompts = [tokenizer.encode(r["prompt"]) for r in ROWS] * 2
    (tokens, logps, lengths, finished), injected = inject_sample(
        tiny_policy.model, uniform_policy.model, prompts, s, threshold, 3, torch.Generator().manual_seed(0)
    )
    v = uniform_policy.model.config.vocab_size
    total = 0
    for b, prompt in enumerate(prompts):
        n = int(lengths[b])
        ent, own = policy_entropy_and_logprob(tiny_policy.model, prompt, tokens[b, :n].tolist())
        expect, used = [], 0
        for t in range(n):
            hit = bool(ent[t] >= threshold) and used < 3
            used += hit
            expect.append(hit)
        assert injected[b, :n].tolist() == expect and not injected[b, n:].any()
        inj = injected[b, :n]
        assert torch.allclose(logps[b, :n][inj], torch.full((int(inj.sum()),), -math.log(v)), atol=1e-5)
        assert torch.allclose(logps[b, :n][~inj], own[~inj], atol=1e-4)
        total += int(inj.sum())
    if threshold == 1e9:
        assert total == 0  # never critical: the policy's own samples
    if threshold == 0.5:
        assert total > 0


def test_explorer_mixes_own_and_augmented_samples(tiny_policy, uniform_policy, tokenizer, tmp_path):
    uniform_policy.model.save_pretrained(tmp_path / "prior")
    tokenizer.save_pretrained(tmp_path / "prior")
    encoder, engine = PromptEncoder(tokenizer), make_engine("ascent")
    s = SamplingSettings(max_new_tokens=6, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    collector = SingleTurnCollector(tiny_policy, ROWS, encoder, engine, s, N)
    ctx = ExplorerContext(collector, tiny_policy, ROWS, encoder, engine, s, N, seed=0)
    explorer = EXPLORERS.resolve(f"eapo_inject(prior={str(tmp_path / 'prior')!r},share=0.5,entropy_threshold=0.5)")(ctx)
    batch = explorer.collect(Draw([0, 2]), torch.Generator().manual_seed(3))
    assert batch.group_index.tolist() == [0] * N + [1] * N
    m = explorer.metrics()
    assert m["explore/augmented"] == 4.0 and m["explore/injected"] == float(explorer.last_injected.sum()) > 0
    assert bool((batch.completion_mask.sum(-1) > 0).all())  # every token sampled (none forced)
    with pytest.raises(ValueError, match="prior"):
        EapoInjectParams()
    with pytest.raises(ValueError, match="cannot load"):
        EXPLORERS.resolve(f"eapo_inject(prior={str(tmp_path / 'nothing')!r})")(ctx)
