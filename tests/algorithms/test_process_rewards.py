"""Learned step credit (ascent.algorithms.process_rewards): the PRM loss and AUROC by hand, the process-supervision
advantages, IQL's expectile loss, TD targets and Q - V advantages on hand-made trajectories, SPA's sum-to-outcome
decomposition, and short learning tests of the IQL critic and the SPA progress estimator on a tiny model."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.process_rewards import (
    PrmParams,
    QEvolveParams,
    QEvolveState,
    SpaParams,
    SpaState,
    TurnRecord,
    auroc,
    expectile_loss,
    head_at,
    iql_losses,
    iql_targets,
    pack,
    process_advantages,
    read_records,
    spa_decomposition,
    spa_loss,
    step_bce,
    transition_weights,
    turn_spans,
)
from ascent.config.schema import AlgorithmConfig
from ascent.policy.model import ValueModel
from ascent.trainer.optim import clip_and_step

CFG = AlgorithmConfig()
EPS = CFG.std_eps


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_turn_spans_first_and_last_position_of_each_turn():
    idx = torch.tensor([[-1, 0, 0, -1, -1, 1, 1, 1], [-1, -1, 0, -1, -1, -1, -1, -1]])
    first, last = turn_spans(idx, turns=2)
    assert first.tolist() == [[1, 5], [2, -1]] and last.tolist() == [[2, 7], [2, -1]]


def test_step_bce_and_accuracy_by_hand():
    logits, labels = torch.tensor([0.0, 2.0, -1.0]), torch.tensor([1.0, 0.5, 0.0])
    loss, m = step_bce(logits, labels)
    by_hand = (-math.log(0.5) - (0.5 * math.log(sig(2.0)) + 0.5 * math.log(1 - sig(2.0))) - math.log(1 - sig(-1.0))) / 3
    assert float(loss) == pytest.approx(by_hand, rel=1e-6)
    # predictions (>0.5): F, T, F ; labels (>0.5): T, F, F -> one right
    assert m["prm/accuracy"] == pytest.approx(1 / 3)


def test_auroc_matches_the_pairwise_definition():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 5, (40,), generator=g).float()  # many ties
    pos = torch.rand(40, generator=g) > 0.5
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in scores[pos] for b in scores[~pos]]
    assert auroc(scores, pos) == pytest.approx(sum(pairs) / len(pairs))
    assert math.isnan(auroc(scores, torch.ones(40, dtype=torch.bool)))


def agent_input(rewards, turn_index, valid=None, groups=None, **extras) -> AdvantageInput:
    rewards = torch.tensor(rewards, dtype=torch.float32)
    idx = torch.tensor(turn_index)
    return AdvantageInput(
        rewards=rewards,
        valid=torch.ones(len(rewards), dtype=torch.bool) if valid is None else torch.tensor(valid),
        group_index=torch.zeros(len(rewards), dtype=torch.long) if groups is None else torch.tensor(groups),
        mask=(idx >= 0).float(),
        extras={"turn_index": idx, **{k: torch.tensor(v, dtype=torch.float32) for k, v in extras.items()}},
    )


NAN = float("nan")


def test_process_advantages_by_hand():
    # one group: row 0 has steps scored 0.2, 0.8; row 1 one step scored 0.5 -> mean 0.5, unbiased std 0.3
    inp = agent_input([1.0, 0.0], [[0, 1], [0, -1]], prm_scores=[[0.2, 0.8], [0.5, NAN]])
    adv = process_advantages(inp, CFG, inp.extras["prm_scores"])
    norm = [-0.3 / (0.3 + EPS), 0.3 / (0.3 + EPS), 0.0]
    assert adv.tolist()[0] == pytest.approx([norm[0] + norm[1], norm[1]], abs=1e-6)
    assert adv.tolist()[1] == pytest.approx([0.0, 0.0], abs=1e-6)


def test_prm_estimator_adds_the_outcome_and_broadcasts_to_tokens():
    inp = agent_input([1.0, 0.0], [[-1, 0, 0, 1], [-1, 0, -1, -1]], prm_scores=[[0.2, 0.8], [0.5, NAN]])
    grpo = 0.5 / (math.sqrt(0.5) + EPS)  # rewards 1, 0: mean 0.5, unbiased std sqrt(0.5)
    proc = process_advantages(inp, CFG, inp.extras["prm_scores"])
    adv = ADVANTAGES.get("prm")(inp, CFG, PrmParams(path="x", outcome_coef=1.0, process_coef=2.0))
    t0, t1 = 2 * float(proc[0, 0]) + grpo, 2 * float(proc[0, 1]) + grpo
    assert adv[0].tolist() == pytest.approx([0.0, t0, t0, t1])
    assert adv[1].tolist() == pytest.approx([0.0, -grpo, 0.0, 0.0])


def test_prm_into_turn_feedback_uses_the_scores_as_turn_rewards():
    inp = agent_input([1.0, 0.0], [[0, 1], [0, 1]], prm_scores=[[0.1, 0.9], [0.3, 0.3]])
    fb = ADVANTAGES.get("turn_feedback")
    want = fb(
        AdvantageInput(
            inp.rewards, inp.valid, inp.group_index, inp.mask, {**inp.extras, "turn_rewards": inp.extras["prm_scores"]}
        ),
        CFG,
    )
    got = ADVANTAGES.get("prm")(inp, CFG, PrmParams(path="x", into="turn_feedback"))
    assert torch.allclose(got, want)
    with pytest.raises(ValueError, match="turn_rewards"):
        PrmParams(path="x", into="grpo")
    with pytest.raises(ValueError, match="path is required"):
        PrmParams()


def test_expectile_loss_and_td_targets_by_hand():
    u = torch.tensor([1.5, -0.5, 0.0])
    assert expectile_loss(u, 0.8).tolist() == pytest.approx([0.8 * 2.25, 0.2 * 0.25, 0.0])
    v = torch.tensor([[0.3, 0.7, 0.9], [0.4, 0.0, 0.0]])
    live = torch.tensor([[True, True, True], [True, False, False]])
    y = iql_targets(v, torch.tensor([1.0, 0.0]), live, gamma=0.5)
    assert y[0].tolist() == pytest.approx([0.35, 0.45, 1.0]) and y[1].tolist() == [0.0, 0.0, 0.0]


def test_iql_losses_by_hand():
    q = torch.tensor([[0.5, 0.2]], requires_grad=True)
    v = torch.tensor([[0.1, 0.6]], requires_grad=True)
    live, w = torch.tensor([[True, True]]), torch.tensor([[1.0, 3.0]])
    q_loss, v_loss = iql_losses(q, v, torch.tensor([1.0]), w, live, tau=0.9, gamma=1.0)
    # targets: turn 0 -> V(s_1) = 0.6, turn 1 (last) -> outcome 1
    assert float(q_loss.detach()) == pytest.approx((1 * (0.5 - 0.6) ** 2 + 3 * (0.2 - 1.0) ** 2) / 4)
    assert float(v_loss.detach()) == pytest.approx((1 * 0.9 * 0.4**2 + 3 * 0.1 * 0.4**2) / 4)
    (q_loss + v_loss).backward()
    assert float(v.grad[0, 0]) == pytest.approx(-2 * 0.9 * 0.4 / 4)  # the TD target's V is detached in L_Q


def test_transition_weights_favour_near_terminal_steps_of_successes():
    live = torch.tensor([[True, True, True]])
    w = transition_weights(torch.tensor([2.0]), torch.tensor([1.0]), live, 1.0)
    assert w.tolist() == [[2 * 1.25, 2 * 1.5, 2 * 2.0]]


def test_q_evolve_advantage_on_a_hand_made_trajectory():
    q = [[0.6, 0.9], [0.3, NAN]]
    v = [[0.5, 0.5], [0.4, NAN]]
    inp = agent_input([1.0, 0.0], [[0, 0, 1], [0, -1, -1]], turn_q=q, turn_v=v)
    adv = ADVANTAGES.get("q_evolve")(inp, CFG, QEvolveParams(outcome_coef=0.0))
    s = math.sqrt(0.5) + EPS  # the group's outcome std (rewards 1, 0)
    assert adv[0].tolist() == pytest.approx([0.1 / s, 0.1 / s, 0.4 / s], rel=1e-5)
    assert adv[1].tolist() == pytest.approx([-0.1 / s, 0.0, 0.0], rel=1e-5)
    both = ADVANTAGES.get("q_evolve")(inp, CFG, QEvolveParams())
    grpo = 0.5 / s
    assert (both - adv)[0].tolist() == pytest.approx([grpo] * 3, rel=1e-5)
    flat = agent_input([1.0, 1.0], [[0, 0, 1], [0, -1, -1]], turn_q=q, turn_v=v)  # equal outcomes: divided by 1
    assert ADVANTAGES.get("q_evolve")(flat, CFG, QEvolveParams())[1].tolist() == pytest.approx([-0.1, 0.0, 0.0])


def test_spa_contributions_sum_to_the_outcome_and_advantages_to_grpo():
    contrib = torch.tensor([[0.2, 0.3, NAN], [0.9, NAN, NAN], [0.1, 0.1, 0.1]])
    live = torch.isfinite(contrib)
    r = torch.tensor([1.0, 0.0, 1.0])
    c = spa_decomposition(torch.nan_to_num(contrib), r, live)
    assert c.sum(1).tolist() == pytest.approx(r.tolist())
    assert c[0].tolist() == pytest.approx([0.45, 0.55, 0.0])
    inp = agent_input(r.tolist(), [[0, 1, 2], [0, -1, -1], [0, 1, 2]], turn_contrib=contrib.tolist())
    adv = ADVANTAGES.get("spa")(inp, CFG, SpaParams())
    mean, std = 2 / 3, float(r.std())
    per_row = adv.sum(1)  # one token per turn
    assert per_row.tolist() == pytest.approx(((r - mean) / (std + EPS)).tolist(), rel=1e-5)
    assert float(adv[2, 0]) == pytest.approx((1 / 3 - mean / 3) / (std + EPS), rel=1e-5)
    flat = agent_input([1.0, 1.0], [[0, 1], [0, 1]], turn_contrib=[[0.8, 0.1], [0.3, 0.3]])
    assert not ADVANTAGES.get("spa")(flat, CFG, SpaParams()).any()  # equal outcomes: 0, as GRPO
    kept = ADVANTAGES.get("spa")(flat, CFG, SpaParams(flat_groups=True))  # c^ = (0.85, 0.15), minus 1/2 each
    assert kept[0].tolist() == pytest.approx([0.35, -0.35]) and kept[1].tolist() == pytest.approx([0.0, 0.0])


def test_spa_loss_by_hand():
    c = torch.tensor([[0.2, 0.3], [0.5, 9.0]])
    live = torch.tensor([[True, True], [True, False]])
    loss = spa_loss(c, torch.tensor([1.0, 0.0]), live, torch.tensor([1.0, 3.0]))
    assert float(loss) == pytest.approx((0.25 + 3 * 0.25) / 4)


def test_read_records_converts_exclusive_ends(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text('{"ids": [1, 2, 3, 4], "starts": [1, 3], "ends": [2, 4], "outcome": 1.0}\n')
    (rec,) = read_records(path, weight=2.0)
    assert rec.first == (1, 3) and rec.last == (1, 3) and rec.weight == 2.0
    path.write_text('{"ids": [1, 2], "starts": [0], "ends": [2], "outcome": 1.0}\n')
    with pytest.raises(ValueError, match="steps.jsonl:1"):
        read_records(path, 1.0)


# ---------------------------------------------------------------------------------------------------------
# learning: the critics on a tiny model
# ---------------------------------------------------------------------------------------------------------
class Harness:
    """The services a piece state uses, implemented with the trainer's own parts on a tiny model."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.policy_model, self.micro_batch_size, self.seed = model, 16, 0

    def value_model(self) -> torch.nn.Module:
        return ValueModel.from_policy(self.policy_model)

    def optimizer(self, module: torch.nn.Module, lr=None):
        opt = torch.optim.AdamW(module.parameters(), lr=lr or 3e-3)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)

    def clip_and_step(self, module, optimizer, scheduler):
        return clip_and_step(module, optimizer, scheduler, 1.0)


