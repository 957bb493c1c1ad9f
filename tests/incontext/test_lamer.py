"""LaMer: reflections, cross-attempt credit, the multi-attempt loop, and learning to explore across attempts on
held-out games (pure-Python `GuessGame`), against single-attempt GRPO at equal samples; one real TextWorld game."""

import importlib.util

import numpy as np
import pytest
import torch

from ascent.incontext.agents import AGENTS
from ascent.incontext.lamer import GameCache, GuessGame, admissible, play_trial, reflect, trial_advantages


def guess_games(n: int, seed: int) -> list:
    """Each game: two `insert X into safe` commands (one wins), `examine X`, `look`, `inventory`; every game its
    own two names, so only the verb and the reflections carry over from game to game."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = (f"thing{seed}x{int(v)}" for v in rng.choice(10**6, 2, replace=False))
        cmds = [f"insert {a} into safe", f"insert {b} into safe", f"examine {a}", "look", "inventory"]
        out.append((tuple(cmds), cmds[int(rng.integers(2))]))
    return out


def test_trial_advantages_by_hand():
    # returns (2 trials, 3 attempts); gamma 0.5: G = [0 + .5 (0 + .5 * 1), .5, 1] = [.25, .5, 1] vs [0, 0, 0]
    adv = trial_advantages(np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]), 0.5)
    assert adv.tolist() == [[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]]
    assert trial_advantages(np.ones((3, 2)), 0.9).tolist() == [[0.0, 0.0]] * 3  # the group agrees: no signal
    single = trial_advantages(np.array([[1.0], [0.0], [0.0], [0.0]]), 0.9).ravel()
    assert single == pytest.approx([np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3)])


def test_reflection_and_commands():
    assert reflect(2, [("look", 0.0)], False) == "Attempt 2: look (reward 0). Not won."
    assert admissible("no list here") == []


def test_trial_reads_reflections_and_no_gradient_flows_between_attempts():
    agent = AGENTS.resolve("lamer(attempts=3)")(seed=0)
    cache = GameCache(GuessGame())
    game = guess_games(1, 0)[0]
    params_before = [p.detach().clone() for p in agent.policy.parameters()]
    trial = play_trial(agent.policy, cache, game, 3, torch.Generator().manual_seed(0))
    assert len(trial) == 3 and all(len(a.steps) == 1 for a in trial)
    assert all(torch.equal(a, b) for a, b in zip(params_before, agent.policy.parameters()))
    feats = agent.policy.features(list(game[0]), reflect(1, [(game[0][3], 0.0)], False), set(), 1)
    assert feats[3, 0] == 1 and feats[:, 0].sum() == 1 and feats[0, 4] == 1  # `look` tried unrewarded; attempt 2


def test_lamer_learns_to_explore_across_attempts_grpo_does_not(one_thread):
    train, test = guess_games(30, 1), guess_games(20, 2)
    cache, res = GameCache(GuessGame()), {}
    for name in ("lamer", "grpo_single_attempt"):
        agent = AGENTS.resolve(f"{name}(updates=60)")(seed=0)
        agent.train(cache, train)
        res[name] = agent.evaluate(cache, test, trials=10, seed=1)["won_by"].mean(0)
    # LaMer learns to switch after a failed attempt; GRPO's policy never saw a reflection (its weights for them stay
    # at their initial values); attempt 1 alone is a coin flip between the two `insert` commands at best
    assert res["lamer"][2] >= 0.85 and res["lamer"][2] > res["grpo_single_attempt"][2] + 0.15
    assert res["lamer"][0] <= 0.6
    assert agent.episodes == 60 * 4 * 4 * 3  # GRPO: group x attempts episodes per game, equal samples


@pytest.mark.skipif(importlib.util.find_spec("textworld") is None, reason="needs textworld (ascent[agents])")
def test_a_real_textworld_game(tmp_path):
    from ascent.envs.textworld_env import GameSpec
    from ascent.incontext.lamer import default_env

    cache = GameCache(default_env(cache_dir=str(tmp_path)))
    game = GameSpec(nb_rooms=1, nb_objects=1, quest_length=1, seed=3)
    text, _, done, _ = cache.outcome(game, ())
    cmds = admissible(text)
    assert cmds and not done
    wins = [c for c in cmds if cache.outcome(game, (c,))[3]]
    assert len(wins) >= 1 and all(cache.outcome(game, (c,))[2] for c in cmds)  # one command an attempt
    trial = play_trial(AGENTS.resolve("lamer")(seed=0).policy, cache, game, 3, torch.Generator().manual_seed(0))
    assert [len(a.steps) for a in trial] == [1, 1, 1]
