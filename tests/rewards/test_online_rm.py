"""`rm_online`: the Bradley–Terry update against a hand-made AdamW step, the chosen's score rising, the exact flip
share, an exact state round trip, and the errors a bad spec gives."""

from __future__ import annotations

import io
import random

import pytest
import torch

from ascent.app.train_rm import save_reward_model
from ascent.config.loader import load_config
from ascent.policy.model import build_policy
from ascent.rewards.online_rm import exact_flips
from ascent.rewards.reward_model import FORMAT, VERSION, RewardModel, bt_loss, encode, load_reward_model, score
from ascent.rewards.runner import RewardRunner, RewardSpecError, resolve_reward
from ascent.tasks import load_task
from ascent.typed import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")
TINY_MODEL = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1"]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    """An untrained tiny reward-model folder (random trunk and head)."""
    cfg = load_config("default", [*TINY_MODEL, "model.intermediate_size=64"])
    policy = build_policy(cfg.model, load_task(cfg.data, 0).tokenizer, 0)
    torch.manual_seed(0)
    rm = RewardModel(policy.model.float())
    meta = {"format": FORMAT, "version": VERSION, "max_length": 32, "micro_batch_size": 64, "pair_accuracy": 0.5}
    out = tmp_path_factory.mktemp("online") / "rm"
    save_reward_model(out, rm, policy.tokenizer, meta, {})
    return out


def batch(sums: list[tuple[int, int]], wrong_offset: int = 10):
    """Groups of two completions per prompt a+b=: the right sum and a wrong one (sum + wrong_offset)."""
    prompts, completions, fields = [], [], {"answer": [], "group": []}
    for g, (a, b) in enumerate(sums):
        for c in (a + b, a + b + wrong_offset):
            prompts.append(f"{a}+{b}=")
            completions.append(str(c))
            fields["answer"].append(str(a + b))
            fields["group"].append(g)
    return prompts, completions, fields


SUMS = [(12, 34), (55, 66), (19, 28), (70, 45), (3, 8), (41, 41)]


def test_one_update_is_a_bradley_terry_adamw_step_and_raises_the_chosen(tiny_rm):
    prompts, completions, fields = batch(SUMS)
    online = resolve_reward(f"rm_online(path={tiny_rm}, lr=0.01, grad_clip=0, updates_per_step=1)")
    before = online(prompts, completions, **fields)
    ref, tok, _ = load_reward_model(tiny_rm)  # the same step by hand: all 6 (right, wrong) pairs, AdamW
    assert before == score(ref, tok, prompts, completions, 64, 32)  # the reward is the score before the update
    opt = torch.optim.AdamW([w for w in ref.parameters() if w.requires_grad], lr=0.01, weight_decay=0.0)
    assert sorted(online.last_pairs) == [(2 * g, 2 * g + 1) for g in range(6)]  # (right, wrong) of each group
    chosen, rejected = [i for i, _ in online.last_pairs], [j for _, j in online.last_pairs]
    ids, mask = encode(tok, [prompts[i] for i in chosen + rejected], [completions[i] for i in chosen + rejected], 32)
    ref.train()
    s = ref(ids, mask)
    loss, _ = bt_loss(s[:6], s[6:])
    loss.backward()
    opt.step()
    after_ref = score(ref, tok, prompts, completions, 64, 32)
    after = score(online.rm, online.tokenizer, prompts, completions, 64, 32)
    assert after == pytest.approx(after_ref, abs=1e-6)
    assert online.metrics()["rm_online/loss"] == pytest.approx(float(loss.detach()), abs=1e-6)
    gap = lambda xs: [xs[2 * g] - xs[2 * g + 1] for g in range(len(SUMS))]  # noqa: E731 - chosen - rejected
    assert sum(gap(after)) > sum(gap(before))
    m = online.metrics()
    assert m["rm_online/pairs"] == 6 and m["rm_online/labels"] == 12 and m["rm_online/flipped_seen"] == 0
    assert m["rm_online/pair_accuracy"] == sum(d > 0 for d in gap(before)) / 6  # measured before the update


def test_repeated_updates_learn_to_rank_right_above_wrong(tiny_rm):
    prompts, completions, fields = batch(SUMS)
    online = resolve_reward(f"rm_online(path={tiny_rm}, lr=0.003, updates_per_step=4)")
    for _ in range(5):
        online(prompts, completions, **fields)
    assert online.metrics()["rm_online/pair_accuracy"] == 1.0
    assert online.summary_fields()["rm_online_pairs"] == 30


def test_flips_are_an_exact_share_of_the_pairs_seen(tiny_rm):
    online = resolve_reward(f"rm_online(path={tiny_rm}, label_noise=0.25, updates_per_step=0, pairs_per_step=5)")
    seen = 0
    for k in (6, 1, 3, 6, 2):  # calls with different numbers of groups (at most pairs_per_step pairs each)
        online(*batch(SUMS[:k])[:2], **batch(SUMS[:k])[2])
        seen += min(k, 5)
        assert online.counts["pairs"] == seen and online.counts["flipped"] == round(0.25 * seen)
    assert online.counts["labels"] == 2 * sum(min(k, 5) for k in (6, 1, 3, 6, 2))  # it stops at 5 pairs
    assert len(exact_flips(4, 1, 4, 0.25, random.Random(0))) == 1  # round(0.25 * 8) - 1
    assert exact_flips(4, 3, 2, 0.25, random.Random(0)) == []  # never negative


def test_the_label_budget_caps_the_verdicts(tiny_rm):
    online = resolve_reward(f"rm_online(path={tiny_rm}, updates_per_step=0, pairs_per_step=2, max_labels=5)")
    online(*batch(SUMS)[:2], **batch(SUMS)[2])
    assert online.counts["labels"] == 4 and online.counts["pairs"] == 2  # two groups of 2; a third would make 6


def test_flipped_labels_train_the_wrong_way(tiny_rm):
    prompts, completions, fields = batch(SUMS)
    clean = resolve_reward(f"rm_online(path={tiny_rm}, lr=0.01, updates_per_step=1)")
    noisy = resolve_reward(f"rm_online(path={tiny_rm}, lr=0.01, updates_per_step=1, label_noise=0.49, seed=1)")
    clean(prompts, completions, **fields)
    noisy(prompts, completions, **fields)
    assert noisy.counts["flipped"] == round(0.49 * 6) == 3  # half the pairs point the other way
    assert noisy.metrics()["rm_online/loss"] != pytest.approx(clean.metrics()["rm_online/loss"])


def test_state_round_trip_resumes_exactly(tiny_rm):
    spec = (
        f"rm_online(path={tiny_rm}, lr=0.01, updates_per_step=2, label_noise=0.3, pairs_per_step=4, "
        "buffer_size=6, replay_pairs=3)"
    )
    calls = [batch(SUMS[:k], offset) for k, offset in ((6, 10), (5, 1), (6, 100))]
    straight = resolve_reward(spec)
    outs = [straight(p, c, **f) for p, c, f in calls]
    first = resolve_reward(spec)
    first(calls[0][0], calls[0][1], **calls[0][2])
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    resumed = resolve_reward(spec)
    resumed.load_state_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    again = [resumed(p, c, **f) for p, c, f in calls[1:]]
    assert again == outs[1:]  # bitwise
    assert resumed.counts == straight.counts and resumed.rng.getstate() == straight.rng.getstate()
    assert resumed.buffer == straight.buffer and len(straight.buffer) == 6  # the newest 6 of 12 pairs
    assert straight.metrics()["rm_online/replayed"] == 3


def test_samples_without_a_label_form_no_pair(tiny_rm):
    prompts, completions, fields = batch(SUMS[:2])
    fields["answer"] = [None] * len(prompts)
    online = resolve_reward(f"rm_online(path={tiny_rm})")
    assert len(online(prompts, completions, **fields)) == 4  # scored all the same
    assert online.counts["pairs"] == 0 and online.metrics()["rm_online/labels"] == 4


def test_in_the_runner_summary_and_metrics(tiny_rm):
    runner = RewardRunner([f"rm_online(path={tiny_rm}, label_noise=0.2)", "exact_answer"], [1.0, 0.0])
    prompts, completions, fields = batch(SUMS)
    rows = [{"answer": a, "group": g} for a, g in zip(fields["answer"], fields["group"])]
    result = runner.score(prompts, completions, rows)
    assert bool(result.valid.all()) and result.stats["rm_online/pairs"] == 6
    assert "rm_online" in next(iter(runner.state_dict()))
    fields_out = runner.summary_fields()
    assert fields_out["rm_online_flipped"] == 1 and fields_out["rm_pair_accuracy"] == 0.5


@pytest.mark.parametrize(
    "spec, message",
    [
        ("rm_online", "path must name a reward-model folder"),
        ("rm_online(path={rm}, label_noise=0.5)", "label_noise must be in"),
        ("rm_online(path={rm}, pairs_per_step=0)", "pairs_per_step must be >= 1"),
        ("rm_online(path={rm}, lr=0)", "lr must be > 0"),
        ("rm_online(path={rm}, labeller='rm:x')", "labeller must be a verifier"),
        ("rm_online(path={rm}, typo=1)", "unknown key"),
        ("rm_online(path={rm}, buffer_size=0, replay_pairs=4)", "replay_pairs needs a buffer_size"),
        ("rm_online(path={missing})", "does not exist"),
    ],
)
def test_bad_specs_are_config_errors_at_load(tiny_rm, tmp_path, spec, message):
    with pytest.raises(ConfigError, match=message):
        load_config("default", [f"reward={spec.format(rm=tiny_rm, missing=tmp_path / 'nope')}"])


def test_an_unknown_labeller_names_the_valid_ones(tiny_rm):
    with pytest.raises(RewardSpecError, match="unknown reward 'nope'"):
        resolve_reward(f"rm_online(path={tiny_rm}, labeller=nope)")


def test_a_run_with_rm_online_resumes_bitwise(tiny_rm, tmp_path):
    """2 steps + resume + 2 steps == 4 steps: the trainer checkpoints the reward model, its optimizer and RNG."""
    from safetensors.torch import load_file

    from ascent.app.pipeline import train
    from ascent.trainer.checkpoint import Checkpointer

    spec = f"rm_online(path={tiny_rm}, lr=0.01, updates_per_step=2, label_noise=0.25, buffer_size=16, replay_pairs=4)"
    overrides = [
        *TINY_MODEL,
        "model.intermediate_size=64",
        "data.task=addition(digits=1)",
        "data.num_eval=8",
        "warmstart.steps=2",
        "warmstart.eval_every=0",
        "train.steps=4",
        "train.prompts_per_step=4",
        "rollout.samples_per_prompt=4",
        "train.eval_every=0",
        "train.checkpoint_every=0",
        "eval.pass_k=0",
        "eval.reward=exact_answer",
        "control.enabled=false",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    cfg = load_config("default", [*overrides, f"reward=['{spec}',exact_answer]", "reward_weights=[1.0,0.0]"])
    full = train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    assert train(cfg.__class__(**{**cfg.__dict__, "name": "split"}), stop_at=2) is None
    resumed = train(run_dir=tmp_path / "split", resume=True)
    assert full["rm_online_pairs"] == resumed["rm_online_pairs"] > 0
    assert full["rm_online_flipped"] == resumed["rm_online_flipped"] == round(0.25 * full["rm_online_pairs"])
    a, b = (
        load_file(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors") for n in ("full", "split")
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
    states = [Checkpointer.load_state(Checkpointer(tmp_path / n / "checkpoints").latest()) for n in ("full", "split")]
    (rm_a,), (rm_b,) = (list(s["rewards"].values()) for s in states)
    assert all(torch.equal(rm_a["model"][k], rm_b["model"][k]) for k in rm_a["model"])
    assert rm_a["counts"] == rm_b["counts"] and rm_a["buffer"] == rm_b["buffer"]


def test_rm_online_needs_an_evaluation_verifier(tiny_rm):
    # the evaluator's copy of rm_online would train on held-out completions with their gold labels
    with pytest.raises(ConfigError, match="eval.reward"):
        load_config("default", [f"reward=['rm_online(path={tiny_rm})',exact_answer]"])
    cfg = load_config("default", [f"reward=['rm_online(path={tiny_rm})',exact_answer]", "eval.reward=exact_answer"])
    assert cfg.eval.reward == "exact_answer"
