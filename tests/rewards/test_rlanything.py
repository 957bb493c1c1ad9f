"""`rm_online`'s RLAnything options: the integrated signal R = O + λ·S̄ (numeric), the consistency update
against a hand-made AdamW step on L = −(1/n) Σ log σ(O·s), the judge learning to agree with the outcome, and
the errors a bad spec gives."""

from __future__ import annotations

import math

import pytest
import torch

from ascent.app.train_rm import save_reward_model
from ascent.config.loader import load_config
from ascent.policy.model import build_policy
from ascent.rewards.online_rm import OnlineRMParams, step_verdict
from ascent.rewards.reward_model import FORMAT, VERSION, RewardModel, encode, load_reward_model, score
from ascent.rewards.runner import resolve_reward
from ascent.tasks import load_task

pytestmark = pytest.mark.usefixtures("one_thread")
TINY_MODEL = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1"]
SUMS = [(12, 34), (55, 66), (19, 28), (70, 45), (3, 8), (41, 41)]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    """An untrained tiny reward-model folder (random trunk and head)."""
    cfg = load_config("default", [*TINY_MODEL, "model.intermediate_size=64"])
    policy = build_policy(cfg.model, load_task(cfg.data, 0).tokenizer, 0)
    torch.manual_seed(0)
    rm = RewardModel(policy.model.float())
    meta = {"format": FORMAT, "version": VERSION, "max_length": 32, "micro_batch_size": 64, "pair_accuracy": 0.5}
    out = tmp_path_factory.mktemp("rlany") / "rm"
    save_reward_model(out, rm, policy.tokenizer, meta, {})
    return out


def batch():
    """Two completions per prompt a+b=: the right sum, then a wrong one (sum + 10)."""
    prompts, completions, answers = [], [], []
    for a, b in SUMS:
        for c in (a + b, a + b + 10):
            prompts.append(f"{a}+{b}=")
            completions.append(str(c))
            answers.append(str(a + b))
    return prompts, completions, {"answer": answers}


def test_step_verdict_is_the_expected_plus_minus_one_verdict():
    assert step_verdict(0.0) == 0.0
    assert step_verdict(math.log(3.0)) == pytest.approx(0.5)  # σ = 3/4: E[S] = 3/4 − 1/4
    assert step_verdict(-math.log(3.0)) == pytest.approx(-0.5)


def test_integrated_reward_is_outcome_plus_weighted_verdict(tiny_rm):
    prompts, completions, fields = batch()
    online = resolve_reward(f"rm_online(path={tiny_rm}, policy_reward=integrated, step_weight=0.5, updates_per_step=0)")
    got = online(prompts, completions, **fields)
    ref, tok, _ = load_reward_model(tiny_rm)
    s = score(ref, tok, prompts, completions, 64, 32)
    want = [(1.0 if i % 2 == 0 else -1.0) + 0.5 * (2 / (1 + math.exp(-x)) - 1) for i, x in enumerate(s)]
    assert got == pytest.approx(want, abs=1e-9)
    agree = sum((x > 0) == (i % 2 == 0) for i, x in enumerate(s)) / len(s)
    assert online.metrics()["rm_online/consistency"] == pytest.approx(agree)
    assert online.metrics()["rm_online/labels"] == 12


def test_consistency_update_is_the_agreeing_verdicts_likelihood_step(tiny_rm):
    prompts, completions, fields = batch()
    spec = f"rm_online(path={tiny_rm}, feedback=consistency, step_weight=1.0, lr=0.01, grad_clip=0, updates_per_step=1)"
    online = resolve_reward(spec)
    before = online(prompts, completions, **fields)  # policy_reward=rm: the scores before the update
    ref, tok, _ = load_reward_model(tiny_rm)
    s0 = score(ref, tok, prompts, completions, 64, 32)
    assert before == s0
    r = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(s0))])  # the outcome O
    opt = torch.optim.AdamW([w for w in ref.parameters() if w.requires_grad], lr=0.01, weight_decay=0.0)
    ids, mask = encode(tok, prompts, completions, 32)
    ref.train()
    loss = -torch.nn.functional.logsigmoid(r * ref(ids, mask)).mean()
    loss.backward()
    opt.step()
    after_ref = score(ref, tok, prompts, completions, 64, 32)
    after = score(online.rm, online.tokenizer, prompts, completions, 64, 32)
    assert after == pytest.approx(after_ref, abs=1e-6)
    assert online.metrics()["rm_online/consistency_loss"] == pytest.approx(float(loss.detach()), abs=1e-6)


def test_consistency_feedback_teaches_the_judge_the_outcome(tiny_rm):
    prompts, completions, fields = batch()
    online = resolve_reward(f"rm_online(path={tiny_rm}, feedback=consistency, policy_reward=integrated, lr=0.001)")
    first = None
    for _ in range(10):
        online(prompts, completions, **fields)
        first = online.metrics()["rm_online/consistency"] if first is None else first
    online(prompts, completions, **fields)
    assert online.metrics()["rm_online/consistency"] == 1.0 > first
    verdicts = [step_verdict(x) for x in score(online.rm, online.tokenizer, prompts, completions, 64, 32)]
    assert min(verdicts[0::2]) > 0 > max(verdicts[1::2])  # right sums judged +, wrong ones −
    assert online.summary_fields()["rm_online_consistency"] > first


def test_state_round_trip_keeps_the_consistency_counts(tiny_rm):
    prompts, completions, fields = batch()
    a = resolve_reward(f"rm_online(path={tiny_rm}, feedback=consistency, policy_reward=integrated)")
    a(prompts, completions, **fields)
    b = resolve_reward(f"rm_online(path={tiny_rm}, feedback=consistency, policy_reward=integrated)")
    b.load_state_dict(a.state_dict())
    assert b(prompts, completions, **fields) == a(prompts, completions, **fields)
    assert b.counts == a.counts and a.counts["judged"] == 24


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"feedback": "votes"}, "feedback must be"),
        ({"policy_reward": "outcome"}, "policy_reward"),
        ({"step_weight": -1.0}, "step_weight"),
        ({"feedback": "consistency", "label_noise": 0.2}, "label_noise"),
    ],
)
def test_bad_options_give_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OnlineRMParams(path="x", **kwargs)
