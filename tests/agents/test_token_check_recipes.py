"""The token checker on every trajectory of both agent recipes' tasks: `search_world` with the
`search-agent` recipe's task config and `textworld` with the `textworld` recipe's (small games), each
with (a) SmolLM2's tokenizer and chat template: the scripted demonstrator and a real SmolLM2 policy
playing a few short greedy episodes (where a divergence may only be SmolLM2's own non-canonical
tokenisation of its text, reported as "same text"), and (b) the default model's character tokenizer and chat template:
the demonstrator and a real tiny Qwen2 sampling at temperature 1. Every trajectory must pass; a
deliberately re-tokenised one must fail at the first re-tokenised model turn."""

from __future__ import annotations

import copy
import importlib.util
import random

import pytest
import torch

from ascent.agents import AgentConfig, check_trajectories, check_trajectory, rollout
from ascent.agents.trajectory import Trajectory
from ascent.config import load_config
from ascent.envs.textworld_env import STOP_STRINGS
from ascent.policy.model import Policy
from ascent.rollout import make_engine
from ascent.tasks import demonstrations, load_task

HAVE_TW = importlib.util.find_spec("textworld") is not None
TASKS = ["search_world", "textworld", "sql_world"]


def loop_for(recipe_cfg, **kw) -> AgentConfig:
    a = recipe_cfg.agent
    return AgentConfig(
        **{
            "max_turns": a.max_turns,
            "max_turn_tokens": a.max_turn_tokens,
            "max_total_tokens": 4000,
            "stop_strings": tuple(a.stop_strings),
            **kw,
        }
    )


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    """(recipe config, TaskData) per task: the recipes' own task configs on a few rows (the games are
    those of tests/tasks/test_textworld_task.py: generated once per session)."""
    cache = tmp_path_factory.getbasetemp() / "textworld-recipe-games"
    cache.mkdir(exist_ok=True)
    out = {}
    for name, recipe in (("search_world", "search-agent"), ("textworld", "textworld"), ("sql_world", "sql-agent")):
        if name == "textworld" and not HAVE_TW:
            continue
        cfg = load_config(
            recipe,
            ["data.num_train=3", "data.num_eval=2"]
            + ([f"data.task.textworld.cache_dir={cache}"] if name == "textworld" else []),
        )
        out[name] = (cfg, load_task(cfg.data, cfg.seed))
    return out


def test_recipes_stop_turns_at_their_closing_tags():
    assert load_config("textworld").agent.stop_strings == list(STOP_STRINGS)
    assert load_config("search-agent").agent.stop_strings == list(AgentConfig.stop_strings)


def get(recipes, name):
    if name not in recipes:
        pytest.skip("textworld is not installed (pip install 'ascent[agents]')")
    return recipes[name]


def retokenized(t: Trajectory, tokenizer) -> Trajectory:
    """The common bugs: each model turn's text re-tokenised on its own, with the tokenizer's default special
    tokens and a separator space in front (as when messages are joined with " ")."""
    ids = list(t.ids[: t.turns[0].start])
    for k, turn in enumerate(t.turns):
        ids += tokenizer(" " + turn.text, add_special_tokens=True)["input_ids"]
        end = turn.end - 1 if t.ids[turn.end - 1] == tokenizer.eos_token_id else turn.end
        ids += t.ids[end : t.turns[k + 1].start if k + 1 < len(t.turns) else len(t.ids)]
    out = copy.copy(t)  # shallow: the task may hold a search index
    out.ids = ids
    return out


def assert_all_pass_and_retokenised_fails(trajs: list[Trajectory], tokenizer) -> None:
    report = check_trajectories(trajs, tokenizer)
    assert report["checked"] == len(trajs) > 0 and report["match_frac"] == 1.0, report["divergences"]
    t = next(t for t in trajs if t.turns and t.turns[0].text.strip())
    bad = check_trajectory(retokenized(t, tokenizer), tokenizer)
    assert not bad.ok and bad.kind == "sampled" and t.turns[0].start <= bad.index < t.turns[0].end, bad.describe()


def demos(cfg, task, tokenizer) -> list[Trajectory]:
    rows = task.train + task.eval
    trajs = demonstrations(task.agent, rows, random.Random(0), tokenizer, loop_for(cfg, temperature=0.0))
    assert len(trajs) == len(rows) and all(t.finish_reason == "done" for t in trajs)
    return trajs


# ---------------------------------------------------------------------------------------------------------
# (b) the default model's character tokenizer and template
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TASKS)
def test_char_template_demonstrations(recipes, name):
    cfg, task = get(recipes, name)
    assert_all_pass_and_retokenised_fails(demos(cfg, task, task.tokenizer), task.tokenizer)


# sql_world is left out here: with seed 7 the random tiny model samples "a" + "ra" where the canonical segmentation
# of its pieces is "ar" + "a" (the checker reports "same text, different tokenisation"), as SmolLM2 does below.
@pytest.mark.parametrize("name", ["search_world", "textworld"])
def test_char_template_real_tiny_model_sampling(recipes, name):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg, task = get(recipes, name)
    tok = task.tokenizer
    torch.manual_seed(7)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
    ).eval()
    loop = loop_for(cfg, max_turns=3, max_turn_tokens=24, temperature=1.0)
    rows = task.eval
    trajs = rollout(
        make_engine("ascent"),
        Policy(model=model, tokenizer=tok),
        [task.agent.env_task(r) for r in rows],
        task.agent.make_env,
        loop,
        n=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert len(trajs) == 2 * len(rows) and all(t.turns for t in trajs)
    assert_all_pass_and_retokenised_fails(trajs, tok)


# ---------------------------------------------------------------------------------------------------------
# (a) SmolLM2's tokenizer and chat template
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol():
    from ascent.policy.pretrained import smollm2_path

    try:
        path = smollm2_path()
    except RuntimeError as e:
        pytest.skip(f"SmolLM2 unavailable offline: {e}")
    from ascent.policy.model import load_hf

    policy = load_hf(path)
    policy.model.eval()
    return policy


@pytest.mark.parametrize("name", TASKS)
def test_smollm2_template_demonstrations(recipes, smol, name):
    cfg, task = get(recipes, name)
    assert_all_pass_and_retokenised_fails(demos(cfg, task, smol.tokenizer), smol.tokenizer)


@pytest.mark.parametrize("name", TASKS)
def test_smollm2_real_policy_episodes(recipes, smol, name):
    cfg, task = get(recipes, name)
    loop = loop_for(cfg, max_turns=2, max_turn_tokens=16, temperature=0.0)
    rows = task.eval
    trajs = rollout(make_engine("ascent"), smol, [task.agent.env_task(r) for r in rows], task.agent.make_env, loop, n=1)
    assert len(trajs) == len(rows) and all(t.turns for t in trajs)
    # A pretrained model may sample a non-canonical tokenisation of its own text (greedy SmolLM2 writes "\n\n"
    # as two "\n" tokens on these prompts): the ids are still exactly what it sampled, and the checker must
    # say so ("same text"). Everything else — prompt, template pieces, observations — must match exactly.
    checks = [check_trajectory(t, smol.tokenizer) for t in trajs]
    for c in checks:
        assert c.ok or (c.kind == "sampled" and c.same_text), c.describe()
    good = [t for t, c in zip(trajs, checks) if c.ok]
    assert good, [c.describe() for c in checks]
    assert_all_pass_and_retokenised_fails(good, smol.tokenizer)
