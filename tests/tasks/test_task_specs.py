"""The task registry and `data.task` as a piece spec: every task registers itself with checked, documented
parameters; the spec's string, YAML and override spellings resolve to one canonical string; the old
`data.*` task knobs fail naming their new spelling; the loader's cross-field check reads the resolved task."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ascent.config import ConfigError, load_config
from ascent.config.loader import config_from_dict, to_dict
from ascent.config.schema import DataConfig
from ascent.tasks import TASKS, task_piece
from ascent.tasks.addition import AdditionParams
from ascent.tasks.search_world import SearchWorldParams
from ascent.tasks.textworld import TextWorldParams


def test_every_task_module_registers_itself():
    assert TASKS.names() == [
        "addition",
        "code_functions",
        "cues",
        "gsm8k",
        "gsm_symbolic",
        "hf",
        "jsonl",
        "needle",
        "opt_modelling",
        "search_world",
        "sql_world",
        "sum_regression",
        "textworld",
        "word_problems",
        "workflow",
    ]
    for entry in TASKS.entries():
        assert entry.description, entry.name
        if entry.params is not None:
            entry.params()  # the defaults are valid
            assert all(text for _, _, _, text in TASKS.params_help(entry.name)), f"{entry.name}: a field without help"


def test_recipes_name_their_task_and_parameters():
    cfg = load_config("default")
    assert cfg.data.task == "addition" and task_piece(cfg.data).params == AdditionParams(
        digits=2, teacher_carry_drop=0.6
    )
    search = task_piece(load_config("search-agent").data)
    assert search.name == "search_world" and search.params.top_k == 1 and search.params.oracle_open is False
    assert search.params.relations == ["employer", "headquarters", "population", "capital"]
    world = task_piece(load_config("textworld").data)
    assert (
        world.name == "textworld" and world.params.prompt == "Goal: {commands}" and world.params.observation_chars == 60
    )
    assert task_piece(load_config("smollm2-gsm").data).name == "word_problems"
    for recipe in ("default", "search-agent", "textworld", "smollm2-gsm"):
        cfg = load_config(recipe)
        assert config_from_dict(to_dict(cfg)) == cfg  # config.yaml round trip of the canonical spec


def test_task_spec_spellings_resolve_to_one_canonical_string():
    a = load_config("default", ["data.task=addition(digits=3, teacher_carry_drop=1)"])
    b = load_config("default", ["data.task.addition.digits=3", "data.task.addition.teacher_carry_drop=1.0"])
    assert a.data.task == b.data.task == "addition(digits=3, teacher_carry_drop=1.0)"
    # an override naming the recipe's task merges into its parameters; naming another replaces them
    merged = task_piece(load_config("search-agent", ["data.task=search_world(people=4)"]).data)
    assert merged.params.people == 4 and merged.params.top_k == 1
    other = load_config("search-agent", ["data.task=addition", "agent.max_total_tokens=256"])
    assert other.data.task == "addition"
    assert task_piece(DataConfig(task="x", train="t.jsonl")).name == "jsonl", "data.train selects the jsonl task"


@pytest.mark.parametrize(
    "override,message",
    [
        ("data.task=addition(digits=0)", "digits must be >= 1"),
        ("data.task=addition(teacher_carry_drop=1.5)", "teacher_carry_drop must be in"),
        ("data.task=search_world(hops=[4])", "hops must be a non-empty list"),
        ("data.task=search_world(relations=[colour])", "unknown"),
        ("data.task=search_world(oracle_p_guess=2)", "oracle_p_guess and oracle_p_redundant must be in"),
        ("data.task=search_world(cities=1, countries=2)", "cities >= countries"),
        ("data.task=textworld(oracle_p_stop=1.5)", "oracle_p_stop"),
        ("data.task=textworld(prompt=nothing)", "must contain"),
        ("data.task=textworld(size=huge)", "size"),
        ("data.task=gsm_symbolic(max_answer=-1)", "max_answer must be >= 0"),
        ("data.task=addition(nope=1)", "unknown key .*nope"),
        ("data.task=jsonl(x=1)", "takes no parameters"),
        ("data.task=multiplication", "unknown task 'multiplication'"),
    ],
)
def test_task_parameters_are_checked_where_they_are_declared(override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config("default", [override])
    assert "data.task" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "override,new",
    [
        ("data.digits=3", "data.task=addition(digits=3)"),
        ("data.teacher_carry_drop=1.0", "data.task=addition(teacher_carry_drop=1.0)"),
        ("data.search_world.people=4", "data.task=search_world(people=4)"),
        ("data.search_world.hops=[1, 2]", "data.task=search_world(hops=[1, 2])"),
        ("data.textworld.size=tiny", "data.task=textworld(size=tiny)"),
    ],
)
def test_old_task_knobs_fail_naming_the_new_spelling(override, new):
    with pytest.raises(ConfigError, match=re.escape(new)) as err:
        load_config("default", [override])
    assert str(err.value).startswith(override.partition("=")[0] + " was removed") and "YAML: task: {" in str(err.value)


def test_a_removed_section_in_a_recipe_names_its_spec(tmp_path):
    recipe = tmp_path / "old.yaml"
    recipe.write_text("data:\n  task: search_world\n  search_world:\n    people: 4\n    hops: [1, 2]\n")
    with pytest.raises(ConfigError, match=re.escape("data.task=search_world(people=4, hops=[1, 2])")) as err:
        load_config(recipe)
    assert "task: {search_world: {people: 4, hops: [1, 2]}}" in str(err.value)


def test_scratch_model_must_hold_a_search_world_episode():
    with pytest.raises(ConfigError, match="agent.max_total_tokens=600 exceeds model.max_position_embeddings=512"):
        load_config("search-agent", ["agent.max_total_tokens=600"])
    assert (
        load_config("default", ["agent.max_total_tokens=600"]).agent.max_total_tokens == 600
    )  # other tasks: no episodes


def test_params_are_frozen_dataclasses_with_their_ranges():
    for cls in (AdditionParams, SearchWorldParams, TextWorldParams):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    with pytest.raises(ValueError, match="people"):
        SearchWorldParams(people=0)
    with pytest.raises(ValueError, match="observation_chars"):
        TextWorldParams(observation_chars=-1)
