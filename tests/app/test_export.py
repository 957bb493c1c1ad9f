"""`ascent export`: a LoRA run becomes a plain Hugging Face folder (adapters merged) that a fresh process loads
with transformers alone and whose greedy answers on the held-out set are ascent's evaluation's, token for token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from ascent.app.export import MANIFEST, export, save_tokenizer
from ascent.app.pipeline import evaluate, prepare, train
from ascent.app.runs import RunDirError, find_config, read_run_config
from ascent.cli import main
from ascent.config import load_config
from ascent.policy.model import build_policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.trainer.checkpoint import load_weights
from tests.conftest import TINY, tiny_qwen

RUN = TINY + [
    "name=lora",
    "model.hidden_size=64",
    "model.intermediate_size=128",
    "data.task=addition(digits=1, teacher_carry_drop=0)",
    "data.num_eval=24",
    "model.lora.enabled=true",
    "model.lora.alpha=8",
    "model.lora.target_modules=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]",
    # the adapters learn to add (about half the held-out sums right): non-zero, so the merge matters, and
    # the greedy answers differ from row to row and end at EOS before max_new_tokens
    "warmstart.steps=300",
    "warmstart.batch_size=32",
    "warmstart.eval_every=0",
    "warmstart.optim.lr=1e-2",
    "train.steps=2",
    "train.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "train.optim.lr=3e-4",
    "eval.pass_k=0",
]

FRESH = r"""
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

folder, job = sys.argv[1], json.loads(sys.stdin.read())
rows, probe = job["rows"], job["probe"]
meta = json.load(open(f"{folder}/ascent_export.json"))
model = AutoModelForCausalLM.from_pretrained(folder).eval()
tok = AutoTokenizer.from_pretrained(folder)


def encode(prompt):  # as the run encoded its prompts (ascent's PromptEncoder)
    if not meta["chat_template"]:
        return tok(prompt)["input_ids"]
    system = [{"role": "system", "content": meta["system_prompt"]}] if meta["system_prompt"] else []
    messages = system + [{"role": "user", "content": prompt}]
    return tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]


