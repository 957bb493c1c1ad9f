"""The `mcts` explorer (ascent/rollout/tree_search.py: Tree-OPO's staged groups from an online search tree) and the
`iib` explorer (ascent/rollout/info_branch.py: IIB-LPO's entropy branching, IB filter and self-reward): the tree's
UCT arithmetic, forced prefixes out of the loss with honest log-probs, stages recorded, exact resume; the latent
branching of `iib(latent_dim=...)`: offsets, the latent sampler against a recomputed conditioned forward."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ascent.data.prompts import PromptEncoder
from ascent.data.samplers import Draw
from ascent.rewards.runner import RewardResult
from ascent.rollout import SamplingSettings, make_engine
from ascent.rollout.collector import SingleTurnCollector
from ascent.rollout.explorers import EXPLORERS, ExplorerContext
from ascent.rollout.info_branch import (
    IibParams,
    choice_entropies,
    entropy_branch_point,
    latent_offsets,
    latent_sample,
    redundant_branches,
)
from ascent.rollout.tree_search import MctsParams, Node, best_path, expand, select, stage_requests, uct

ROWS = [{"prompt": p, "answer": a} for p, a in [("12+34=", "46"), ("7+8=", "15"), ("99+1=", "100"), ("5+5=", "10")]]
N = 4


def starts_with_digit(digit: str):
    """A scorer: reward 1 where the completion starts with `digit`."""

    def score(prompts, completions, fields):
        r = torch.tensor([float(c.startswith(digit)) for c in completions])
        return RewardResult(r, torch.ones(len(r), dtype=torch.bool), r[:, None])

    return score


def context(policy, tokenizer, scorer=None, max_new_tokens=8) -> ExplorerContext:
    encoder, engine = PromptEncoder(tokenizer), make_engine("ascent")
    s = SamplingSettings(max_new_tokens=max_new_tokens, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    collector = SingleTurnCollector(policy, ROWS, encoder, engine, s, N)
    return ExplorerContext(collector, policy, ROWS, encoder, engine, s, N, seed=0, scorer=scorer)


def make(name, ctx, spec=""):
    return EXPLORERS.resolve(f"{name}({spec})" if spec else name)(ctx)


def completion(ctx, batch, i):
    start, end = len(ctx.encoder(batch.prompts[i])), int(batch.attention_mask[i].sum())
    return (
        batch.input_ids[i, start:end].tolist(),
        batch.completion_mask[i, start:end],
        batch.sampled_logprobs[i, start:end],
    )


def recomputed_logprobs(policy, batch) -> torch.Tensor:
    with torch.no_grad():
        logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    return torch.nn.functional.pad(lp, (1, 0))


def test_tree_arithmetic_by_hand():
    p = MctsParams(chunk=2, c_uct=1.0, max_children=2)
    root = Node([])
    expand([root], [5, 6, 7], True, 1.0, p, room=8)  # child [5, 6] (more tokens follow: not terminal)
    expand([root], [3], True, 0.0, p, room=8)  # child [3], a whole finished completion: terminal
    assert [c.prefix for c in root.children] == [[5, 6], [3]] and root.children[1].terminal
    assert root.visits == 2 and root.value == 1.0
    # root full (2 children): UCT picks [5, 6] (Q 1 vs 0, equal visits); [5, 6] has no child yet: expand it
    assert [n.prefix for n in select(root, p)] == [[], [5, 6]]
    assert uct(root.children[0], 2, 1.0) == pytest.approx(1.0 + (torch.log(torch.tensor(2.0)) / 1).sqrt().item())
    expand(select(root, p), [7, 8, 9], False, 1.0, p, room=8)
    assert [n.prefix for n in best_path(root)] == [[], [5, 6], [5, 6, 7, 8]]
    assert root.children[0].visits == 2 and root.children[0].children[0].visits == 1
    expand([root], [5, 6, 1], True, 0.0, p, room=8)  # the same first chunk: the child is reused
    assert len(root.children) == 2 and root.children[0].visits == 3 and root.children[0].q == pytest.approx(2 / 3)
    reqs = stage_requests(3, 1, best_path(root), 5)
    assert [(r.group, r.row, r.prefix, r.n) for r in reqs] == [
        (3, 1, [], 2),
        (3, 1, [5, 6], 2),
        (3, 1, [5, 6, 7, 8], 1),
    ]
    with pytest.raises(ValueError, match="simulations"):
        MctsParams(simulations=0)


def test_mcts_stages_the_group_along_the_searched_path(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer, starts_with_digit("1"))
    explorer = make("mcts", ctx, "simulations=6,chunk=1")
    batch = explorer.collect(Draw([0, 2, 1]), torch.Generator().manual_seed(4))
    assert batch.group_index.tolist() == [g for g in range(3) for _ in range(N)]
    stage = batch.extras["stage"]
    assert stage.shape == (3 * N,) and int(stage.max()) >= 1  # some sample starts below the root
    for i in range(len(batch)):
        ids, mask, lp = completion(ctx, batch, i)
        forced = int((mask == 0).sum())
        assert forced == int(stage[i])  # chunk=1: stage d forces d tokens
        assert torch.all(mask[:forced] == 0) and torch.all(lp[:forced] == 0) and torch.all(mask[forced:] == 1)
    for g in range(3):  # the group's prefixes are prefixes of one path
        rows = [completion(ctx, batch, g * N + j)[0][: int(stage[g * N + j])] for j in range(N)]
        longest = max(rows, key=len)
        assert all(longest[: len(r)] == r for r in rows)
    on = batch.completion_mask.bool()
    assert torch.allclose(batch.sampled_logprobs[on], recomputed_logprobs(tiny_policy, batch)[on], atol=1e-4)
    m = explorer.metrics()
    assert m["explore/mcts_depth_mean"] == pytest.approx(float(stage.float().mean()))
    if m["explore/mcts_path_q"] == 1.0:  # the search found "1..." for every prompt: each path starts with it
        assert all(batch.completions[g * N + j].startswith("1") for g in range(3) for j in range(N) if stage[g * N + j])
    with pytest.raises(ValueError, match="scorer"):
        make("mcts", context(tiny_policy, tokenizer)).collect(Draw([0]), torch.Generator())


def same_batch(a, b) -> bool:
    return (
        torch.equal(a.input_ids, b.input_ids)
        and torch.equal(a.completion_mask, b.completion_mask)
        and torch.equal(a.sampled_logprobs, b.sampled_logprobs)
        and a.completions == b.completions
    )


@pytest.mark.parametrize("name,spec", [("mcts", "simulations=3"), ("iib", "")])
def test_state_dict_round_trip_reproduces_the_next_batch(tiny_policy, tokenizer, name, spec):
    ctx = context(tiny_policy, tokenizer, starts_with_digit("1"))
    draw, explorer, gen = Draw([0, 1, 2]), make(name, ctx, spec), torch.Generator().manual_seed(11)
    explorer.collect(draw, gen)
    state, gen_state = explorer.state_dict(), gen.get_state()
    expected = explorer.collect(draw, gen)
    resumed, gen2 = make(name, ctx, spec), torch.Generator()
    resumed.load_state_dict(state)
    gen2.set_state(gen_state)
    assert same_batch(expected, resumed.collect(draw, gen2))
    assert resumed.state_dict() == explorer.state_dict()


def test_iib_branches_at_the_highest_entropy_choice(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("iib", ctx, "root_share=0.5")
    batch = explorer.collect(Draw([0, 2]), torch.Generator().manual_seed(4))
    for g in range(2):
        roots = [completion(ctx, batch, g * N + j)[0] for j in range(2)]
        prompt = ctx.encoder(batch.prompts[g * N])
        ent = choice_entropies(ctx, [prompt, prompt], roots)
        for b in range(2):
            root = roots[b]
            c = max(1, int(torch.argmax(ent[b, : len(root) - 1]))) if len(root) > 1 else 0
            assert c == entropy_branch_point(ent[b], len(root), 1)
            ids, mask, lp = completion(ctx, batch, g * N + 2 + b)
            assert ids[:c] == root[:c] and int((mask == 0).sum()) == c and torch.all(lp[:c] == 0)
    on = batch.completion_mask.bool()
    assert torch.allclose(batch.sampled_logprobs[on], recomputed_logprobs(tiny_policy, batch)[on], atol=1e-4)


def test_iib_choice_entropy_is_the_full_distribution_entropy(uniform_policy, tokenizer):
    ctx = context(uniform_policy, tokenizer)
    ent = choice_entropies(ctx, [[1, 2]], [[3, 4, 5]])
    v = uniform_policy.model.config.vocab_size
    assert torch.allclose(ent, torch.full((1, 3), float(torch.log(torch.tensor(float(v))))), atol=1e-4)


def test_iib_amend_filters_repeats_and_adds_the_ib_self_reward(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("iib", ctx, "root_share=0.25,reward_coef=0.5")  # one root, three branches per group
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(5))
    rewards, valid = torch.ones(len(batch)), torch.ones(len(batch), dtype=torch.bool)
    comps = torch.ones(len(batch), 1)
    same, new_rewards, new_valid, _ = explorer.amend(batch, rewards, valid, comps)
    drop = redundant_branches(batch, ctx)
    assert torch.equal(new_valid, ~drop) and torch.equal(valid, torch.ones_like(valid))  # inputs untouched
    assert explorer.metrics()["explore/iib_filtered"] == float(drop.sum())
    texts = batch.completions
    for i in range(len(batch)):  # a dropped sample repeats an earlier one of its group
        if drop[i]:
            assert texts[i] in [texts[j] for j in range(i) if batch.group_index[j] == batch.group_index[i]]
    bonus = new_rewards - rewards
    assert torch.all(bonus >= 0) and torch.all(bonus <= 0.5) and torch.all(bonus[~new_valid] == 0)
    for g in range(2):  # the least compressed valid sample of each group gets 0, the others more
        rows = ((batch.group_index == g) & new_valid).nonzero().squeeze(-1)
        assert float(bonus[rows].min()) == pytest.approx(0.0, abs=1e-6)
    off = EXPLORERS.resolve("iib(filter=false,reward_coef=0)")(ctx)
    _, r2, v2, _ = off.amend(batch, rewards, valid, comps)
    assert torch.equal(r2, rewards) and torch.equal(v2, valid)
    with pytest.raises(ValueError, match="reward_coef"):
        IibParams(reward_coef=-1.0)


# IIB-LPO's latent branching (iib(latent_dim=...))


def conditioned_logprobs(model, prompt: list[int], tokens: list[int], offset: torch.Tensor) -> torch.Tensor:
    """log π(tokens | prompt, z) with `offset` added to every input embedding (one forward, no padding)."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        x = model.get_input_embeddings()(ids) + offset
        logits = model(inputs_embeds=x).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def test_latent_offsets_formula():
    e = torch.full((6, 4), 2.0)  # RMS(E) = 2
    z = torch.tensor([[1.0, -1.0, 0.5]])
    proj = torch.randn((3, 4), generator=torch.Generator().manual_seed(7))
    assert torch.allclose(latent_offsets(e, z, 0.25, 7), 0.25 * 2.0 * (z @ proj) / 3**0.5)
    big = latent_offsets(e, torch.randn((2000, 64), generator=torch.Generator().manual_seed(0)), 0.25, 1)
    assert float(big.pow(2).mean().sqrt()) == pytest.approx(0.5, rel=0.05)  # per-coordinate RMS = scale · RMS(E)
    with pytest.raises(ValueError, match="latent"):
        IibParams(latent_dim=-1)


