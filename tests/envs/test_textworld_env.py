"""TextWorld games (`ascent.envs.textworld_env`): deterministic cached generation, walkthroughs win with
reward 1, bad commands become observations, check_env, concurrency and the agent loop. Generation takes
1-3 s per game, so each game is generated once per module into a temporary cache."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import string

import pytest

from ascent.envs import check_env
from ascent.envs.textworld_env import (
    ACTION_CLOSE,
    ACTION_OPEN,
    NO_COMMAND,
    SIZES,
    STOP_STRINGS,
    GameSpec,
    TextWorldEnv,
    clean_feedback,
    game_specs,
    make_game,
    parse_command,
    spec_key,
)

HAVE_TW = importlib.util.find_spec("textworld") is not None
needs_tw = pytest.mark.skipif(not HAVE_TW, reason="textworld is not installed (pip install 'ascent[agents]')")
SMALL = GameSpec(nb_rooms=2, nb_objects=4, quest_length=2, seed=11)


def act(cmd: str) -> str:
    return f"Let me think.\n{ACTION_OPEN}{cmd}{ACTION_CLOSE}"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("textworld")


@pytest.fixture(scope="module")
def small_game(cache):
    return make_game(SMALL, cache)


# ---------------------------------------------------------------------------------------------------------
# parsing and specs (no textworld needed)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,cmd",
    [
        ("<action>take key from box</action>", "take key from box"),
        ("I will go.\n<action> Go   North. </action> and more", "go north"),
        ("<action>open chest", "open chest"),  # stopped before the closing tag
        ("look\ninventory", "look"),  # no tags: the first non-empty line
        ("\n\n  `examine door`  \n", "examine door"),
        ("<action>\n\n</action>", None),
        ("", None),
        ("<action>" + "x" * 500 + "</action>", "x" * 120),
    ],
)
def test_parse_command(text, cmd):
    assert parse_command(text) == cmd


def test_clean_feedback_drops_prompt_status_and_menu():
    raw = (
        "\nYou win.\n\n\n\n*** The End ***\n\n"
        "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?\n>     "
    )
    assert clean_feedback(raw) == "You win.\n\n*** The End ***"


def test_game_specs_scale_and_validate():
    assert [s.seed for s in game_specs(4, "medium", seed=2)] == [2, 3, 4, 5]
    assert all(s.nb_rooms == 4 and s.quest_length == 4 for s in game_specs(4, "medium"))
    assert SIZES["tiny"].nb_rooms < SIZES["small"].nb_rooms < SIZES["medium"].nb_rooms < SIZES["large"].nb_rooms
    with pytest.raises(ValueError, match="unknown TextWorld size"):
        game_specs(1, "huge")
    with pytest.raises(ValueError, match="quest_length"):
        GameSpec(quest_length=0)
    with pytest.raises(ValueError, match="reward"):
        TextWorldEnv(reward="points")


def test_step_before_reset_is_an_error():
    with pytest.raises(RuntimeError, match="before reset"):
        TextWorldEnv().step(act("look"))


# ---------------------------------------------------------------------------------------------------------
# generation
# ---------------------------------------------------------------------------------------------------------
@needs_tw
def test_generation_is_deterministic_and_cached(cache, small_game, tmp_path):
    again = make_game(SMALL, tmp_path / "other")
    assert again.with_suffix(".json").read_bytes() == small_game.with_suffix(".json").read_bytes()
    first, second = TextWorldEnv(cache_dir=cache).reset(SMALL), TextWorldEnv(cache_dir=tmp_path / "other").reset(SMALL)
    assert first.text == second.text and first.info["walkthrough"] == second.info["walkthrough"]
    other = make_game(GameSpec(nb_rooms=2, nb_objects=4, quest_length=2, seed=12), cache)
    assert other.parent != small_game.parent
    assert other.with_suffix(".json").read_bytes() != small_game.with_suffix(".json").read_bytes()
    # cached: the second call returns the same files untouched; no temporary folders are left behind
    stamp = small_game.stat().st_mtime_ns
    assert make_game(SMALL, cache) == small_game and small_game.stat().st_mtime_ns == stamp
    assert small_game.parent.name == spec_key(SMALL)
    assert not [p for p in os.listdir(cache) if p.startswith(".")]


@needs_tw
def test_default_cache_root_follows_ascent_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ASCENT_CACHE", str(tmp_path))
    path = make_game(SIZES["tiny"])
    assert path.parent.parent == tmp_path / "textworld" and path.is_file()


# ---------------------------------------------------------------------------------------------------------
# playing
# ---------------------------------------------------------------------------------------------------------
@needs_tw
@pytest.mark.parametrize("size", ["tiny", "small", "medium"])
@pytest.mark.parametrize("reward", ["score", "win", "progress"])
def test_walkthrough_wins_with_reward_one(cache, size, reward):
    env = TextWorldEnv(cache_dir=cache, reward=reward)
    obs = env.reset(SIZES[size])
    walk = obs.info["walkthrough"]
    assert len(walk) == SIZES[size].quest_length and obs.info["max_score"] >= 1
    assert ACTION_OPEN in obs.text and "Goal:" in obs.text
    results = [env.step(act(cmd)) for cmd in walk]
    assert [r.done for r in results] == [False] * (len(walk) - 1) + [True]
    assert sum(r.reward for r in results) == pytest.approx(1.0)
    last = results[-1].info
    assert last["won"] and not last["lost"] and last["score"] == last["max_score"] and last["moves"] == len(walk)
    assert all(r.info["known_verb"] for r in results)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(act("look"))
    env.close()


@needs_tw
def test_bad_commands_get_observations_not_crashes(cache, small_game):
    env = TextWorldEnv(cache_dir=cache)
    env.reset(SMALL)
    empty = env.step("")
    assert empty.observation == NO_COMMAND and empty.reward == 0.0 and not empty.done and empty.info["command"] is None
    for meta in ("restart", "quit", "save", "script", "xyzzy"):  # interpreter meta-commands never reach the game
        res = env.step(act(meta))
        assert (
            res.observation.startswith("Error: unknown command")
            and not res.info["known_verb"]
            and res.info["moves"] == 0
        )
    nonsense = env.step(act("take the moon"))  # a known verb with an unknown object: the game's own answer
    assert nonsense.info["known_verb"] and nonsense.reward == 0.0 and not nonsense.done and nonsense.observation
    assert ">" not in nonsense.observation and "-=" not in nonsense.observation.split("\n")[-1]
    # the game is still playable: the walkthrough still wins from here
    results = [env.step(act(cmd)) for cmd in env.walkthrough]
    assert results[-1].done and results[-1].info["won"] and sum(r.reward for r in results) == pytest.approx(1.0)


def test_unknown_reward_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="reward must be one of score, win, progress"):
        TextWorldEnv(reward="dense")


@needs_tw
def test_progress_reward_is_dense_and_telescopes(cache, small_game):
    """reward=progress: each walkthrough step earns 1/L, a no-op 0, a step off the plan -1/L and the step back
    +1/L; the rewards so far always sum to info['progress'] (1 - plan left / L), 1 once won; the sparse
    rewards give nothing before the win on the same play."""
    plays = {}
    for reward in ("progress", "score"):
        env = TextWorldEnv(cache_dir=cache, reward=reward)
        walk = env.reset(SMALL).info["walkthrough"]
        moves = ["inventory", "go north", "go south", "go east", "go west", *walk]
        plays[reward] = [env.step(act(c)) for c in moves]
        env.close()
    dense, sparse = plays["progress"], plays["score"]
    step = 1.0 / len(walk)
    total = 0.0
    for r in dense:
        total += r.reward
        assert r.reward in (pytest.approx(-step), 0.0, pytest.approx(step))
        assert r.info["progress"] == pytest.approx(total)
    assert dense[0].reward == 0.0  # inventory changes nothing
    assert [r.reward for r in dense[-len(walk) :]] == [pytest.approx(step)] * len(walk)
    assert dense[-1].info["won"] and total == pytest.approx(1.0)
    assert all(r.reward == 0.0 for r in sparse[:-1]) and "progress" not in sparse[0].info


@needs_tw
def test_max_steps_and_show_commands(cache, small_game):
    env = TextWorldEnv(cache_dir=cache, max_steps=2, show_commands=True)
    obs = env.reset(small_game)  # a game path works as a task too
    assert "Possible commands:" in obs.text and env.walkthrough[0] in obs.text
    assert not env.step(act("look")).done
    last = env.step("no command here at all")
    assert last.done and last.reward == 0.0 and last.info["steps"] == 2
    again = env.reset(small_game)  # reset starts over
    assert again.text == obs.text and env.steps == 0 and env.score == 0


@needs_tw
def test_check_env_passes(cache):
    check_env(TextWorldEnv(cache_dir=cache), SMALL)
    check_env(TextWorldEnv(cache_dir=cache), SIZES["tiny"])


@needs_tw
def test_episodes_step_concurrently(cache):
    specs = game_specs(3, "tiny", seed=40)
    envs = [TextWorldEnv(cache_dir=cache) for _ in specs]

    async def play():
        walks = [o.info["walkthrough"] for o in await asyncio.gather(*(e.areset(s) for e, s in zip(envs, specs)))]
        out = [[] for _ in envs]
        for k in range(max(len(w) for w in walks)):
            live = [i for i, w in enumerate(walks) if k < len(w)]
            for i, res in zip(live, await asyncio.gather(*(envs[i].astep(act(walks[i][k])) for i in live))):
                out[i].append(res)
        return out

    for results in asyncio.run(play()):
        assert results[-1].done and results[-1].info["won"] and sum(r.reward for r in results) == pytest.approx(1.0)


@needs_tw
def test_agent_loop_plays_the_walkthrough(cache):
    from ascent.agents import AgentConfig, ScriptedEngine, pack_trajectories, rollout, with_chat_template
    from ascent.policy.model import Policy
    from ascent.policy.tokenizer import char_tokenizer

    tok = with_chat_template(char_tokenizer(string.ascii_letters + string.digits + string.punctuation + " \n"))
    walk = TextWorldEnv(cache_dir=cache).reset(SMALL).info["walkthrough"]
    replies = iter([f"{ACTION_OPEN}look{ACTION_CLOSE}"] + [act(c) for c in walk])
    engine = ScriptedEngine(tok, lambda context: next(replies))
    cfg = AgentConfig(max_turns=6, max_turn_tokens=200, max_total_tokens=20000, stop_strings=STOP_STRINGS)
    [traj] = rollout(engine, Policy(model=None, tokenizer=tok), [SMALL], lambda: TextWorldEnv(cache_dir=cache), cfg)
    assert traj.finish_reason == "done" and traj.reward == pytest.approx(1.0) and traj.info["won"]
    assert len(traj.turns) == len(walk) + 1 and [t.info["command"] for t in traj.turns] == ["look"] + walk
    batch = pack_trajectories([traj], tok)
    assert batch.fields[0]["nb_rooms"] == SMALL.nb_rooms and batch.fields[0]["agent_reward"] == pytest.approx(1.0)