completions = []
for row in rows:
    ids = torch.tensor([encode(row["prompt"])])
    with torch.no_grad():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=meta["max_new_tokens"]
        )
    completions.append(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
correct = [c.strip() == str(r["answer"]).strip() for c, r in zip(completions, rows)]
assert "ascent" not in sys.modules, sorted(m for m in sys.modules if m.startswith("ascent"))
ids = tok(probe)["input_ids"]
print(json.dumps({"completions": completions, "accuracy": sum(correct) / len(rows), "probe": [ids, tok.decode(ids)]}))
"""


PROBE = "12 + 3 = 15  7+8=15 "  # spaces: a Qwen2Tokenizer rebuilt from a plain save would drop them


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(load_config("default", RUN + [f"output_dir={root}"]))
    finally:
        torch.set_num_threads(before)
    return root / "lora"


def test_export_loads_without_ascent_and_answers_as_ascent_evaluates(lora_run, tmp_path, capsys, one_thread):
    out = tmp_path / "hf"
    assert main(["export", str(lora_run), str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    meta = json.loads((out / MANIFEST).read_text())
    assert printed["exported"] == str(out) and printed["step"] == meta["step"] == 2
    assert meta["lora_merged"] is True and meta["chat_template"] is False and meta["system_prompt"] is None
    assert meta["checkpoint"] == "checkpoints/step_000002" and meta["source_run"] == lora_run.name
    assert not any(isinstance(v, str) and v.startswith("/") for v in meta.values())  # no path of this machine
    assert not any(p.name.startswith("adapter") for p in out.iterdir())  # plain weights, no peft adapter

    # the merged weights are the base model's plus the trained adapters: the adapted projections' weights
    # changed, everything else (their biases included) did not
    cfg = read_run_config(lora_run)
    run, policy = prepare(cfg, lora_run, {})
    base = build_policy(replace(cfg.model, lora=replace(cfg.model.lora, enabled=False)), run.task.tokenizer, cfg.seed)
    base_state, merged = base.model.state_dict(), load_file(out / "model.safetensors")
    assert set(merged) == set(base_state) - {"lm_head.weight"}  # tied embeddings saved once
    for name, value in merged.items():
        same = torch.equal(value, base_state[name])
        adapted = name.endswith(".weight") and name.split(".")[-2] in cfg.model.lora.target_modules
        assert same != adapted, name

    # ascent's greedy evaluation of the checkpoint, as `ascent eval` runs it
    load_weights(policy.model, find_config(lora_run)[1])
    rows = run.task.eval
    batch, _ = run.evaluator.sample(policy, rows, 1, 0.0, None)
    accuracy = evaluate(run, policy, pass_k=False)["accuracy"]
    assert accuracy == json.loads((lora_run / "state.json").read_text())["after"]["accuracy"]
    assert accuracy > 0 and len(set(batch.completions)) > 3  # the comparison is not vacuous

    fresh = subprocess.run(
        [sys.executable, "-c", FRESH, str(out)],
        input=json.dumps({"rows": [{"prompt": r["prompt"], "answer": r["answer"]} for r in rows], "probe": PROBE}),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"},
        timeout=120,
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    got = json.loads(fresh.stdout.strip().splitlines()[-1])
    tok = run.task.tokenizer
    assert got["probe"] == [tok(PROBE)["input_ids"], tok.decode(tok(PROBE)["input_ids"])]
    assert got["completions"] == batch.completions
    assert got["accuracy"] == accuracy


def test_export_refuses_an_existing_out_dir_and_what_is_no_run(lora_run, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(RunDirError, match="already exists and is not empty.*--overwrite"):
        export(lora_run, out)
    assert main(["export", str(lora_run), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ascent: error:") and "--overwrite" in err and "\n" not in err
    assert (out / "keep.txt").read_text() == "mine"
    checkpoint = find_config(lora_run)[1]
    for precious in (lora_run, lora_run.parent, checkpoint, checkpoint.parent):
        with pytest.raises(RunDirError, match="would delete it"):
            export(lora_run, precious, overwrite=True)
    assert (checkpoint / "adapter_model.safetensors").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        export(lora_run, tmp_path / "file", overwrite=True)

    (tmp_path / "nothing").mkdir()
    with pytest.raises(RunDirError, match="neither a run directory nor a checkpoint"):
        export(tmp_path / "nothing", tmp_path / "out")
    assert main(["export", str(tmp_path / "nothing"), str(tmp_path / "out")]) == 2
    assert "ascent: error:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_export_overwrite_replaces_the_folder(lora_run, tmp_path):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    with pytest.raises(RunDirError, match="is not an earlier export"):
        export(lora_run, out, overwrite=True)
    (out / MANIFEST).write_text("{}")  # an earlier export: replaced
    export(lora_run, out, overwrite=True)
    assert not (out / "stale.txt").exists() and (out / "model.safetensors").exists()
    assert not list(tmp_path.glob(".tmp-*")) and not list(tmp_path.glob(".old-*"))


def test_a_project_tokenizer_of_a_qwen2_model_loads_back_with_auto_tokenizer(tmp_path):
    """transformers loads a Qwen2 folder's tokenizer as a byte-level BPE rebuilt from the vocabulary: saved
    plainly, a char tokenizer would lose its spaces, newlines and pieces; export saves it so that it does not."""
    from transformers import AutoTokenizer

    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz0123456789+= \n", pieces=["is", "is a", "ka", "\n\n"])
    tiny_qwen(tok).save_pretrained(tmp_path)
    assert save_tokenizer(tok, tmp_path) is True  # the plain save did not come back the same
    back = AutoTokenizer.from_pretrained(tmp_path)
    for text in ["kaka is a ki", "12 + 3 = 15", "two\n\nlines  and  spaces "]:
        ids = tok(text)["input_ids"]
        assert back(text)["input_ids"] == ids and back.decode(ids) == tok.decode(ids), text
