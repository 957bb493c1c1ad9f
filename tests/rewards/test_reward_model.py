"""Bradley–Terry reward models: the loss by hand, label flips, pairs from the verifier, training to a held-out pair
accuracy, the saved folder round trip, `reward=rm:PATH`, and the errors a bad path gives."""

from __future__ import annotations

import math
import random
import shutil

import pytest
import torch

from ascent.app.pairs import PreferencePair, corrupt, flip_labels, make_pairs, read_pairs, write_pairs
from ascent.app.train_rm import train_rm
from ascent.cli import main
from ascent.config.loader import load_config
from ascent.config.reward_model import load_rm_job
from ascent.rewards.reward_model import HEAD_FILE, bt_loss, load_reward_model, score
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.typed import ConfigError

TINY_MODEL = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.num_eval=50",
]


def neg_log_sigmoid(x: float) -> float:
    return math.log(1.0 + math.exp(-x))


def test_bt_loss_by_hand_with_and_without_margin():
    chosen, rejected = torch.tensor([2.0, 0.5]), torch.tensor([1.0, 1.5])  # differences +1 and -1
    loss, metrics = bt_loss(chosen, rejected)
    assert float(loss) == pytest.approx((neg_log_sigmoid(1.0) + neg_log_sigmoid(-1.0)) / 2, abs=1e-6)  # 0.81326
    assert float(loss) == pytest.approx(0.813262, abs=1e-5)
    assert metrics["rm/accuracy"] == 0.5 and metrics["rm/score_diff"] == pytest.approx(0.0)
    loss, metrics = bt_loss(chosen, rejected, torch.tensor([0.5, 0.0]))  # -log σ(1 - 0.5), -log σ(-1 - 0)
    assert float(loss) == pytest.approx((neg_log_sigmoid(0.5) + neg_log_sigmoid(-1.0)) / 2, abs=1e-6)  # 0.89367
    assert metrics["rm/accuracy"] == 0.5  # accuracy compares the scores, not the margin-shifted difference


def test_label_flips_are_an_exact_share_fixed_by_the_seed():
    pairs = [PreferencePair(f"{i}+0=", str(i), str(i + 1)) for i in range(50)]
    flipped = flip_labels(pairs, 0.2, seed=3)
    which = [i for i, p in enumerate(flipped) if p.flipped]
    assert len(which) == 10  # round(0.2 * 50), not about 10
    assert which == [i for i, p in enumerate(flip_labels(pairs, 0.2, seed=3)) if p.flipped]
    assert which != [i for i, p in enumerate(flip_labels(pairs, 0.2, seed=4)) if p.flipped]
    for i in which:
        assert (flipped[i].chosen, flipped[i].rejected) == (pairs[i].rejected, pairs[i].chosen)
    assert all(flipped[i] == pairs[i] for i in range(50) if i not in which)
    assert sum(p.flipped for p in flip_labels(pairs[:7], 0.2, seed=0)) == 1  # round(1.4)
    assert not any(p.flipped for p in flip_labels(pairs, 0.0, seed=0))


def test_corrupt_changes_exactly_one_character():
    rng = random.Random(0)
    for answer in ["7", "42", "100", "abc"]:
        for _ in range(20):
            bad = corrupt(answer, rng)
            assert len(bad) == len(answer) and sum(a != b for a, b in zip(answer, bad)) == 1


def test_pairs_from_the_verifier_with_noisy_labels(tmp_path):
    job = load_rm_job("default", [*TINY_MODEL, "pairs.num_train=40", "pairs.num_eval=10", "pairs.label_noise=0.25"])
    train, held = make_pairs(job)
    assert len(train) == 40 and len(held) == 10
    assert sum(p.flipped for p in train) == 10
    for p in train + held:
        a, b = p.prompt[:-1].split("+")
        right = str(int(a) + int(b))
        assert (p.rejected if p.flipped else p.chosen) == right  # labelled by the verifier, then flipped
        assert (p.chosen if p.flipped else p.rejected) != right
    assert not any(p.flipped for p in held)
    assert {p.prompt for p in train}.isdisjoint({p.prompt for p in held})  # held-out rows only
    write_pairs(train, tmp_path / "p.jsonl")
    assert read_pairs(tmp_path / "p.jsonl") == train


def test_wrong_candidates_from_corruptions_balance_the_teachers_direction():
    """The teacher only drops carries (its wrong sums are smaller); with `corrupt` too, the rejected answers are
    larger than the right one about as often as smaller, so "larger is better" no longer fits the labels."""
    pairs = {}
    for wrong in ("[teacher]", "[teacher,corrupt]", "[corrupt]"):
        job = load_rm_job("default", [*TINY_MODEL, "pairs.num_train=300", "pairs.num_eval=10", f"pairs.wrong={wrong}"])
        pairs[wrong], _ = make_pairs(job)
    smaller = {w: sum(int(p.rejected) < int(p.chosen) for p in ps) / len(ps) for w, ps in pairs.items()}
    assert smaller["[teacher]"] > 0.6 and 0.3 < smaller["[corrupt]"] < 0.55, smaller
    assert smaller["[corrupt]"] < smaller["[teacher,corrupt]"] < smaller["[teacher]"], smaller
    with pytest.raises(ConfigError, match="wrong must be"):
        load_rm_job("default", ["pairs.wrong=[oracle]"])


