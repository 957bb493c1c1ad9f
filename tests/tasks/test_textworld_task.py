"""The `textworld` agent task (`ascent.tasks.textworld`, `ascent train textworld`): the scripted
player's imperfections, rows from disjoint seed ranges, the `stop` command and the compact prompt, the
rewards, a clear error without textworld, and the whole recipe end to end on a few games.

Games are generated into a temporary cache once per test session (about 1 s each)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys

import pytest

from ascent.config import load_config
from ascent.config.schema import DataConfig
from ascent.rewards import REWARDS
from ascent.tasks import DataError, load_task, task_piece
from ascent.tasks.textworld import (
    STOP,
    ScriptedPlayer,
    TaskEnv,
    TextWorldGames,
    TextWorldParams,
    ascii_text,
    check_config,
    textworld_task,
)

HAVE_TW = importlib.util.find_spec("textworld") is not None
needs_tw = pytest.mark.skipif(not HAVE_TW, reason="textworld is not installed (pip install 'ascent[agents]')")
ROW = {"prompt": "Go east. Then drop the key.", "walkthrough": ["go east", "drop key"], "objects": ["key", "box"]}
PROMPT = "Goal: {objective}\n\n{description}"


def context(*actions: str) -> str:
    """A rendered conversation after `actions` (the char template's shape)."""
    turns = "".join(f"<action>{a}</action><eos>\n[tool]\nok<eos>\n[assistant]\n" for a in actions)
    return f"<bos>[user]\nGoal: {ROW['prompt']}\n\nA room.<eos>\n[assistant]\n{turns}"


# ---------------------------------------------------------------------------------------------------------
# the scripted player (no textworld needed)
# ---------------------------------------------------------------------------------------------------------
def test_player_follows_the_walkthrough():
    p = ScriptedPlayer([ROW], random.Random(0), p_useless=0.0, max_useless=0, p_stop=0.0)
    assert p(context()) == "<action>go east</action>"
    assert p(context("go east")) == "<action>drop key</action>"
    assert p(context("go east", "examine box")) == "<action>drop key</action>", (
        "useless commands do not count as progress"
    )
    assert p("a context about another game") == "<action>look</action>"


def test_player_gives_up_before_the_last_command_on_its_blind_spot():
    always = ScriptedPlayer([ROW], random.Random(0), p_useless=0.0, max_useless=0, p_stop=1.0)
    assert always(context()) == "<action>go east</action>", "it only gives up instead of the last command"
    assert always(context("go east")) == f"<action>{STOP}</action>"
    other_verbs = ScriptedPlayer(
        [ROW], random.Random(0), p_useless=0.0, max_useless=0, p_stop=1.0, stop_verbs=("close", "put")
    )
    assert other_verbs(context("go east")) == "<action>drop key</action>"
    rng = random.Random(3)
    half = ScriptedPlayer([ROW], rng, p_useless=0.0, max_useless=0, p_stop=0.6, stop_verbs=("drop",))
    stops = sum(half(context("go east")) == f"<action>{STOP}</action>" for _ in range(2000)) / 2000
    assert 0.55 < stops < 0.65


def test_player_useless_commands_are_capped_and_never_walkthrough_steps():
    p = ScriptedPlayer([ROW], random.Random(1), p_useless=1.0, max_useless=1, p_stop=0.0)
    first = p(context())
    assert first in ("<action>inventory</action>", "<action>examine key</action>", "<action>examine box</action>")
    assert p(context(first[8:-9])) == "<action>go east</action>", "at most one useless command per episode"


def test_ascii_text_and_config_checks():
    assert ascii_text("naïve\tgame") == "na?ve game"
    check_config(TextWorldParams(prompt=PROMPT))
    for bad, match in (
        ({"oracle_p_stop": 1.5}, "oracle_p_stop"),
        ({"prompt": "{description}"}, "must contain"),
        ({"prompt": "{objective} {nope}"}, "fields are"),
    ):
        with pytest.raises(ValueError, match=match):
            check_config(TextWorldParams(**bad))


def test_goal_text_follows_the_prompt_fields():
    from ascent.tasks.textworld import goal_text

    objective, walk = "Welcome to TextWorld! First, go east. Then, drop the key. You win!", ["go east", "drop key"]
    assert goal_text("Goal: {commands}", objective, ["key"], walk) == "go east, then drop key."
    assert goal_text("Goal: {instructions}", objective, ["key"], walk) == "First, go east. Then, drop the key."
    assert (
        goal_text("Goal: {objective}", objective, ["key"], walk)
        == goal_text(None, objective, ["key"], walk)
        == objective
    )
    p = ScriptedPlayer([{**ROW, "prompt": "go east, then drop key."}], random.Random(0), p_useless=0.0, p_stop=0.0)
    assert (
        p(
            "[user]\nGoal: go east, then drop key.<eos>\n[assistant]\n<action>go east</action><eos>\n"
            "[tool]\nok<eos>\n[assistant]\n"
        )
        == "<action>drop key</action>"
    )


def test_word_pieces_copy_names_as_the_goal_spells_them():
    from ascent.agents.chat import with_chat_template
    from ascent.policy.tokenizer import char_tokenizer
    from ascent.tasks.textworld import ALPHABET, tokenizer_pieces

    rows = [{"walkthrough": ["take red key from chest", "put red key on stand"], "objects": ["red key", "chest"]}]
    tok = with_chat_template(char_tokenizer(ALPHABET, tokenizer_pieces(rows)))

    def pieces(text):
        return tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])

    goal = pieces("Goal: take red key from chest, then put red key on stand.")
    assert goal == [
        "Goal: ",
        "take",
        " red",
        " key",
        " from",
        " chest",
        ", then ",
        "put",
        " red",
        " key",
        " on",
        " stand",
        ".",
    ]
    assert pieces("<action>put red key on stand</action>") == ["<action>", *goal[7:12], "</action>"]
    assert pieces(" blue key") == [" ", "b", "l", "u", "e", " key"], "a word no training game holds: characters"
    text = "[user]\nGoal: go east, then eat pie.<eos>\n[assistant]\n<action>stop</action>"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_game_rewards():
    won, score = REWARDS.get("game_won"), REWARDS.get("game_score")
    infos = [{"won": True, "score": 2, "max_score": 2}, {"won": False, "score": 1, "max_score": 2}, {"stopped": True}]
    assert won(["p"] * 3, [""] * 3, agent_info=infos) == [1.0, 0.0, 0.0]
    assert score(["p"] * 3, [""] * 3, agent_info=infos) == [1.0, 0.5, 0.0]
    progress = REWARDS.get("game_progress")
    dense = [{"won": False, "progress": 0.5}, {"won": True}, {"stopped": True, "progress": -0.25}]
    assert progress(["p"] * 3, [""] * 3, agent_info=dense) == [0.5, 1.0, -0.25]


