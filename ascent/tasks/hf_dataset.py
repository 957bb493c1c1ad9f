"""The `hf` task: any dataset the way users load them, through the Hugging Face `datasets` library
(`pip install 'ascent[data]'`): a Hub dataset when the Hub is reachable, a local dataset folder (data files, or
one written by `save_to_disk`), or JSONL / JSON / Parquet / CSV files; columns mapped onto the row fields the
rewards read, with an optional rule that extracts the final answer from a worked solution.

    data.task="hf(path=openai/gsm8k, name=main, split=train, eval_split=test, prompt=question, answer=answer,
                  answer_pattern=gsm8k)"
    data.task="hf(path=data/train.parquet, eval_path=data/test.parquet, prompt=problem, answer=solution)"
    data.task="hf(path=data/rows.csv, template='Q: {question} A:', answer=label, reward=exact_answer, lenient=null)"

Rows: `prompt` (the `prompt` column, or `template` formatted with the row's columns), `answer` (the `answer`
column, or what `answer_pattern` extracts from it; numbers normalised, `1,000` -> `1000`), and every other column
with a plain value (text, number, boolean), which reward functions receive as keyword arguments. With no
`eval_split`/`eval_path` the rows are shuffled with the split seed and the first data.num_eval held out; with one,
held-out rows are its first data.num_eval (0: all). data.num_train (when set) caps the training rows.
The chat template is the generic `data.chat_template=true` (with `data.system_prompt`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any, Optional

from ascent.config.schema import DataConfig
from ascent.tasks.base import TASKS, DataError, Row, TaskData, answer_teacher, split_rows
from ascent.tasks.gsm_symbolic import normalize_number

log = logging.getLogger(__name__)

BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
"""The `datasets` builder of each data-file suffix (a trailing .gz/.bz2/.xz/.zst is decompressed by datasets)."""
PATTERNS = {"gsm8k": r"####\s*(.+?)\s*$"}
"""Named answer-extraction rules: gsm8k: the text after the solution's final `#### ` (Cobbe et al. 2021)."""
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_PLAIN = (str, int, float, bool)


@dataclass(frozen=True)
class HfParams:
    """The hf task: where the dataset is and which columns are what."""

    path: str = ""
    """A Hub dataset id (`openai/gsm8k`), a local folder (data files, or a `save_to_disk` folder) or a data file
    (.jsonl, .json, .parquet, .csv, optionally compressed)."""
    name: Optional[str] = None
    """The dataset's configuration (Hub datasets with several, e.g. `main` for openai/gsm8k)."""
    split: str = "train"
    """The split training rows come from."""
    eval_split: Optional[str] = None
    """The split held-out rows come from (None: hold out data.num_eval rows of `split`, or use `eval_path`)."""
    eval_path: Optional[str] = None
    """Held-out rows from another dataset or file (its `eval_split`, default `split`); None: from `path`."""
    prompt: str = "prompt"
    """The column holding the prompt (ignored when `template` is set)."""
    template: Optional[str] = None
    """A prompt built from the row's columns with Python's str.format, e.g. `Question: {question}\\nAnswer:`."""
    answer: Optional[str] = "answer"
    """The column holding the reference answer (None: the rows have none, e.g. a reward model judges)."""
    answer_pattern: Optional[str] = None
    """Extract the answer from that column: a regular expression whose first group is the answer (searched, last
    line anchored with $ and MULTILINE off), or a named rule: gsm8k (the number after `####`). A row where it
    finds nothing is skipped and counted in a warning. None: the column as it is."""
    reward: str = "math_verify"
    """The reward (and strict grader): a reward spec."""
    lenient: Optional[str] = "last_number"
    """The lenient grader evaluation reports next to the strict one (None: none)."""
    cache_dir: Optional[str] = None
    """Where `datasets` keeps its Arrow cache (None: its default, ~/.cache/huggingface/datasets)."""

    def __post_init__(self) -> None:
        if self.answer_pattern is not None and self.answer_pattern not in PATTERNS:
            try:
                if re.compile(self.answer_pattern).groups < 1:
                    raise ValueError(f"answer_pattern {self.answer_pattern!r} needs a group (...) around the answer")
            except re.error as err:
                raise ValueError(f"answer_pattern {self.answer_pattern!r} is not a regular expression: {err}") from None
        if self.answer_pattern is not None and self.answer is None:
            raise ValueError("answer_pattern extracts from the answer column: set answer=COLUMN")


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise DataError("data.task=hf needs the datasets library: pip install 'ascent[data]'") from None
    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    return datasets


def data_file_builder(path: Path) -> Optional[str]:
    """The `datasets` builder that reads the data file `path` (None: not a data file name).

    >>> data_file_builder(Path("a/train.jsonl.gz")), data_file_builder(Path("t.parquet")), data_file_builder(Path("x"))
    ('json', 'parquet', None)
    """
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    return BUILDERS.get(suffixes[-1]) if suffixes else None


