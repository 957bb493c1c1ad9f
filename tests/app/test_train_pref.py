"""`ascent train-pref`: gradient accumulation gives the update of one big batch, a tiny end-to-end run raises the
implicit reward's pair accuracy and writes a run `ascent eval` reads back, LoRA from a run directory, and the
errors bad settings give."""

from __future__ import annotations

import json
import random

import pytest
import torch

from ascent.algorithms.preference import PREFERENCE_LOSSES
from ascent.app.pairs import PreferencePair
from ascent.app.runs import RunDirError
from ascent.app.train_pref import accumulate, encode_pairs, reference_logprobs, sequence_logprobs, train_pref
from ascent.cli import main
from ascent.config.preference import load_pref_job
from ascent.data.prompts import PromptEncoder
from ascent.typed import ConfigError
from tests.conftest import tiny_qwen

TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.num_eval=40",
    "warmstart.steps=0",
    "control.enabled=false",
    "eval.pass_k=0",
    "logging.progress=false",
]


def addition_pairs(n: int, seed: int) -> list[PreferencePair]:
    """Pairs of different completion lengths (the right sum vs a wrong one with a digit more or less)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randrange(50), rng.randrange(50)
        wrong = str(a + b) + str(rng.randrange(10)) if rng.random() < 0.5 else str(a + b)[:-1] or "0"
        out.append(PreferencePair(f"{a}+{b}=", str(a + b), wrong))
    return out


def test_pairs_are_scored_as_prompt_then_completion_and_eos(tokenizer):
    enc = PromptEncoder(tokenizer)
    batch = encode_pairs(enc, tokenizer, [PreferencePair("1+2=", "3", "12")])
    assert batch.input_ids.shape[0] == 2  # chosen, then rejected
    for row, text in enumerate(["3", "12"]):
        ids = batch.input_ids[row][batch.completion_mask[row] > 0].tolist()
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        assert batch.input_ids[row, : len(enc("1+2="))].tolist() == enc("1+2=")
    model = tiny_qwen(tokenizer)
    logp, tokens = sequence_logprobs(model, batch)
    assert tokens.tolist() == [2.0, 3.0]
    with torch.no_grad():  # the sum of log p(token | prefix) over the completion, from the full log-softmax
        full = torch.log_softmax(model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits, -1)
        by_hand = [
            sum(
                float(full[r, t - 1, batch.input_ids[r, t]])
                for t in range(batch.input_ids.shape[1])
                if batch.completion_mask[r, t]
            )
            for r in range(2)
        ]
    assert logp.tolist() == pytest.approx(by_hand, abs=1e-5)


@pytest.mark.parametrize("spec", ["dpo(beta=0.5, label_smoothing=0.1)", "ipo(tau=0.5)", "simpo(gamma=0.3)"])
def test_gradient_accumulation_gives_the_one_batch_update(tokenizer, spec, one_thread):
    enc, pairs = PromptEncoder(tokenizer), addition_pairs(8, 0)
    loss_fn = PREFERENCE_LOSSES.resolve(spec)
    grads = []
    for micro in (8, 2, 3):  # 3: uneven micro-batches (3, 3, 2) weighted by their share of the pairs
        model = tiny_qwen(tokenizer, seed=1).train()
        with torch.no_grad():  # a reference that differs from the policy
            ref_model = tiny_qwen(tokenizer, seed=2)
        refs = reference_logprobs(ref_model, enc, tokenizer, pairs, 4)
        m = accumulate(model, loss_fn, enc, tokenizer, pairs, refs, micro)
        grads.append((torch.cat([p.grad.flatten() for p in model.parameters()]), m))
    (one, m_one), *rest = grads
    assert float(one.abs().sum()) > 0
    for g, m in rest:
        assert torch.allclose(g, one, atol=1e-6, rtol=1e-4)
        assert m["pref/loss"] == pytest.approx(m_one["pref/loss"], rel=1e-5)
        assert m["pref/accuracy"] == pytest.approx(m_one["pref/accuracy"])


@pytest.fixture(scope="module")
def dpo_run(tmp_path_factory):
    """A tiny scratch policy of the default task, a 3-step warm start, then DPO for 20 steps on 64 verifier pairs
    with a quarter flipped (one torch thread, restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("pref") / "dpo"
    job = load_pref_job(
        "default",
        [
            *TINY,
            "warmstart.steps=3",  # no pref.init: the recipe's warm start is trained first, into OUT/warmstart
            "warmstart.eval_every=0",
            "pairs.num_train=64",
            "pairs.num_eval=32",
            "pairs.label_noise=0.25",
            "pref.loss=dpo(beta=0.1)",
            "pref.steps=20",
            "pref.batch_size=16",
            "pref.micro_batch_size=8",
            "pref.optim.lr=1e-3",
            "pref.eval_every=10",
            f"pref.out={out}",
        ],
    )
    yield job, train_pref(job)
    torch.set_num_threads(threads)


def test_dpo_raises_the_implicit_reward_pair_accuracy_on_training_pairs(dpo_run):
    _, s = dpo_run
    assert s["train_pairs"] == 64 and s["flipped_pairs"] == 16 and s["held_out_pairs"] == 32
    assert s["train_pair_accuracy_before"] == 0.0  # π = π_ref: every implicit reward is 0, ties count as wrong
    assert s["train_pair_accuracy_after"] >= 0.75
    assert s["train_pair_margin_after"] > s["train_pair_margin_before"]
    assert s["train_pair_verifier_accuracy_after"] > 0.5  # the flips undone: it learned mostly the verifier's side
    assert [p["step"] for p in s["curve"]] == [10]


def test_the_output_is_a_run_that_ascent_eval_reads(dpo_run, capsys, one_thread):
    job, s = dpo_run
    out = job.out_dir
    assert (out / "config.yaml").exists() and (out / "checkpoints" / "step_000020").is_dir()
    assert (out / "warmstart" / "model.safetensors").exists() and s["warmstart_seconds"] > 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["phase"] == "pref"] == list(range(1, 21))
    assert main(["eval", str(out), "eval.pass_k=0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["accuracy"] == s["accuracy_after"] and got["completion_len"] == s["completion_len_after"]


def test_lora_ipo_from_a_run_directory(dpo_run, tmp_path, capsys, one_thread):
    job, _ = dpo_run
    out = tmp_path / "ipo"
    assert (
        main(
            [
                "train-pref",
                *TINY,
                "pairs.num_train=32",
                "pairs.num_eval=16",
                "pref.loss.ipo.tau=0.5",
                "pref.lora=true",
                "pref.steps=3",
                "pref.batch_size=8",
                "pref.micro_batch_size=8",
                "pref.optim.lr=1e-2",
                f"pref.init={job.out_dir}",
                f"pref.out={out}",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    printed = json.loads(text[text.index('{\n  "run"') :])
    s = json.loads((out / "summary.json").read_text())
    assert printed["loss"] == "ipo(tau=0.5)" and s["init"] == str(job.out_dir)
    assert s["pair_accuracy_after"] == printed["pair_accuracy_after"]
    assert s["accuracy_before"] == pytest.approx(
        json.loads((job.out_dir / "summary.json").read_text())["accuracy_after"]
    )
    assert main(["eval", str(out), "eval.pass_k=0"]) == 0  # adapters merged: a plain model loads
    assert json.loads(capsys.readouterr().out)["accuracy"] == s["accuracy_after"]


def test_hf_folder_init_writes_a_run_that_builds_from_that_folder(dpo_run, tmp_path, capsys, one_thread):
    job, _ = dpo_run
    assert main(["export", str(job.out_dir), str(tmp_path / "hf")]) == 0
    small = ["pairs.num_train=16", "pairs.num_eval=8", "pref.steps=2", "pref.batch_size=8", "pref.micro_batch_size=8"]
    out = tmp_path / "from-hf"
    s = train_pref(load_pref_job("default", [*TINY, *small, f"pref.init={tmp_path / 'hf'}", f"pref.out={out}"]))
    assert "source: hf" in (out / "config.yaml").read_text()
    capsys.readouterr()
    assert main(["eval", str(out), "eval.pass_k=0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["accuracy"], got["completion_len"]) == (s["accuracy_after"], s["completion_len_after"])


def test_bad_settings_are_clear_errors(dpo_run, tmp_path, one_thread):
    job, _ = dpo_run
    with pytest.raises(ConfigError, match="batch_size=10 is not a multiple of micro_batch_size=4"):
        load_pref_job("default", [*TINY, "pref.batch_size=10", "pref.micro_batch_size=4"])
    with pytest.raises(ConfigError, match="pref.loss: unknown preference loss 'kto'"):
        load_pref_job("default", [*TINY, "pref.loss=kto"])
    with pytest.raises(ConfigError, match="beta must be > 0"):
        load_pref_job("default", [*TINY, "pref.loss.dpo.beta=0"])
    with pytest.raises(ConfigError, match="unknown key pref.epochs"):
        load_pref_job("default", [*TINY, "pref.epochs=3"])
    with pytest.raises(ConfigError, match="model.lora.enabled"):
        load_pref_job("default", [*TINY, "model.lora.enabled=true"])
    assert load_pref_job("default", [*TINY, "pref.loss.simpo.gamma=0.5"]).pref.loss == "simpo(gamma=0.5)"
    with pytest.raises(RunDirError, match="set pref.overwrite=true"):
        train_pref(load_pref_job("default", [*TINY, f"pref.out={job.out_dir}"]))
    small = ["pairs.num_train=8", "pairs.num_eval=4", "pref.steps=1", "pref.batch_size=4", "pref.micro_batch_size=4"]
    with pytest.raises(RunDirError, match="neither a run, a checkpoint in one, nor a HF model folder"):
        train_pref(
            load_pref_job("default", [*TINY, *small, f"pref.init={tmp_path / 'nowhere'}", f"pref.out={tmp_path / 'o'}"])
        )