def test_missing_textworld_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "textworld", None)  # import textworld raises ImportError
    with pytest.raises(DataError, match=r"pip install 'ascent\[agents\]'") as err:
        load_task(DataConfig(task="textworld"), 0)
    assert "\n" not in str(err.value)


def test_recipe_loads():
    cfg = load_config("textworld")
    task = task_piece(cfg.data)
    assert task.name == "textworld" and cfg.reward == "game_won" and cfg.control.enabled and task.params.size == "small"
    assert cfg.agent.max_total_tokens <= cfg.model.max_position_embeddings
    assert cfg.warmstart.optim.schedule == "cosine" and cfg.warmstart.optim.min_lr_ratio == 0.0
    assert task.params.word_pieces and cfg.data.split_seed == 0, "one game pool for every seed, words as tokens"
    check_config(task.params)


# ---------------------------------------------------------------------------------------------------------
# games (textworld)
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """Shared with tests/agents/test_token_check_recipes.py (same games: generated once per session)."""
    path = tmp_path_factory.getbasetemp() / "textworld-recipe-games"
    path.mkdir(exist_ok=True)
    return str(path)


@pytest.fixture(scope="module")
def task(cache):
    if not HAVE_TW:
        pytest.skip("textworld is not installed")
    cfg = DataConfig(task="textworld", num_train=3, num_eval=2)
    return textworld_task(cfg, 0, TextWorldParams(prompt=PROMPT, cache_dir=cache))