def test_pairs_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "1+1=", "chosen": "2", "rejected": "3"}\n{"prompt": "1+2=", "chosen": "3"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: a pair needs string fields"):
        read_pairs(bad)
    bad.write_text('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": "big"}\n')
    with pytest.raises(ValueError, match="margin must be a number"):
        read_pairs(bad)


def separable_pairs(n: int, seed: int) -> list[PreferencePair]:
    """1-digit sums: chosen the right sum, rejected the right sum with a digit appended (always wrong: a 1-digit
    sum has at most two digits)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randrange(10), rng.randrange(10)
        out.append(PreferencePair(f"{a}+{b}=", str(a + b), str(a + b) + str(rng.randrange(10))))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny reward model trained by `train_rm` on separable pairs read from files; its folder and metadata."""
    root = tmp_path_factory.mktemp("rm")
    write_pairs(separable_pairs(256, 0), root / "train.jsonl")
    write_pairs(separable_pairs(64, 1), root / "eval.jsonl")
    job = load_rm_job(
        "default",
        [
            *TINY_MODEL,
            f"pairs.file={root / 'train.jsonl'}",
            f"pairs.eval_file={root / 'eval.jsonl'}",
            "rm.steps=15",
            "rm.batch_size=32",
            "rm.micro_batch_size=16",
            "rm.optim.lr=3e-3",
            "rm.eval_every=0",
            "rm.max_length=32",
            f"rm.out={root / 'rm'}",
        ],
    )
    meta = train_rm(job)
    return root / "rm", meta


def test_training_reaches_held_out_pair_accuracy(trained):
    folder, meta = trained
    assert meta["pair_accuracy"] >= 0.9, meta["pair_accuracy_curve"]
    assert meta["train_pairs"] == 256 and meta["held_out_pairs"] == 64 and meta["flipped_pairs"] == 0
    for name in ("config.json", "model.safetensors", HEAD_FILE, "reward_model.json", "manifest.json"):
        assert (folder / name).exists(), name


def test_a_fresh_load_scores_identically_and_reproduces_the_accuracy(trained):
    folder, meta = trained
    held = read_pairs(folder / "pairs.eval.jsonl")
    prompts = [p.prompt for p in held]
    rm1, tok1, _ = load_reward_model(folder)
    rm2, tok2, _ = load_reward_model(folder)
    s1 = score(rm1, tok1, prompts, [p.chosen for p in held], 64, 32)
    assert s1 == score(rm2, tok2, prompts, [p.chosen for p in held], 64, 32)  # two fresh loads: bitwise equal
    assert score(rm1, tok1, prompts, [p.chosen for p in held], 7, 32) == pytest.approx(s1, abs=1e-5)  # padding
    r1 = score(rm1, tok1, prompts, [p.rejected for p in held], 64, 32)
    assert sum(c > r for c, r in zip(s1, r1)) / len(held) == meta["pair_accuracy"]  # the saved model is the trained one


def test_rm_path_reward_scores_a_batch_and_ranks_right_above_wrong(trained):
    folder, meta = trained
    runner = RewardRunner([f"rm:{folder}"])
    prompts = ["3+4=", "3+4=", "8+9=", "8+9="]
    result = runner.score(prompts, ["7", "72", "17", "175"], [{} for _ in prompts])
    assert bool(result.valid.all())
    assert result.rewards[0] > result.rewards[1] and result.rewards[2] > result.rewards[3]
    assert runner.summary_fields() == {"rm_pair_accuracy": meta["pair_accuracy"]}  # what summary.json gets
    two = RewardRunner([f"rm:{folder}", "exact_answer", f"rm:{folder}"])
    assert two.summary_fields() == {
        "rm_pair_accuracy": meta["pair_accuracy"],
        "rm_pair_accuracy_2": meta["pair_accuracy"],
    }
    one_at_a_time = resolve_reward(f"reward_model(path='{folder}', micro_batch_size=1)")
    assert one_at_a_time(prompts, ["7", "72", "17", "175"]) == pytest.approx(result.rewards.tolist(), abs=1e-5)


def test_bad_reward_model_paths_are_config_errors(trained, tmp_path):
    folder, _ = trained
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("default", [f"reward=rm:{tmp_path / 'nope'}"])
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="is not a reward model"):
        load_config("default", [f"reward=rm:{tmp_path / 'plain'}"])
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / HEAD_FILE).write_bytes((broken / HEAD_FILE).read_bytes()[:20])
    with pytest.raises(ConfigError, match="is damaged"):
        RewardRunner([f"rm:{broken}"])


def test_cli_train_rm_end_to_end_and_bad_rm_reward(capsys, tmp_path):
    common = [*TINY_MODEL, "pairs.num_train=32", "pairs.num_eval=8", "pairs.label_noise=0.25"]
    assert main(["make-pairs", "default", *common, "--out", str(tmp_path / "pairs")]) == 0
    assert sum(p.flipped for p in read_pairs(tmp_path / "pairs" / "pairs.train.jsonl")) == 8
    out = tmp_path / "rm"
    args = [*common, "rm.steps=2", "rm.batch_size=8", "rm.micro_batch_size=4", f"rm.out={out}"]
    assert main(["train-rm", "default", *args]) == 0
    assert (out / "reward_model.json").exists() and '"flipped_pairs": 8' in capsys.readouterr().out
    assert main(["train-rm", "default", *args]) == 2  # exists: refuses without rm.overwrite
    assert "rm.overwrite=true" in capsys.readouterr().err
    assert main(["train", "default", f"reward=rm:{tmp_path / 'missing'}", f"output_dir={tmp_path}"]) == 2
    assert "does not exist; train one with `ascent train-rm`" in capsys.readouterr().err
