"""The in-context transformer: causal, learns from histories, evaluated with frozen weights."""

import numpy as np
import pytest
import torch

from ascent.incontext.histories import collect
from ascent.incontext.model import InContextTransformer, TransformerParams
from ascent.incontext.tasks import make_family
from ascent.incontext.train import (
    TrainParams,
    evaluate_in_context,
    history_tokens,
    sample_windows,
    train_model,
    window_loss,
)

SMALL = TransformerParams(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)


def model_for(family, context=40, params=SMALL, grid=0, seed=0):
    torch.manual_seed(seed)
    return InContextTransformer(family.num_obs, family.num_actions, family.horizon, context, params, grid=grid)


@pytest.mark.parametrize("grid", [0, 9])
def test_future_tokens_do_not_change_past_outputs(grid):
    f = make_family("darkroom")
    m = model_for(f, grid=grid).eval()
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 81, (3, 30), generator=g)
    act = torch.randint(0, 6, (3, 30), generator=g)
    rew = torch.randint(0, 2, (3, 30), generator=g).float()
    steps = torch.arange(30).expand(3, 30) % 20
    out = m(obs, act, rew, steps)
    obs2, act2, rew2 = obs.clone(), act.clone(), rew.clone()
    obs2[:, 17:], act2[:, 17:], rew2[:, 17:] = (obs[:, 17:] + 5) % 81, (act[:, 17:] + 1) % 6, 1 - rew[:, 17:]
    out2 = m(obs2, act2, rew2, steps)
    assert torch.allclose(out[:, :17], out2[:, :17], atol=1e-5)
    assert not torch.allclose(out[:, 17:], out2[:, 17:], atol=1e-3)  # the changed positions do change
    assert torch.allclose(m(obs[:, :17], act[:, :17], rew[:, :17], steps[:, :17]), out[:, :17], atol=1e-5)


def test_tokens_shift_previous_action_and_reward():
    f = make_family("darkroom")
    h = collect(f, f.tasks("train", 2, 0), "q_learning", 2, seed=0)
    tok = history_tokens(h, 5)
    assert (tok.prev_actions[:, 0] == 5).all() and (tok.prev_rewards[:, 0] == 0).all()
    assert torch.equal(tok.prev_actions[:, 1:], tok.actions[:, :-1])
    assert torch.equal(tok.prev_rewards[:, 1:], torch.as_tensor(h.rewards[:, :-1]))
    assert list(tok.steps[0, 18:22]) == [18, 19, 0, 1]
    w = sample_windows(tok, 7, 5, torch.Generator().manual_seed(0))
    assert w.obs.shape == (5, 7)
    # each window is a contiguous slice of one history
    for b in range(5):
        row = [r for r in range(2) if any(torch.equal(w.obs[b], tok.obs[r, s : s + 7]) for s in range(34))]
        assert row


def test_training_reduces_loss_on_expert_bandit_histories():
    f = make_family("bandit(arms=4, num_train=64)")
    h = collect(f, f.train_tasks, "expert", 40, seed=0)  # the best arm every pull: copy the last action
    m = model_for(f, context=40)
    tok = history_tokens(h, f.num_actions)
    probe = sample_windows(tok, 40, 64, torch.Generator().manual_seed(9))
    with torch.no_grad():
        before = float(window_loss(m, probe))
    train_model(m, h, TrainParams(context=40, steps=60, batch_size=16, lr=3e-3, warmup=5), seed=0)
    with torch.no_grad():
        after = float(window_loss(m, probe))
    assert before > 1.2 and after < 0.5 * before  # ln 4 = 1.39 at the start


def test_evaluation_updates_no_weight_and_is_seeded():
    f = make_family("darkroom")
    m = model_for(f, context=30)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    tasks = f.test_tasks[:4]
    r1 = evaluate_in_context(m, f, tasks, episodes=3, seed=5)
    r2 = evaluate_in_context(m, f, tasks, episodes=3, seed=5)
    assert r1.shape == (4, 3) and np.array_equal(r1, r2)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert all(p.grad is None for p in m.parameters())


def test_distilled_expert_goes_to_the_goal_in_context():
    """A model distilled from expert histories on ONE goal reaches it in context (a learning check on a tiny task)."""
    f = make_family("darkroom")
    tasks = np.array([[4, 6]] * 16)
    h = collect(f, tasks, "expert", 4, seed=0)
    m = model_for(f, context=40, grid=9)
    train_model(m, h, TrainParams(context=40, steps=80, batch_size=16, lr=3e-3, warmup=5), seed=0)
    ret = evaluate_in_context(m, f, tasks[:4], episodes=2, seed=0, greedy=True)
    assert ret.min() == 19.0  # optimal: two steps right, then stay
