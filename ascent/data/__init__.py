"""Built-in tasks, dataset loading and the resumable sampler."""

from ascent.data.sampler import RowSampler
from ascent.data.tasks import TASKS, DataError, TaskData, load_task, read_jsonl

__all__ = ["TASKS", "DataError", "RowSampler", "TaskData", "load_task", "read_jsonl"]
