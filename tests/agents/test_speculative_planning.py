"""Speculative agent planning (DSP): the acceptance rule (greedy reference values; sampled: exactly the policy's
distribution), the DSP chooser's expectile TD update (hand-computed values, state-dependent k, tau ordering), and
the planner's lossless property on a real tiny model (greedy: token-identical to the plain agent loop whatever the
draft proposes)."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch

from ascent.agents import AgentConfig, ChatFormat, rollout, with_chat_template
from ascent.agents.speculative_planning import (
    SPECULATION_K,
    DSPChooser,
    DSPParams,
    SpeculativePlanner,
    accept_draft,
    state_features,
)
from ascent.envs import Env, Observation, StepResult
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rollout import make_engine

ALPHABET = string.ascii_lowercase + " <>/\n[]"


def test_accept_draft_greedy_reference_values():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 4.0, 0.0]])  # (4, V=3)
    n, fix, lps = accept_draft(logits, [1, 0, 2, 1], 0.0)
    assert (n, fix) == (4, None) and len(lps) == 4
    assert lps[0] == pytest.approx(5.0 - np.log(np.exp(0) + np.exp(5) + np.exp(1)), abs=1e-5)
    n, fix, lps = accept_draft(logits, [1, 2, 2, 1], 0.0)  # second token is not the argmax (0)
    assert (n, fix) == (1, 0)
    assert lps[1] == pytest.approx(3.0 - np.log(np.exp(3) + 2), abs=1e-5)  # the correction's log-prob
    n, fix, _ = accept_draft(logits, [], 0.0)
    assert (n, fix) == (0, None)


def test_accept_draft_sampled_is_the_policy_distribution():
    """Point-mass draft x: keep x with prob p(x), else draw from p without x. The first kept-or-corrected token
    must be distributed as p (temperature applied), whatever the draft."""
    logits = torch.tensor([[1.0, 0.5, -0.5, 0.0]])  # (1, V=4)
    temp = 0.7
    p = torch.softmax(logits[0] / temp, -1).numpy()
    g = torch.Generator().manual_seed(0)
    trials = 20000
    for draft in (0, 2):
        counts = np.zeros(4)
        for _ in range(trials):
            n, fix, _ = accept_draft(logits, [draft], temp, g)
            counts[draft if n == 1 else fix] += 1
        freq = counts / trials
        sd = np.sqrt(p * (1 - p) / trials)
        assert np.all(np.abs(freq - p) < 5 * sd), (draft, freq, p)


def test_dsp_update_hand_computed():
    p = DSPParams(tau=0.7, lr=0.1, init=1.0, dims=4)
    c = DSPChooser(p)
    phi = np.array([1.0, 0.0, 0.0, 0.0])
    assert c.value(phi) == pytest.approx(1.0) and c.choose(phi) == 1
    c.update([(phi, True, None)])  # y = 1 = V: no change
    assert c.value(phi) == pytest.approx(1.0)
    c.update([(phi, False, None)])  # y = 0, delta = -1, weight 1 - tau = 0.3, |x|^2 = 2
    # w += 0.1 * 2 * 0.3 * (-1) * x / 2 -> w0 = -0.03, bias = 0.97 -> V = 0.94
    assert c.w[0] == pytest.approx(-0.03) and c.w[-1] == pytest.approx(0.97)
    assert c.value(phi) == pytest.approx(0.94)
    nxt = np.array([0.0, 1.0, 0.0, 0.0])  # V(s') = bias 0.97; y = 1 + 0.97 = 1.97, delta = 1.03, weight 0.7
    c.update([(phi, True, nxt)])
    assert c.value(phi) == pytest.approx(0.94 + 0.1 * 2 * 0.7 * 1.03 * 2 / 2)


def test_dsp_learns_state_dependent_k_and_tau_orders_it():
    easy, hard = np.eye(8)[0], np.eye(8)[1]

    def fit(tau: float) -> DSPChooser:
        c = DSPChooser(DSPParams(tau=tau, lr=0.05, k_max=4, dims=8, gamma=1.0))
        rng = np.random.default_rng(0)
        for _ in range(3000):
            c.update([(easy, True, easy)] if rng.random() < 0.75 else [(easy, False, None)])  # run ~ geometric
            c.update([(hard, False, None)])
        return c

    mid, high = fit(0.5), fit(0.9)
    assert mid.choose(easy) >= 2 and mid.choose(hard) == 1  # k_min = 1 on the state that is always rejected
    assert mid.value(easy) == pytest.approx(3.0, abs=0.6)  # E[run] with p = 0.75: p / (1 - p) = 3
    assert high.value(easy) > mid.value(easy) + 0.5  # tau > 0.5 over-estimates the run: speculates further


def test_chooser_registry_and_bad_params():
    assert SPECULATION_K.resolve("fixed(k=3)")().choose(np.zeros(4)) == 3
    assert SPECULATION_K.resolve("dsp(k_max=2, init=9.0)")().choose(np.zeros(256)) == 2
    with pytest.raises(Exception, match="tau"):
        SPECULATION_K.resolve("dsp(tau=1.5)")


class Chat(Env):
    """Replies 'ok' to every turn; ends after `turns` turns or when the model writes </a>."""

    def reset(self, task):
        self.n = 0
        return Observation(text=f"go {task}")

    def step(self, action):
        self.n += 1
        done = "</a>" in action
        return StepResult(observation="ok", reward=float(done), done=done)


CFG = AgentConfig(max_turns=4, max_turn_tokens=6, max_total_tokens=120, stop_strings=("</a>",), temperature=0.0)


@pytest.fixture(scope="module")
def setup():
    from tests.conftest import tiny_qwen

    tok = with_chat_template(char_tokenizer(ALPHABET))
    policy = Policy(model=taught(tok, tiny_qwen(tok, seed=3)), tokenizer=tok)
    engine = make_engine("ascent")
    tasks = ["a", "b", "c", "d"]
    plain = rollout(engine, policy, tasks, Chat, CFG, n=1, generator=torch.Generator().manual_seed(0))
    return tok, policy, engine, tasks, plain


def taught(tok, model):
    """The tiny model after a few imitation steps on short conversations, so that its greedy turns vary (stop
    strings, end-of-turn tokens, different lengths) instead of repeating one token."""
    fmt = ChatFormat.from_tokenizer(tok)
    convs = {"a": ["hi", "b </a>"], "b": ["yo yo", "no", "c</a>"], "c": ["x</a>"]}
    seqs = []
    for task, turns in convs.items():
        ids = fmt.prompt_ids([{"role": "user", "content": f"go {task}"}])
        for u in turns:
            ids += tok(u, add_special_tokens=False)["input_ids"] + list(fmt.assistant_end_ids)
            ids += fmt.observation_ids("ok")
        seqs.append(torch.tensor(ids))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(150):
        for x in seqs:
            loss = model(x[None], labels=x[None]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def replay_draft(tok, turns: list[str], wrong_from: int = 99):
    """A draft planner that proposes the plain loop's turn texts (turn index = assistant turns so far), and
    something else from turn `wrong_from` on."""

    def respond(context: str) -> str:
        i = context.count("[assistant]") - 1
        return turns[i] if i < wrong_from and i < len(turns) else "zz</a>"

    return respond


@pytest.mark.parametrize("chooser", ["fixed(k=1)", "fixed(k=3)", "dsp(k_max=3)"])
@pytest.mark.parametrize("wrong_from", [0, 1, 99])
def test_planner_is_token_identical_to_the_greedy_loop(setup, chooser, wrong_from):
    tok, policy, engine, tasks, plain = setup
    planner = SpeculativePlanner(engine, policy, None, SPECULATION_K.resolve(chooser)(), Chat, CFG)
    for task, ref in zip(tasks, plain):
        planner.draft = replay_draft(tok, [u.text for u in ref.turns], wrong_from)
        traj, st = planner.run(task)
        assert traj.ids == ref.ids and traj.loss_mask == ref.loss_mask
        assert [u.text for u in traj.turns] == [u.text for u in ref.turns]
        assert traj.reward == ref.reward and traj.finish_reason == ref.finish_reason
        assert np.allclose(traj.sampled_logprobs, ref.sampled_logprobs, atol=1e-4)
        if wrong_from == 99:  # the draft is the policy's own play: every turn accepted, no generate call
            assert st.accepted_turns == len(ref.turns) and st.generate_calls == 0 and st.wasted_policy_tokens == 0
        if wrong_from == 0:
            assert st.accepted_turns == 0 or "</a>" in ref.turns[0].text


def test_planner_refuses_top_p(setup):
    tok, policy, engine, _, _ = setup
    from dataclasses import replace

    with pytest.raises(ValueError, match="top_p"):
        SpeculativePlanner(engine, policy, None, SPECULATION_K.resolve("dsp")(), Chat, replace(CFG, top_p=0.9))


def test_state_features_distinguish_turns(setup):
    *_, plain = setup
    t = plain[0]
    assert state_features(t).shape == (256,)
    assert not np.allclose(state_features(t), state_features(plain[1])) or t.messages[0] == plain[1].messages[0]