GOOD, BAD = 5, 6


def two_step_records(n: int, seed: int) -> list[TurnRecord]:
    """ids [1, x0, 2, x1] (turns at positions 1 and 3), outcome 1 iff x0 and x1 are both GOOD."""
    g = torch.Generator().manual_seed(seed)
    xs = torch.where(torch.rand(n, 2, generator=g) < 0.5, GOOD, BAD)
    return [TurnRecord((1, int(a), 2, int(b)), (1, 3), (1, 3), float(a == GOOD and b == GOOD)) for a, b in xs]


@pytest.fixture
def tiny(tokenizer):
    from tests.conftest import tiny_qwen

    return tiny_qwen(tokenizer, seed=3)


def test_iql_critic_learns_that_good_steps_have_positive_advantage(tiny, one_thread):
    torch.manual_seed(0)
    state = QEvolveState(QEvolveParams(tau=0.7, batch_size=32, lr=1e-2, success_weight=0.0), Harness(tiny))
    state.buffer.extend(two_step_records(64, seed=1))
    first = state.loss(pack(list(state.buffer)))[0].item()
    state.train_steps(100)
    assert state.loss(pack(list(state.buffer)))[0].item() < 0.5 * first
    probe = pack([TurnRecord((1, a, 2, b), (1, 3), (1, 3), 0.0) for a in (GOOD, BAD) for b in (GOOD, BAD)])
    with torch.no_grad():
        q = head_at(state.models["q"], probe["ids"], probe["mask"], probe["last"])
        v = head_at(state.models["v"], probe["ids"], probe["mask"], probe["first"] - 1)
    adv = q - v  # rows: (G,G), (G,B), (B,G), (B,B)
    assert float(adv[0, 0]) > float(adv[2, 0]) + 0.1, adv  # turn 0: GOOD beats BAD
    assert float(adv[0, 1]) > float(adv[1, 1]) + 0.3, adv  # turn 1 after GOOD: GOOD beats BAD
    assert float(q[0, 1]) == pytest.approx(1.0, abs=0.25) and abs(float(q[1, 1])) < 0.25