def load_split(path: str, name: Optional[str], split: str, cache_dir: Optional[str] = None) -> Any:
    """One split of a dataset as a `datasets.Dataset`: from a data file, a local folder or the Hub. Any failure
    (no such file, dataset or split; no network) is a one-line DataError."""
    datasets = _datasets()
    local = Path(path).expanduser()
    where = f"{path!r}" + (f" ({name})" if name else "")
    try:
        if local.is_file():
            builder = data_file_builder(local)
            if builder is None:
                raise DataError(f"{path!r}: not a data file datasets reads (.jsonl, .json, .parquet, .csv)")
            return datasets.load_dataset(builder, data_files={split: str(local)}, split=split, cache_dir=cache_dir)
        if local.is_dir() and any((local / f).exists() for f in ("dataset_dict.json", "state.json")):
            saved = datasets.load_from_disk(str(local))
            if isinstance(saved, datasets.DatasetDict):
                if split not in saved:
                    raise DataError(f"dataset {where} has no split {split!r} (splits: {', '.join(saved)})")
                return saved[split]
            return saved
        if not local.exists() and (path.startswith((".", "/", "~")) or data_file_builder(local) is not None):
            raise DataError(f"data file or folder {path!r} does not exist")
        return datasets.load_dataset(str(local) if local.is_dir() else path, name, split=split, cache_dir=cache_dir)
    except DataError:
        raise
    except Exception as err:  # datasets raises many kinds (FileNotFound, ValueError, ConnectionError, ...)
        if local.is_file() and holds_no_rows(local):  # datasets fails on these with StopIteration or "no data"
            raise DataError(f"split {split!r} of {where} is empty (the file holds no rows)") from None
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"cannot load split {split!r} of dataset {where}: {message}") from None


def holds_no_rows(path: Path) -> bool:
    """Whether an uncompressed data file has no rows: no non-blank line (a CSV: none after its header; Parquet: its
    metadata's row count)."""
    if path.suffix.lower() in _COMPRESSED:
        return False
    if data_file_builder(path) == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows == 0
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return len(lines) <= (1 if data_file_builder(path) == "csv" else 0)


def extract_answer(text: Any, pattern: Optional[str]) -> Optional[str]:
    """The row's answer: the column's text, or the first group of `pattern` (a regex or a named rule) searched in
    it; numbers normalised. None when the pattern finds nothing.

    >>> extract_answer("3 + 4 = <<3+4=7>>7 apples\\n#### 1,007", "gsm8k"), extract_answer(" 42 ", None)
    ('1007', '42')
    >>> extract_answer("no final line", "gsm8k") is None
    True
    """
    text = str(text).strip()
    if pattern is not None:
        match = re.search(PATTERNS.get(pattern, pattern), text)
        if match is None:
            return None
        text = match.group(1).strip()
    try:
        return normalize_number(text)
    except (ValueError, ZeroDivisionError):
        return text


def to_rows(dataset: Any, params: HfParams, where: str) -> list[Row]:
    """The rows of a `datasets.Dataset` (see the module docstring); missing columns and an empty split are
    DataErrors, rows without an answer the pattern finds are skipped and counted."""
    columns = list(dataset.column_names)
    needed = ([] if params.template else [params.prompt]) + ([params.answer] if params.answer else [])
    missing = [c for c in needed if c not in columns]
    if missing:
        raise DataError(
            f"{where} has no column {missing[0]!r} (columns: {', '.join(columns)}); map it with prompt=/answer="
        )
    if len(dataset) == 0:
        raise DataError(f"{where} is empty")
    rows, skipped = [], 0
    for n, record in enumerate(dataset):
        row: Row = {k: v for k, v in record.items() if isinstance(v, _PLAIN)}
        try:
            row["prompt"] = params.template.format(**record) if params.template else str(record[params.prompt])
        except (KeyError, IndexError, ValueError) as err:
            raise DataError(f"{where}, row {n}: template {params.template!r} cannot be filled ({err!r})") from None
        if params.answer:
            answer = (
                None if record[params.answer] is None else extract_answer(record[params.answer], params.answer_pattern)
            )
            if answer is None:
                skipped += 1
                continue
            row["answer"] = answer
        rows.append(row)
    if skipped:
        log.warning(
            "%s: skipped %d of %d rows whose answer column has no answer (answer_pattern)", where, skipped, n + 1
        )
    if not rows:
        raise DataError(f"{where}: answer_pattern {params.answer_pattern!r} finds an answer in no row")
    return rows


@TASKS.register("hf", params=HfParams, paper=None, fidelity="ascent")
def hf(cfg: DataConfig, seed: int, params: HfParams = HfParams()) -> TaskData:
    """Any dataset through the `datasets` library (Hub, local folder, JSONL/JSON/Parquet/CSV files) with column
    mapping and answer extraction; math-verify reward and the lenient last-number grader by default."""
    if not params.path:
        raise DataError("data.task=hf needs path=: a Hub dataset id, a local folder or a .jsonl/.parquet/.csv file")
    where = f"split {params.split!r} of {params.path!r}"
    if params.eval_split is not None and params.eval_path is None and Path(params.path).expanduser().is_file():
        raise DataError(f"{params.path!r} is one file, so one split: name the held-out file with eval_path=")
    rows = to_rows(load_split(params.path, params.name, params.split, params.cache_dir), params, where)
    if params.eval_split is None and params.eval_path is None:
        Random(seed).shuffle(rows)
        train, held = split_rows(rows, cfg)
    else:
        path, split = params.eval_path or params.path, params.eval_split or params.split
        name = params.name if params.eval_path is None else None
        held = to_rows(load_split(path, name, split, params.cache_dir), params, f"split {split!r} of {path!r}")
        held, train = held[: cfg.num_eval] if cfg.num_eval else held, rows
    if cfg.num_train:
        train = train[: cfg.num_train]
    if not train:
        raise DataError(f"{where}: no training rows are left after holding out data.num_eval={cfg.num_eval}")
    teacher = answer_teacher if params.answer else None
    return TaskData(train=train, eval=held, reward=params.reward, teacher=teacher, lenient=params.lenient)