@needs_tw
def test_rows_come_from_disjoint_seeds_and_goals(task):
    train, held = task.train, task.eval
    assert len(train) == 3 and len(held) == 2 and task.reward == "game_won"
    assert max(r["game_seed"] for r in train) < 500_000 <= min(r["game_seed"] for r in held)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held}
    for r in train + held:
        assert len(r["walkthrough"]) == 2 and r["nb_rooms"] == 2 and r["objects"] and json.loads(json.dumps(r)) == r


@needs_tw
def test_env_prompt_stop_and_check_env(task, cache):
    from ascent.envs import check_env

    row = task.train[0]
    env = task.agent.make_env()
    assert isinstance(env, TaskEnv)
    obs = env.reset(task.agent.env_task(row))
    assert obs.text.startswith(f"Goal: {row['prompt']}\n\n-= ") and "Reply with exactly one command" not in obs.text
    res = env.step(f"<action>{STOP}</action>")
    assert res.done and res.reward == 0.0 and res.info["stopped"] and not res.info["won"]
    obs2 = env.reset(task.agent.env_task(row))
    assert obs2.text == obs.text
    results = [env.step(f"<action>{c}</action>") for c in row["walkthrough"]]
    assert results[-1].done and results[-1].info["won"] and sum(r.reward for r in results) == pytest.approx(1.0)
    check_env(task.agent.make_env(), task.agent.env_task(row))
    full = TaskEnv(cache_dir=cache).reset(task.agent.env_task(row))
    assert "Reply with exactly one command" in full.text, "prompt=None keeps the environment's instructions"


@needs_tw
def test_demonstrations_win_unless_the_player_gives_up(task):
    from ascent.agents import AgentConfig, check_trajectories, pack_trajectories
    from ascent.tasks.agent import AgentTask, demonstrations

    loop = AgentConfig(max_turns=4, max_turn_tokens=80, max_total_tokens=3000, temperature=0.0)
    games: TextWorldGames = task.agent.make_env.__self__
    rows = task.train + task.eval
    for p_stop, won in ((0.0, 1.0), (1.0, 0.0)):
        games.cfg = TextWorldParams(
            prompt=PROMPT, cache_dir=games.cfg.cache_dir, oracle_p_useless=0.5, oracle_p_stop=p_stop
        )
        trajs = demonstrations(
            AgentTask(games.make_env, games.env_task, games.demonstrator), rows, random.Random(0), task.tokenizer, loop
        )
        assert [t.finish_reason for t in trajs] == ["done"] * len(rows)
        assert [float(t.info["won"]) for t in trajs] == [won] * len(rows) and [t.reward for t in trajs] == [won] * len(
            rows
        )
        assert all(len(t.turns) <= 3 for t in trajs) and check_trajectories(trajs, task.tokenizer)["match_frac"] == 1.0
        if p_stop == 1.0:
            assert all(t.turns[-1].info["command"] == STOP for t in trajs)
        fields = pack_trajectories(trajs, task.tokenizer).fields
        assert REWARDS.get("game_won")(
            [""] * len(rows), [""] * len(rows), agent_info=[f["agent_info"] for f in fields]
        ) == [won] * len(rows)