def test_spa_estimator_learns_contributions_that_sum_to_the_outcome(tiny, one_thread):
    torch.manual_seed(0)
    state = SpaState(SpaParams(batch_size=32, lr=1e-2), Harness(tiny))
    g = torch.Generator().manual_seed(2)
    xs = torch.where(torch.rand(64, 2, generator=g) < 0.5, GOOD, BAD)
    state.buffer.extend(  # outcome = the number of GOOD turns: each GOOD turn contributes 1
        TurnRecord((1, int(a), 2, int(b)), (1, 3), (1, 3), float(int(a == GOOD) + int(b == GOOD))) for a, b in xs
    )
    first = state.loss(pack(list(state.buffer)))[0].item()
    state.train_steps(80)
    assert state.loss(pack(list(state.buffer)))[0].item() < 0.05 * first
    probe = pack([TurnRecord((1, a, 2, b), (1, 3), (1, 3), 0.0) for a in (GOOD, BAD) for b in (GOOD, BAD)])
    with torch.no_grad():
        c = head_at(state.models["progress"], probe["ids"], probe["mask"], probe["last"])
    # the decomposition is not unique (the last turn sees the whole history); the sums are pinned down
    assert c.sum(1).tolist() == pytest.approx([2.0, 1.0, 1.0, 0.0], abs=0.15), c


