"""`rm_ensemble`: mean / min / UWO of standardised member scores by hand, the standardisation frozen at the first
batch and restored on resume, and the errors a bad spec gives."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascent.app.pairs import write_pairs
from ascent.app.train_rm import train_rm
from ascent.config.reward_model import load_rm_job
from ascent.rewards.reward_model import HEAD_FILE, load_reward_model, score
from ascent.rewards.rm_ensemble import combine
from ascent.rewards.runner import RewardRunner, RewardSpecError, resolve_reward
from ascent.typed import ConfigError
from tests.rewards.test_reward_model import TINY_MODEL, separable_pairs

PROMPTS = ["3+4=", "3+4=", "8+9=", "8+9=", "2+2=", "2+2="]
COMPLETIONS = ["7", "72", "17", "175", "4", "41"]


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """A tiny trained reward model `a`; `b` = 3·a + 5 (same ranking, other scale); `c` = -a (opposite ranking)."""
    root = tmp_path_factory.mktemp("ens")
    write_pairs(separable_pairs(128, 0), root / "train.jsonl")
    write_pairs(separable_pairs(32, 1), root / "eval.jsonl")
    job = load_rm_job(
        "default",
        [
            *TINY_MODEL,
            f"pairs.file={root / 'train.jsonl'}",
            f"pairs.eval_file={root / 'eval.jsonl'}",
            "rm.steps=8",
            "rm.batch_size=32",
            "rm.micro_batch_size=32",
            "rm.optim.lr=3e-3",
            "rm.eval_every=0",
            "rm.max_length=32",
            f"rm.out={root / 'a'}",
        ],
    )
    train_rm(job)
    head = load_file(root / "a" / HEAD_FILE)
    for name, scale, shift in (("b", 3.0, 5.0), ("c", -1.0, 0.0)):
        shutil.copytree(root / "a", root / name)
        save_file(
            {"weight": head["weight"] * scale, "bias": head["bias"] * scale + shift}, str(root / name / HEAD_FILE)
        )
    return {k: str(root / k) for k in "abc"}


def raw_scores(path: str, prompts=PROMPTS, completions=COMPLETIONS) -> torch.Tensor:
    rm, tok, _ = load_reward_model(path)
    return torch.tensor(score(rm, tok, prompts, completions, 64, 32), dtype=torch.float64)


def test_combine_by_hand():
    s = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, 0.5], [2.0, 2.0, 0.5]])
    assert combine(s, "mean").tolist() == pytest.approx([2.0, 0.0, 0.5])
    assert combine(s, "min").tolist() == pytest.approx([1.0, -2.0, 0.5])
    assert combine(s, "median").tolist() == pytest.approx([2.0, 0.0, 0.5])
    # UWO: mean - λ·population variance; variances 2/3, 8/3, 0
    assert combine(s, "uwo", 0.5).tolist() == pytest.approx([2.0 - 1 / 3, 0.0 - 4 / 3, 0.5])


def test_members_are_standardised_on_the_first_batch(members):
    a = raw_scores(members["a"])
    za = (a - a.mean()) / a.std(unbiased=False)
    assert torch.allclose(raw_scores(members["b"]), 3 * a + 5, atol=1e-4)  # the fixture does what it says
    # a and 3a+5 agree once standardised: no disagreement, every aggregate is z_a
    for aggregate in ("mean", "median", "min", "uwo"):
        fn = resolve_reward(f"rm_ensemble(paths=[{members['a']},{members['b']}],aggregate={aggregate})")
        assert fn(PROMPTS, COMPLETIONS) == pytest.approx(za.tolist(), abs=1e-4)
        assert fn.metrics()["rm_ensemble/disagreement"] == pytest.approx(0.0, abs=1e-4)
    # a and -a disagree everywhere: mean 0, min -|z|, UWO -λ z²
    pair = f"paths=[{members['a']},{members['c']}]"
    assert resolve_reward(f"rm_ensemble({pair},aggregate=mean)")(PROMPTS, COMPLETIONS) == pytest.approx(
        [0.0] * 6, abs=1e-4
    )
    assert resolve_reward(f"rm_ensemble({pair},aggregate=min)")(PROMPTS, COMPLETIONS) == pytest.approx(
        (-za.abs()).tolist(), abs=1e-4
    )
    assert resolve_reward(f"rm_ensemble({pair},aggregate=uwo,uwo_coef=2.0)")(PROMPTS, COMPLETIONS) == pytest.approx(
        (-2.0 * za**2).tolist(), abs=1e-4
    )
    # without standardisation the raw scores combine: mean of a and 3a+5 is 2a + 2.5
    raw = resolve_reward(f"rm_ensemble(paths=[{members['a']},{members['b']}],aggregate=mean,normalize=false)")
    assert raw(PROMPTS, COMPLETIONS) == pytest.approx((2 * a + 2.5).tolist(), abs=1e-4)


def test_standardisation_is_frozen_and_survives_a_resume(members):
    spec = f"rm_ensemble(paths=[{members['a']},{members['b']},{members['c']}],aggregate=uwo)"
    runner = RewardRunner([spec])
    first = runner.score(PROMPTS, COMPLETIONS, [{} for _ in PROMPTS])
    later_prompts, later = ["5+5=", "5+5=", "1+1="], ["10", "100", "2"]
    second = runner.score(later_prompts, later, [{} for _ in later])
    # batch 2 is scored with batch 1's statistics: z = (r - μ_1) / σ_1, not re-standardised
    a1, a2 = raw_scores(members["a"]), raw_scores(members["a"], later_prompts, later)
    z2 = (a2 - a1.mean()) / a1.std(unbiased=False)
    assert second.rewards.tolist() == pytest.approx((z2 / 3 - (z2**2) * (8 / 9)).tolist(), abs=1e-3)  # (z,z,-z)
    resumed = RewardRunner([spec])
    resumed.load_state_dict(runner.state_dict())
    assert resumed.score(later_prompts, later, [{} for _ in later]).rewards.tolist() == pytest.approx(
        second.rewards.tolist(), abs=1e-6
    )
    fresh = RewardRunner([spec])  # without the state, batch 2 would be standardised on itself: different rewards
    assert fresh.score(later_prompts, later, [{} for _ in later]).rewards.tolist() != pytest.approx(
        second.rewards.tolist(), abs=1e-3
    )
    assert bool(first.valid.all())
    assert runner.summary_fields()["rm_pair_accuracies"] == [load_reward_model(members["a"])[2]["pair_accuracy"]] * 3


def test_bad_specs_are_clear_errors(members, tmp_path):
    with pytest.raises((ConfigError, RewardSpecError, ValueError), match="at least two"):
        resolve_reward(f"rm_ensemble(paths=[{members['a']}])")
    with pytest.raises((ConfigError, RewardSpecError, ValueError), match="aggregate must be one of"):
        resolve_reward(f"rm_ensemble(paths=[{members['a']},{members['b']}],aggregate=max)")
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_reward(f"rm_ensemble(paths=[{members['a']},{tmp_path / 'nope'}])")


def test_the_evaluators_copy_scores_with_the_training_copys_standardisation(members, tmp_path):
    # the evaluator builds its own reward runner; before the fix its rm_ensemble froze its own statistics on its
    # first held-out batch, so after a resume (fresh evaluator, trained policy) the proxy was another function
    from ascent.app.pipeline import evaluate, prepare
    from ascent.config import load_config
    from tests.conftest import TINY

    spec = f"rm_ensemble(paths=[{members['a']},{members['b']}])"
    cfg = load_config("default", [*TINY, f"reward=['{spec}']", "data.num_eval=4", f"output_dir={tmp_path}"])
    run, policy = prepare(cfg, tmp_path / "run", {})
    train_copy, eval_copy = run.rewards.fns[0], run.evaluator.rewards.fns[0]
    run.rewards.score(PROMPTS, COMPLETIONS, [{} for _ in PROMPTS])  # the first training batch fixes the stats
    evaluate(run, policy, pass_k=False)
    assert eval_copy.stats == train_copy.stats
    # a resumed run: fresh runners, the training copy's checkpointed state restored
    resumed, policy = prepare(cfg, tmp_path / "run", {})
    resumed.rewards.load_state_dict(run.rewards.state_dict())
    evaluate(resumed, policy, pass_k=False)
    assert resumed.evaluator.rewards.fns[0].stats == train_copy.stats
    # and the other way round: the pre-RL evaluation fixes them first, training adopts them
    fresh, policy = prepare(cfg, tmp_path / "run", {})
    evaluate(fresh, policy, pass_k=False)
    assert fresh.rewards.fns[0].stats == fresh.evaluator.rewards.fns[0].stats is not None
