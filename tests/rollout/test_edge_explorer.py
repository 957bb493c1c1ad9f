"""EDGE's explorer (ascent/rollout/explorers.py, `edge`): half-conditioned groups with the experience cut out of
the batch's prompts, the keep/drop rule on the marginal gain, the conditioned log-probs it records for the `edge`
loss, the co-evolving bank (gains, pruning, worked examples never shown for their own row), resumable state."""

from __future__ import annotations

import pytest
import torch

from ascent.algorithms.opd import EDGE_CONDITIONED, EDGE_DISTIL, EDGE_TEACHER
from ascent.data.samplers import Draw
from ascent.rollout.explorers import EdgeExplorerParams, Experience, marginal_gains
from tests.rollout.test_explorers import ROWS, N, all_valid, context, make, recomputed_logprobs


@pytest.fixture
def seeds(tmp_path):
    path = tmp_path / "experiences.txt"
    path.write_text("1+1=2\n\n2+2=4\n")
    return path


def test_marginal_gain_and_the_keep_drop_rule():
    r = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    g = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)
    c = torch.tensor([False, False, True, True] * 3)
    v = torch.ones(12, dtype=torch.bool)
    v[11] = False  # group 2: its one conditioned valid sample is row 10
    gains = marginal_gains(r, v, g, c)
    assert gains == {0: 1.0, 1: -0.5, 2: -1.0}  # (1+1)/2-0, 0-(1+0)/2, 0-(1+1)/2
    assert marginal_gains(r, v, g, torch.zeros(12, dtype=torch.bool)) == {}  # no conditioned half: no estimate
    with pytest.raises(ValueError, match="share"):
        EdgeExplorerParams(share=1.0)
    with pytest.raises(ValueError, match="template"):
        EdgeExplorerParams(template="{prompt}")


def test_half_of_each_group_is_conditioned_and_the_prompt_is_plain(tiny_policy, tokenizer, seeds):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("edge", ctx, f"experiences={seeds}")
    assert [e.text for e in explorer.bank] == ["1+1=2", "2+2=4"]
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    cond = batch.extras[EDGE_CONDITIONED]
    assert batch.group_index.tolist() == [0] * N + [1] * N and cond.tolist() == [False, False, True, True] * 2
    assert batch.prompts == [ROWS[0]["prompt"]] * N + [ROWS[1]["prompt"]] * N  # the experience is cut out
    # a conditioned sample's recorded log-probs are those of the conditioned distribution, not of the plain prompt
    plain = recomputed_logprobs(tiny_policy, batch, 1.0)
    gap = ((plain - batch.sampled_logprobs).abs() * batch.completion_mask).amax(-1)  # (N,)
    assert gap[~cond].max() < 1e-4 and gap[cond].min() > 1e-3
    assert explorer.metrics()["explore/edge_conditioned"] == 4.0


def test_amend_admits_positive_gains_and_drops_the_rest(tiny_policy, tokenizer, seeds):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("edge", ctx, f"experiences={seeds}, learn=false")
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0])  # group 0: gain +0.5; group 1: gain -1
    out, r, valid, _ = explorer.amend(batch, rewards, all_valid(batch), torch.zeros(8, 0))
    assert valid.tolist() == [True] * 6 + [False, False]  # group 1's conditioned samples leave the loss
    assert out.extras[EDGE_DISTIL].tolist() == [1.0, 1.0] + [0.0] * 6  # group 0's free samples distil
    assert EDGE_DISTIL not in batch.extras or batch.extras[EDGE_DISTIL].sum() == 0  # the input batch is unchanged
    # the recorded targets are log pi(y_t | e, x): a plain forward on experience + prompt + completion
    teacher = out.extras[EDGE_TEACHER]
    e = explorer.used[0].text
    for i in (0, 1):
        start, end = len(ctx.encoder(out.prompts[i])), int(out.attention_mask[i].sum())
        comp = out.input_ids[i, start:end].tolist()
        ids = torch.tensor([ctx.encoder(f"{e} {out.prompts[i]}") + comp])
        lp = recomputed_logprobs(
            tiny_policy, type("B", (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}), 1.0
        )
        assert torch.allclose(teacher[i, start:end], lp[0, -len(comp) :], atol=1e-5)
        assert teacher[i, :start].abs().sum() == 0
    assert teacher[2:].abs().sum() == 0
    used = {explorer.used[0].text: 0.5, explorer.used[1].text: -1.0}
    for entry in explorer.bank:
        if entry.text in used and explorer.used[0] is not explorer.used[1]:
            assert entry.uses == 1 and entry.gain == pytest.approx(used[entry.text])
    assert explorer.metrics()["explore/edge_admitted"] == 1.0


def test_bank_prunes_unhelpful_entries_and_learns_worked_examples(tiny_policy, tokenizer, seeds):
    ctx = context(tiny_policy, tokenizer)
    explorer = make("edge", ctx, f"experiences={seeds}, min_uses=1")
    batch = explorer.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    rewards = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # every used experience: gain <= 0
    explorer.amend(batch, rewards, all_valid(batch), torch.zeros(8, 0))
    used = {e.text for e in explorer.used.values()}
    texts = [e.text for e in explorer.bank]
    assert not used & set(texts)  # pruned after one use with gain <= 0
    example = ROWS[0]["prompt"] + batch.completions[1]  # row 0: a free sample failed, sample 1 succeeded
    assert example in texts and [e.row for e in explorer.bank if e.text == example] == [0]
    nxt = explorer.collect(Draw([0]), torch.Generator().manual_seed(1))  # row 0 never sees its own example
    assert not nxt.extras[EDGE_CONDITIONED].any() or explorer.used[0].row != 0


def test_state_round_trip_reproduces_the_next_batch(tiny_policy, tokenizer, seeds):
    ctx = context(tiny_policy, tokenizer)
    a = make("edge", ctx, f"experiences={seeds}")
    batch = a.collect(Draw([0, 1]), torch.Generator().manual_seed(0))
    a.amend(batch, torch.tensor([0.0, 1.0, 1.0, 1.0] * 2), all_valid(batch), torch.zeros(8, 0))
    b = make("edge", ctx)
    b.load_state_dict(a.state_dict())
    assert [(e.text, e.uses) for e in b.bank] == [(e.text, e.uses) for e in a.bank]
    x, y = (e.collect(Draw([2, 3]), torch.Generator().manual_seed(5)) for e in (a, b))
    assert torch.equal(x.input_ids, y.input_ids) and torch.equal(x.extras[EDGE_CONDITIONED], y.extras[EDGE_CONDITIONED])
    assert Experience("t", uses=2, gain_sum=1.0).gain == 0.5