def test_buffer_state_round_trips(tiny, one_thread):
    a = SpaState(SpaParams(batch_size=8), Harness(tiny))
    a.buffer.extend(two_step_records(10, seed=0))
    a.train_steps(2)
    b = SpaState(SpaParams(batch_size=8), Harness(tiny))
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # a checkpoint holds copies
    assert list(b.buffer) == list(a.buffer)
    a.train_steps(1), b.train_steps(1)
    for (k, x), y in zip(a.models["progress"].state_dict().items(), b.models["progress"].state_dict().values()):
        assert torch.equal(x, y), k


def test_prm_into_explore_group_feeds_the_scores_as_step_rewards():
    # explore_group reads turn_rewards only with step_coef != 0: prm passes into_coef as its step_coef
    from ascent.algorithms.turn_advantages import ExploreGroupParams

    inp = agent_input(
        [1.0, 0.0, 1.0],
        [[0, 1], [0, 1], [0, 1]],
        prm_scores=[[0.1, 0.9], [0.3, 0.2], [0.8, 0.4]],
        turn_kind=[[1, 0], [1, 0], [1, 0]],
    )
    explore = ADVANTAGES.get("explore_group")
    fed = AdvantageInput(
        inp.rewards, inp.valid, inp.group_index, inp.mask, {**inp.extras, "turn_rewards": inp.extras["prm_scores"]}
    )
    want = explore(fed, CFG, ExploreGroupParams(step_coef=2.0))
    got = ADVANTAGES.get("prm")(inp, CFG, PrmParams(path="x", into="explore_group", into_coef=2.0))
    assert torch.allclose(got, want)
    assert not torch.allclose(got, explore(fed, CFG))  # the scores moved the advantages
    with pytest.raises(ValueError, match="into_coef"):
        PrmParams(path="x", into="explore_group", into_coef=0.0)