def test_latent_sampler_records_the_conditioned_policys_logprobs(tiny_policy, tokenizer):
    model = tiny_policy.model
    s = SamplingSettings(max_new_tokens=6, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    prompts = [tokenizer.encode("12+34="), tokenizer.encode("7+8="), tokenizer.encode("99+1=")]
    z = torch.randn((3, 4), generator=torch.Generator().manual_seed(0))
    off = latent_offsets(model.get_input_embeddings().weight, z, 2.0, 0)
    off[1] = 0.0  # the second row samples from the plain policy
    tokens, logps, lengths, finished = latent_sample(
        model, prompts, off, s, [6, 6, 3], torch.Generator().manual_seed(1)
    )
    assert int(lengths[2]) <= 3 and all(int(n) >= 1 for n in lengths)
    for b in range(3):
        n = int(lengths[b])
        got = logps[b, :n]
        want = conditioned_logprobs(model, prompts[b], tokens[b, :n].tolist(), off[b])
        assert torch.allclose(got, want, atol=1e-4)
        plain = conditioned_logprobs(model, prompts[b], tokens[b, :n].tolist(), torch.zeros_like(off[b]))
        assert torch.allclose(got, plain, atol=1e-4) == (b == 1)  # the latent changes the policy's log-probs
        assert bool(finished[b]) == (tokens[b, n - 1] == s.eos_id)
    greedy = latent_sample(model, prompts, off, replace(s, temperature=0.0), [6] * 3, torch.Generator())
    top1 = latent_sample(model, prompts, off, replace(s, top_k=1), [6] * 3, torch.Generator().manual_seed(5))
    assert torch.equal(greedy[0], top1[0])  # top_k = 1 keeps only the argmax


def test_iib_latent_branches_each_sample_under_its_own_code(tiny_policy, tokenizer):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("iib", ctx, "root_share=0.5,latent_dim=4,latent_scale=2.0")
    batch = explorer.collect(Draw([0, 2]), torch.Generator().manual_seed(4))
    offsets = explorer.last_offsets
    assert offsets.shape[0] == 2 * (N - 2) == explorer.metrics()["explore/branches"]
    assert explorer.metrics()["explore/latent_norm_mean"] == pytest.approx(float(offsets.norm(dim=-1).mean()))
    assert len({tuple(o.tolist()) for o in offsets}) == len(offsets)  # one code per branch sample
    plain = recomputed_logprobs(tiny_policy, batch)
    k = 0
    for g in range(2):
        for j in range(N):
            i = g * N + j
            ids, mask, lp = completion(ctx, batch, i)
            on = mask.bool()
            if j < 2:  # roots: the plain policy's samples
                assert torch.all(on)
                start = len(ctx.encoder(batch.prompts[i]))
                assert torch.allclose(lp, plain[i, start : start + len(ids)], atol=1e-4)
                continue
            c = int((~on).sum())  # forced prefix of the root, then the latent-conditioned continuation
            prompt = ctx.encoder(batch.prompts[i])
            want = conditioned_logprobs(tiny_policy.model, prompt + ids[:c], ids[c:], offsets[k])
            assert torch.allclose(lp[c:], want, atol=1e-4) and torch.all(lp[:c] == 0)
            k += 1
    assert k == len(offsets)
