"""Tasks: one module per task, each registering itself in `TASKS` with its own parameters, its data builder,
its reward default, its teacher and (agent tasks) its agent wiring. Importing this package imports every
task module, so the registry is full.

    data.task=addition(digits=3)                  # YAML: task: {addition: {digits: 3}}
    data.task=search_world(people=4, hops=[1, 2])  # YAML: task: {search_world: {people: 4, hops: [1, 2]}}
"""

from ascent.tasks import (  # noqa: F401
    addition,
    code_functions,
    cues,
    env_adapt,  # RLAnything's environment adaptation (data.sampler=env_adapt): harder / easier task variants
    gsm8k,
    gsm_symbolic,
    hf_dataset,
    jsonl,
    llm4cov,  # the llm4cov prompt sampler (data.sampler), over code rows
    needle,  # key-value haystacks with quoted evidence (EAPO's evidence reward)
    opt_modelling,
    regression,  # sum_regression: real-valued, imbalanced targets (the CCC reward)
    search_world,
    sql_world,
    textworld,
    word_problems,
    workflow,  # FlowReasoner's query-level workflows (reward workflow_exec)
)
from ascent.tasks.agent import AgentTask, demonstrations
from ascent.tasks.base import TASKS, DataError, Row, TaskData, Teacher, answer_teacher, load_task, task_piece
from ascent.tasks.jsonl import read_jsonl, write_jsonl

__all__ = [
    "TASKS",
    "AgentTask",
    "DataError",
    "Row",
    "TaskData",
    "Teacher",
    "answer_teacher",
    "demonstrations",
    "load_task",
    "read_jsonl",
    "task_piece",
    "write_jsonl",
]