@needs_tw
def test_recipe_runs_end_to_end(tmp_path, cache):
    from ascent.app.pipeline import train

    tiny = [
        "model.hidden_size=32",
        "model.num_layers=1",
        "model.num_heads=2",
        "model.num_kv_heads=1",
        "model.intermediate_size=64",
        "data.num_train=3",
        "data.num_eval=2",
        f"data.task.textworld.cache_dir={cache}",
        "agent.max_turns=2",
        "agent.max_turn_tokens=8",
        "warmstart.steps=2",
        "warmstart.batch_size=2",
        "warmstart.eval_every=0",
        "train.steps=1",
        "train.prompts_per_step=2",
        "rollout.samples_per_prompt=2",
        "train.eval_every=0",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    summary = train(load_config("textworld", tiny))
    for key in (
        "accuracy_before_rl",
        "accuracy_after_rl",
        "accuracy_control",
        "turns_before_rl",
        "turns_after_rl",
        "turns_control",
        "token_check_pass_rate",
        "token_check_pass_rate_after_rl",
        "wall_seconds",
    ):
        assert key in summary, key
    assert summary["token_check_pass_rate"] == 1.0 and 1 <= summary["turns_after_rl"] <= 2


@needs_tw
def test_memoised_play_equals_fresh_play(task):
    from ascent.tasks import textworld as tt

    row = task.train[1]
    spec = task.agent.env_task(row)
    script = [f"examine {row['objects'][0]}", "look", row["walkthrough"][0], "inventory", row["walkthrough"][1]]

    def play(env):
        out = [env.reset(spec).text]
        for cmd in script:
            res = env.step(f"<action>{cmd}</action>")
            out.append((res.observation, res.reward, res.done, res.info))
            if res.done:
                break
        return out

    tt._RESETS.clear()
    tt._STEPS.clear()
    fresh = play(task.agent.make_env())
    assert fresh[-1][2] and fresh[-1][3]["won"]
    env = task.agent.make_env()
    assert play(env) == fresh and env._game is None, "all from the memo: no interpreter started"
    del tt._STEPS[
        (str(env._current), tuple(script[:3]), False)
    ]  # one unseen step: the interpreter restarts and replays the history
    assert play(env) == fresh and env._game is not None
    assert play(TaskEnv(cache_dir=env.cache_dir, prompt=PROMPT)) == fresh


@needs_tw
def test_progress_reward_memoised_and_on_stop(task):
    """reward=progress in the task's environment: memoised play equals fresh play, the memo keeps the two
    reward kinds apart, and `stop` keeps the progress made (partial credit, the dense reward's return)."""
    from ascent.tasks import textworld as tt

    row = task.train[2]
    spec = task.agent.env_task(row)
    walk = row["walkthrough"]

    def play(env, script):
        env.reset(spec)
        return [(r.reward, r.info.get("progress")) for r in (env.step(f"<action>{c}</action>") for c in script)]

    tt._STEPS.clear()
    dense = TaskEnv(cache_dir=task.agent.make_env().cache_dir, prompt=PROMPT, reward="progress")
    fresh = play(dense, ["look", *walk])
    assert fresh == play(dense, ["look", *walk]) and sum(r for r, _ in fresh) == pytest.approx(1.0)
    assert fresh[-1][1] == pytest.approx(1.0) and fresh[0] == (0.0, 0.0)
    sparse = play(TaskEnv(cache_dir=dense.cache_dir, prompt=PROMPT), ["look", *walk])  # same histories, own memo
    assert [r for r, _ in sparse] == [0.0] * len(walk) + [1.0] and all(p is None for _, p in sparse)
    part = play(dense, [walk[0], "stop"])
    assert part[-1] == (0.0, pytest.approx(1.0 / len(walk)))


@needs_tw
def test_instructions_prompt_drops_the_welcome_and_keeps_the_steps(task, cache):
    from ascent.tasks.textworld import instructions

    cfg = TextWorldParams(prompt="Goal: {instructions}", cache_dir=cache, observation_chars=40)
    games = TextWorldGames(cfg)
    rows = games.rows(3, range(0, 100), set())
    assert [r["game_seed"] for r in rows] == [r["game_seed"] for r in task.train]
    for row in rows:
        assert (
            row["prompt"] != row["objective"] and row["prompt"] in row["objective"] and "TextWorld" not in row["prompt"]
        )
        assert row["prompt"] == instructions(row["objective"], row["objects"])
        env = games.make_env()
        assert env.reset(games.env_task(row)).text == f"Goal: {row['prompt']}"
        res = env.step(f"<action>{row['walkthrough'][0]}</action>")
        assert len(res.observation) <= 40
    player = ScriptedPlayer(rows, random.Random(0), p_useless=0.0, p_stop=0.0)
    assert (
        player(f"[user]\nGoal: {rows[1]['prompt']}<eos>\n[assistant]\n")
        == f"<action>{rows[1]['walkthrough'][0]}</action>"
    )
