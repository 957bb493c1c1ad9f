"""The `hf` task (ascent.tasks.hf_dataset): each file kind `datasets` reads, a local dataset folder and a
`save_to_disk` folder, loaded from tiny fixtures with no network; column mapping, templates, answer extraction,
held-out splits, and one-line errors for a missing column, an empty or missing split and a missing file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascent.config import load_config
from ascent.config.schema import DataConfig
from ascent.tasks import DataError, load_task
from ascent.tasks.hf_dataset import extract_answer

datasets = pytest.importorskip("datasets")

RECORDS = [
    {"question": f"What is {a} + {b}?", "solution": f"{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b:,}", "id": i}
    for i, (a, b) in enumerate([(1, 2), (30, 4), (500, 600), (7, 8), (9, 10), (2000, 3)])
]


def _spec(path: Path, tmp_path: Path, **extra: str) -> str:
    args = {"path": json.dumps(str(path)), "prompt": "question", "answer": "solution", "answer_pattern": "gsm8k"}
    args |= {"cache_dir": json.dumps(str(tmp_path / "cache")), **extra}
    return "hf(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")"


def _write(kind: str, folder: Path, records: list[dict], name: str = "train") -> Path:
    """`records` as a file of `kind` (jsonl, parquet, csv) or a save_to_disk folder (saved)."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "jsonl":
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path
    table = datasets.Dataset.from_list(records)
    if kind == "parquet":
        table.to_parquet(str(folder / f"{name}.parquet"))
        return folder / f"{name}.parquet"
    if kind == "csv":
        table.to_csv(str(folder / f"{name}.csv"), index=False)
        return folder / f"{name}.csv"
    datasets.DatasetDict({name: table}).save_to_disk(str(folder / "saved"))
    return folder / "saved"


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "csv", "saved"])
def test_each_file_kind_loads_the_same_rows(kind, tmp_path):
    path = _write(kind, tmp_path / "data", RECORDS)
    task = load_task(DataConfig(task=_spec(path, tmp_path), num_eval=2), seed=0)
    rows = sorted(task.train + task.eval, key=lambda r: r["id"])
    assert len(task.eval) == 2 and len(task.train) == 4
    assert [r["prompt"] for r in rows] == [r["question"] for r in RECORDS]
    assert [r["answer"] for r in rows] == ["3", "34", "1100", "15", "19", "2003"]  # "#### 2,003" -> 2003
    assert [r["id"] for r in rows] == list(range(6)) and rows[0]["solution"] == RECORDS[0]["solution"]
    assert task.reward == "math_verify" and task.lenient == "last_number"
    assert task.teacher(rows[2], None) == "1100"


def test_a_folder_of_split_files_and_a_named_eval_split(tmp_path):
    folder = tmp_path / "folder"
    _write("jsonl", folder, RECORDS[:4], "train")
    _write("jsonl", folder, RECORDS[4:], "test")
    task = load_task(DataConfig(task=_spec(folder, tmp_path, eval_split="test"), num_eval=0), seed=0)
    assert [r["id"] for r in task.train] == [0, 1, 2, 3] and [r["id"] for r in task.eval] == [4, 5]
    capped = load_task(DataConfig(task=_spec(folder, tmp_path, eval_split="test"), num_eval=1, num_train=2), seed=0)
    assert [r["id"] for r in capped.train] == [0, 1] and [r["id"] for r in capped.eval] == [4]


def test_held_out_rows_are_a_seeded_shuffle_and_never_repeat_in_training(tmp_path):
    path = _write("jsonl", tmp_path, RECORDS)
    a, b = (load_task(DataConfig(task=_spec(path, tmp_path), num_eval=3), seed=s) for s in (0, 0))
    c = load_task(DataConfig(task=_spec(path, tmp_path), num_eval=3), seed=1)
    assert a.eval == b.eval and {r["id"] for r in a.eval} != {r["id"] for r in c.eval}
    assert not {r["prompt"] for r in a.eval} & {r["prompt"] for r in a.train}


def test_eval_path_template_and_a_custom_pattern(tmp_path):
    train = _write("csv", tmp_path / "tr", RECORDS[:3])
    test = _write("parquet", tmp_path / "te", RECORDS[3:])
    spec = _spec(
        train,
        tmp_path,
        eval_path=json.dumps(str(test)),
        template='"Q: {question} (#{id})"',
        answer_pattern=json.dumps(r">>(\d+)\n"),
        reward="exact_answer",
        lenient="null",
    )
    task = load_task(DataConfig(task=spec, num_eval=0), seed=0)
    assert task.train[1]["prompt"] == "Q: What is 30 + 4? (#1)" and task.train[1]["answer"] == "34"
    assert [r["answer"] for r in task.eval] == ["15", "19", "2003"]
    assert task.reward == "exact_answer" and task.lenient is None


