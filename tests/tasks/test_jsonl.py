"""User data (`ascent.tasks.jsonl`): reading JSONL rows with one-line errors, and the jsonl task."""

from __future__ import annotations

import json

import pytest

from ascent.config.schema import DataConfig
from ascent.tasks import DataError, load_task, read_jsonl


# ---------------------------------------------------------------------------------------------------------
# read_jsonl
# ---------------------------------------------------------------------------------------------------------
def one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_read_jsonl_ok(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n\n{"prompt": "2+2=", "answer": 4, "x": [1]}\n')
    rows = read_jsonl(path)
    assert rows == [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": 4, "x": [1]}]


def test_read_jsonl_missing_file(tmp_path):
    with pytest.raises(DataError) as err:
        read_jsonl(tmp_path / "nope.jsonl")
    msg = one_line(err)
    assert "nope.jsonl" in msg and "does not exist" in msg


def test_read_jsonl_bad_json_names_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c",\n{"prompt": "d"}\n')
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    msg = one_line(err)
    assert f"{path}:3:" in msg and "JSON" in msg


@pytest.mark.parametrize("line", ['{"question": "a"}', '{"prompt": 5}', '["prompt", "a"]', '"just text"'])
def test_read_jsonl_row_without_prompt(tmp_path, line):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    msg = one_line(err)
    assert f"{path}:2:" in msg and "'prompt'" in msg
    if line.startswith('{"question"'):
        assert "question" in msg  # shows the keys it got


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_read_jsonl_empty(tmp_path, text):
    path = tmp_path / "d.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    assert "no rows" in one_line(err)


def test_load_task_jsonl(tmp_path):
    train, ev = tmp_path / "t.jsonl", tmp_path / "e.jsonl"
    train.write_text(json.dumps({"prompt": "a", "answer": "1"}) + "\n")
    ev.write_text(json.dumps({"prompt": "b", "answer": "2"}) + "\n")
    task = load_task(DataConfig(task="jsonl", train=str(train), eval=str(ev)), seed=0)
    assert [r["prompt"] for r in task.train] == ["a"] and [r["prompt"] for r in task.eval] == ["b"]
    assert task.reward == "exact_answer"
    with pytest.raises(DataError, match="data.eval"):
        load_task(DataConfig(task="jsonl", train=str(train)), seed=0)
