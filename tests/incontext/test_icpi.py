"""ICPI: the chain's dynamics, the prompts built from the buffer, the scripted stand-in learning in context, and an
HF model behind the same text interface (a scratch model: junk text is counted as parse failures, never raised)."""

import numpy as np
import pytest
import torch

from ascent.config.schema import ModelConfig
from ascent.incontext.agents import AGENTS
from ascent.incontext.icpi import (
    ChainMDP,
    HFTextModel,
    ICPIParams,
    RandomAgent,
    ScriptedModel,
    Transition,
    run_episodes,
)
from ascent.policy.model import scratch_model
from ascent.policy.tokenizer import char_tokenizer


def test_chain_dynamics_and_text():
    mdp = ChainMDP(n=6, goal=4, horizon=8)
    assert mdp.step(0, 0) == (0.0, 0, False) and mdp.step(3, 1) == (1.0, 4, True) and mdp.step(5, 0) == (1.0, 4, True)
    assert mdp.optimal_return(0, 0.8) == pytest.approx(0.8**3)
    assert Transition(3, 1, 1.0, 4, True).text() == "state = 3; action = right; reward = 1; next state = 4; done"
    with pytest.raises(ValueError):
        ChainMDP(n=3, goal=5)


def test_prompts_use_the_buffer():
    agent = AGENTS.resolve("icpi(wm_examples=2, policy_episodes=1)")()
    for t in [Transition(0, 0, 0.0, 0, False), Transition(0, 1, 0.0, 1, False), Transition(3, 1, 1.0, 4, True)]:
        agent.observe(t)
    agent.observe(Transition(2, 1, 0.0, 3, False))
    wm = agent.world_model_prompt(5, 1).split("\n")
    # only `right` transitions, one terminal and one non-terminal (the most recent), then the query
    assert wm == [
        "state = 2; action = right; reward = 0; next state = 3",
        "state = 3; action = right; reward = 1; next state = 4; done",
        "state = 5; action = right;",
    ]
    assert agent.policy_prompt(1).split("\n") == ["state = 2; action = right", "state = 1; action ="]


def test_scripted_model_copies_from_its_prompt():
    m = ScriptedModel(0)
    wm = "state = 3; action = right; reward = 1; next state = 4; done\nstate = 3; action = right;"
    pol = "state = 2; action = left\nstate = 2; action = right\nstate = 2; action ="
    assert m.complete([wm, pol, "state = 1; action = left;"], 8) == [
        " reward = 1; next state = 4; done\n",
        " right\n",
        " reward = 0; next state = 1\n",
    ]


def test_icpi_with_the_scripted_model_learns_the_chain():
    mdp, params = ChainMDP(n=6, goal=4, horizon=8), ICPIParams(depth=4)
    first, last, rnd = [], [], []
    for seed in range(4):
        agent = AGENTS.resolve("icpi(depth=4)")(mdp=mdp, seed=seed)
        r = run_episodes(agent, mdp, 12, seed, params.gamma)
        first.append(r[:4].mean())
        last.append(r[-4:].mean())
        rnd.append(run_episodes(RandomAgent(seed), mdp, 12, seed, params.gamma)[-4:].mean())
        assert agent.stats.parse_failures == 0
    assert np.mean(last) > np.mean(first) + 0.2 and np.mean(last) > np.mean(rnd) + 0.3


def test_hf_model_junk_counts_as_parse_failures():
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz0123456789=;. \n")
    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    model = scratch_model(cfg, len(tok), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    mdp = ChainMDP(n=4, goal=3, horizon=3)
    agent = AGENTS.resolve("icpi(depth=2, max_new_tokens=6)")(model=HFTextModel(model, tok), mdp=mdp)
    r = run_episodes(agent, mdp, 2, 0, 0.8)
    assert r.shape == (2,) and agent.stats.parse_failures > 0 and agent.stats.wm_queries > 0
    assert agent.stats.parse_failures <= agent.stats.wm_queries + agent.stats.policy_queries