def test_rows_the_pattern_does_not_match_are_skipped_and_counted(tmp_path, caplog):
    records = [*RECORDS[:3], {"question": "q?", "solution": "no final line", "id": 9}]
    path = _write("jsonl", tmp_path, records)
    task = load_task(DataConfig(task=_spec(path, tmp_path), num_eval=1), seed=0)
    assert len(task.train) + len(task.eval) == 3
    assert "skipped 1 of 4 rows" in caplog.text


def test_the_spec_goes_through_a_recipe_override(tmp_path):
    path = _write("jsonl", tmp_path, RECORDS)
    cfg = load_config("smollm2-arith", [f"data.task={_spec(path, tmp_path)}", "data.num_eval=2"])
    assert cfg.data.task.startswith("hf(") and "answer_pattern=gsm8k" in cfg.data.task
    assert len(load_task(cfg.data, 0).eval) == 2


@pytest.mark.parametrize(
    "make,extra,message",
    [
        (lambda t: _write("jsonl", t, RECORDS), {"prompt": "problem"}, r"has no column 'problem' \(columns: question"),
        (lambda t: _write("csv", t, RECORDS), {"answer": "label"}, r"has no column 'label'"),
        (lambda t: _write("saved", t, RECORDS), {"split": "test"}, r"has no split 'test' \(splits: train\)"),
        (
            lambda t: _write("jsonl", t / "f", RECORDS),
            {"eval_split": "test"},
            r"is one file, so one split: .*eval_path=",
        ),
        (lambda t: _write("jsonl", t / "f", RECORDS) and t / "f", {"eval_split": "dev"}, r"cannot load split 'dev' of"),
        (lambda t: t / "nope.jsonl", {}, r"data file or folder .*nope.jsonl' does not exist"),
        (lambda t: _empty_csv(t), {}, r"split 'train' of .*empty.csv' is empty \(the file holds no rows\)"),
        (lambda t: _empty_parquet(t), {}, r"split 'train' of .*empty.parquet' is empty"),
        (lambda t: _write("jsonl", t, RECORDS), {"answer_pattern": '"#(x)"'}, r"finds an answer in no row"),
    ],
)
def test_bad_data_is_a_one_line_error(make, extra, message, tmp_path):
    path = make(tmp_path)
    with pytest.raises(DataError, match=message) as err:
        load_task(DataConfig(task=_spec(path, tmp_path, **extra), num_eval=1), seed=0)
    assert "\n" not in str(err.value)


def _empty_csv(folder: Path) -> Path:
    (folder / "empty.csv").write_text("question,solution\n")
    return folder / "empty.csv"


def _empty_parquet(folder: Path) -> Path:
    datasets.Dataset.from_dict({"question": [], "solution": []}).to_parquet(str(folder / "empty.parquet"))
    return folder / "empty.parquet"


def test_extract_answer_rules():
    assert extract_answer("so 7.50 in all\n#### $7.50", r"####\s*\$?(.+)$") == "7.5"
    assert extract_answer("#### 4.0", "gsm8k") == "4"
    assert extract_answer("Paris", None) == "Paris"  # not a number: kept as text
    with pytest.raises(ValueError, match="needs a group"):
        load_config("default", ["data.task=hf(path=x.jsonl, answer_pattern=abc)"])


def test_the_shipped_gsm8k_file_through_hf_gives_the_gsm8k_tasks_rows(tmp_path):
    """The gzipped test file read by `datasets` with the gsm8k answer rule: the same 1,319 prompts and answers
    as the `gsm8k` task's own reader (two independent paths to the same normalised answers)."""
    from ascent.tasks.gsm8k import DATA_DIR, gsm8k_rows

    spec = (
        f'hf(path="{DATA_DIR / "test.jsonl.gz"}", prompt=question, answer=answer, answer_pattern=gsm8k, '
        f'cache_dir="{tmp_path}")'
    )
    task = load_task(DataConfig(task=spec, num_eval=0, num_train=0), seed=0)
    ours = gsm8k_rows("test", prompt_format="plain")
    assert len(task.train) == 1319  # shuffled with the split seed: compare as sorted pairs
    assert sorted((r["prompt"], r["answer"]) for r in task.train) == sorted((r["prompt"], r["answer"]) for r in ours)
