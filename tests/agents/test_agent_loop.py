"""The agent loop: a real tiny HF model through ascent's engine (masks, exact sampled ids and log-probs,
limits, packing) and a scripted policy (control flow: tools, answers, stop strings, turn/token limits)."""

from __future__ import annotations

import asyncio
import json
import string
import time

import pytest
import torch

from ascent.agents import (
    AgentConfig,
    ChatFormat,
    ScriptedEngine,
    check_trajectory,
    cut_turn,
    pack_trajectories,
    rollout,
    with_chat_template,
)
from ascent.envs import Env, Observation, StepResult
from ascent.envs.search_world import SearchWorld, SearchWorldEnv, WorldConfig
from ascent.policy.model import Policy, token_logprobs
from ascent.policy.tokenizer import char_tokenizer
from ascent.rollout import make_engine

ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"


@pytest.fixture(scope="module")
def tok():
    return with_chat_template(char_tokenizer(ALPHABET))


@pytest.fixture(scope="module")
def world():
    return SearchWorld(WorldConfig(num_people=8, num_companies=3, num_cities=3, num_countries=2, seed=0))


class Recording:
    """Passes calls through to a real engine and keeps what it returned."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def generate(self, model, prompt_ids, n, s, generator):
        gen = self.inner.generate(model, prompt_ids, n, s, generator)
        self.calls.append(([list(p) for p in prompt_ids], s, gen))
        return gen


CFG = AgentConfig(max_turns=3, max_turn_tokens=12, max_total_tokens=300)


@pytest.fixture(scope="module")
def real_run(tok, world):
    from tests.conftest import tiny_qwen

    policy = Policy(model=tiny_qwen(tok, seed=1), tokenizer=tok)
    engine = Recording(make_engine("ascent"))
    tasks = world.questions(2, hops=1)
    make_env = lambda: SearchWorldEnv(world, prompt="Q: {question}")  # noqa: E731
    trajs = rollout(engine, policy, tasks, make_env, CFG, n=2, generator=torch.Generator().manual_seed(0))
    again = rollout(
        make_engine("ascent"), policy, tasks, make_env, CFG, n=2, generator=torch.Generator().manual_seed(0)
    )
    return policy, engine, trajs, again


def test_real_model_masks_and_limits(real_run, tok):
    policy, engine, trajs, _ = real_run
    fmt = ChatFormat.from_tokenizer(tok)
    assert len(trajs) == 4 and [t.group for t in trajs] == [0, 0, 1, 1]
    for t in trajs:
        assert len(t.ids) == len(t.loss_mask) == len(t.sampled_logprobs) <= CFG.max_total_tokens
        assert 1 <= len(t.turns) <= CFG.max_turns and t.finish_reason in ("done", "max_turns", "max_tokens")
        kinds = t.token_kinds()
        assert all(m == (k == "sampled") for m, k in zip(t.loss_mask, kinds)), "mask is 1 exactly on sampled tokens"
        assert all(lp == 0.0 for lp, m in zip(t.sampled_logprobs, t.loss_mask) if not m)
        assert t.loss_mask[: t.prompt_len] == [0] * t.prompt_len
        for turn, nxt in zip(t.turns, t.turns[1:] + [None]):
            assert 1 <= turn.end - turn.start <= CFG.max_turn_tokens
            if turn.observation is not None:  # observation = template role header + text + generation prompt, mask 0
                s, e = turn.observation
                assert t.loss_mask[s:e] == [0] * (e - s) and e == nxt.start
        observations = [m["content"] for m in t.messages if m["role"] == "tool"]
        spans = [u.observation for u in t.turns if u.observation is not None]
        assert len(observations) == len(spans) >= 1
        for text, (s, e) in zip(observations, spans):
            assert t.ids[s:e] == fmt.observation_ids(text)
        assert check_trajectory(t, tok).ok, check_trajectory(t, tok).describe()
    assert any(u.stop == "length" for t in trajs for u in t.turns) and any(
        t.finish_reason == "max_tokens" for t in trajs
    ), "limits were exercised"


def test_real_model_keeps_sampled_ids_and_logprobs_exactly(real_run):
    policy, engine, trajs, again = real_run
    assert len(engine.calls) == max(len(t.turns) for t in trajs)
    for k, (prompts, s, gen) in enumerate(engine.calls):  # call k = turn k of the episodes still active, in order
        assert s.eos_id == policy.tokenizer.eos_token_id
        active = [t for t in trajs if len(t.turns) > k]
        assert len(prompts) == len(active)
        for row, t in enumerate(active):
            turn, n = t.turns[k], t.turns[k].end - t.turns[k].start
            assert prompts[row] == t.ids[: turn.start], "the engine continued exactly the trajectory's ids"
            assert n <= int(gen.lengths[row])
            assert t.ids[turn.start : turn.end] == gen.tokens[row, :n].tolist()
            assert t.sampled_logprobs[turn.start : turn.end] == gen.logprobs[row, :n].tolist()
    batch = pack_trajectories(trajs, policy.tokenizer)
    with torch.no_grad():
        lp = token_logprobs(policy.model, batch.input_ids, batch.attention_mask)  # (N, T) teacher-forced
    m = batch.completion_mask.bool()
    torch.testing.assert_close(lp[m], batch.sampled_logprobs[m], atol=1e-4, rtol=0)
    assert [t.ids for t in again] == [t.ids for t in trajs], "same generator seed, same trajectories"


def test_pack_into_rollout_batch(real_run):
    policy, _, trajs, _ = real_run
    b = pack_trajectories(trajs, policy.tokenizer)
    assert b.input_ids.shape == (4, max(len(t) for t in trajs))
    for i, t in enumerate(trajs):
        assert b.input_ids[i, : len(t)].tolist() == t.ids and b.attention_mask[i].sum() == len(t)
        assert (
            b.completion_mask[i, : len(t)].tolist() == [float(m) for m in t.loss_mask]
            and b.completion_mask[i, len(t) :].sum() == 0
        )
        assert b.fields[i]["answer"] == t.task.answer and b.fields[i]["agent_finish_reason"] == t.finish_reason
    assert b.group_index.tolist() == [0, 0, 1, 1] and b.prompts[0].startswith("Q: ")
    assert b.stats["rollout/completion_tokens"] == sum(sum(t.loss_mask) for t in trajs)
    fields = b.reward_fields()
    assert fields[0]["completion_tokens"] == sum(trajs[0].loss_mask)


def oracle(world):
    """A scripted agent for search_world: search the subject, open it, answer from the document."""

    def respond(context: str) -> str:
        question = context.split("Q: ")[-1].split("<eos>")[0]
        q = next(q for q in world.questions(20, hops=1) if q.question == question)
        name = world.entities[q.subject].name
        n_obs = context.count("[tool]")
        if n_obs == 0:
            return (
                f"I will search. <tool_call>{json.dumps({'name': 'search', 'arguments': {'query': name}})}</tool_call>"
            )
        if n_obs == 1:
            return f"<tool_call>{json.dumps({'name': 'open', 'arguments': {'doc_id': q.subject}})}</tool_call>"
        return f"<answer>{q.answer}</answer>"

    return respond


def test_scripted_control_flow_with_tools(tok, world):
    tasks = world.questions(20, hops=1)[:3]
    engine = ScriptedEngine(tok, oracle(world), logprob=-0.5)
    trajs = rollout(
        engine,
        Policy(model=None, tokenizer=tok),
        tasks,
        lambda: SearchWorldEnv(world, prompt="Q: {question}"),
        AgentConfig(max_turns=5, max_turn_tokens=200, max_total_tokens=2000),
    )
    for t in trajs:
        assert t.finish_reason == "done" and t.reward == 1.0 and len(t.turns) == 3
        assert [m["role"] for m in t.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert (
            t.info["correct"]
            and t.info["supported"]
            and t.info["num_tool_calls"] == 2
            and t.info["docs_opened"] == [t.task.subject]
        )
        assert [u.stop for u in t.turns] == ["eos"] * 3 and t.turns[-1].observation is None
        assert set(lp for lp, m in zip(t.sampled_logprobs, t.loss_mask) if m) == {-0.5}
        assert t.task.answer in t.messages[4]["content"]
        assert tok.decode(t.ids).endswith(f"[assistant]\n<answer>{t.task.answer}</answer><eos>\n")
        assert check_trajectory(t, tok).ok
    assert len(engine.contexts) == 9


def test_stop_strings_cut_turns(tok, world):
    """An engine that cannot stop on strings: the turn is cut right after </tool_call>; the template's
    end of turn (with <eos>) is then forced, mask 0."""
    reply = '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call> and then rambling'
    engine = ScriptedEngine(tok, lambda context: reply, end_turn=False)
    [t] = rollout(
        engine,
        Policy(model=None, tokenizer=tok),
        world.questions(1, hops=1),
        lambda: SearchWorldEnv(world),
        AgentConfig(max_turns=2, max_turn_tokens=200, max_total_tokens=4000),
    )
    first = t.turns[0]
    assert first.stop == "stop" and first.text == reply.split(" and then")[0]
    assert t.ids[first.end] == tok.eos_token_id and t.loss_mask[first.end] == 0
    assert t.finish_reason == "max_turns" and len(t.turns) == 2 and t.messages[-1]["role"] == "assistant"
    assert check_trajectory(t, tok).ok


def test_turn_budget_and_total_token_limit(tok, world):
    engine = ScriptedEngine(tok, lambda context: "x" * 50)
    policy = Policy(model=None, tokenizer=tok)
    [t] = rollout(
        engine,
        policy,
        world.questions(1, hops=1),
        lambda: SearchWorldEnv(world, prompt="Q: {question}"),
        AgentConfig(max_turns=10, max_turn_tokens=20, max_total_tokens=200),
    )
    assert [u.stop for u in t.turns] == ["length"] and t.turns[0].end - t.turns[0].start == 20
    assert t.finish_reason == "max_tokens" and len(t) <= 200, "the no-action observation does not fit: the episode ends"
    [tiny] = rollout(
        engine,
        policy,
        world.questions(1, hops=1),
        lambda: SearchWorldEnv(world, prompt="Q: {question}"),
        AgentConfig(max_total_tokens=10),
    )
    assert tiny.finish_reason == "max_tokens" and tiny.turns == [] and sum(tiny.loss_mask) == 0
    assert check_trajectory(tiny, tok).ok


def test_environment_steps_run_concurrently(tok):
    class Slow(Env):
        def reset(self, task):
            return Observation(text="go", system="be brief")

        def step(self, action):
            time.sleep(0.3)
            return StepResult("tick", 0.5, False, {"n": 1})

    policy = Policy(model=None, tokenizer=tok)
    start = time.perf_counter()
    trajs = rollout(ScriptedEngine(tok, lambda c: "ok"), policy, [0, 1, 2, 3], Slow, AgentConfig(max_turns=2))
    wall = time.perf_counter() - start
    assert wall < 0.5 * 8 * 0.3, f"8 sleeping steps took {wall:.2f} s: episodes did not step concurrently"
    for t in trajs:
        assert (
            t.messages[0] == {"role": "system", "content": "be brief"}
            and t.reward == 1.0
            and t.finish_reason == "max_turns"
        )
        assert [u.reward for u in t.turns] == [0.5, 0.5] and check_trajectory(t, tok).ok


def test_async_native_env(tok):
    class AsyncEnv(Env):
        async def areset(self, task):
            return Observation(text=f"task {task}")

        async def astep(self, action):
            await asyncio.sleep(0)
            return StepResult("", 1.0, True, {"action": action})

    [t] = rollout(ScriptedEngine(tok, lambda c: "done"), Policy(model=None, tokenizer=tok), [7], AsyncEnv)
    assert t.finish_reason == "done" and t.info == {"action": "done"} and t.turn_index().count(0) == len("done") + 1


def test_cut_turn_with_multi_character_tokens():
    """With a BPE tokenizer the stop string may end inside a token: that token is kept whole."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<eos>": 0, "ab": 1, "</": 2, "x>": 3, "x>yy": 4, "c": 5}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<eos>"))
    core.pre_tokenizer, core.decoder = pre_tokenizers.Whitespace(), decoders.Fuse()
    t = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>")
    assert cut_turn(t, [1, 2, 4, 5, 5], frozenset({0}), ("</x>",), 100) == (3, "stop")
    assert cut_turn(t, [1, 5, 0, 5], frozenset({0}), ("</x>",), 100) == (3, "eos")
    assert cut_turn(t, [1, 5, 5], frozenset({0}), ("</x>",), 2) == (2, "length")
    assert cut_turn(t, [1, 2, 3, 0, 5], frozenset({0}), ("</x>",), 100) == (4, "eos"), (
        "an end token right after the stop string is kept"
    )
    assert cut_turn(t, [1, 2, 3, 0], frozenset({0}), ("</x>",), 3) == (3, "stop")


def test_config_validation():
    with pytest.raises(ValueError, match="max_turns"):
        AgentConfig(max_turns=0)
    with pytest.raises(ValueError, match="stop_strings"):
        AgentConfig(stop_strings=("",))
