"""The token checker: loop trajectories reproduce the chat template (a character template and SmolLM2's);
deliberately re-tokenised trajectories are caught, at the right token."""

from __future__ import annotations

import copy
import json
import string

import pytest
import torch

from ascent.agents import (
    AgentConfig,
    ChatFormat,
    ScriptedEngine,
    check_trajectories,
    check_trajectory,
    rollout,
    with_chat_template,
)
from ascent.agents.trajectory import Trajectory
from ascent.envs.search_world import SearchWorld, SearchWorldEnv, WorldConfig
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rollout import make_engine
from ascent.rollout.types import Generation

ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"


@pytest.fixture(scope="module")
def world():
    return SearchWorld(WorldConfig(num_people=8, num_companies=3, num_cities=3, num_countries=2, seed=2))


def agent(world):
    """Search the question's subject (the reply starts with a space), then answer."""

    def respond(context: str) -> str:
        q = next(q for q in world.questions(10, hops=1) if q.question in context)
        if "<tool_response>" not in context:
            call = {"name": "search", "arguments": {"query": world.entities[q.subject].name}}
            return f" <tool_call>{json.dumps(call)}</tool_call>"
        return f"The answer is <answer>{q.answer}</answer>"

    return respond


def retokenized(t: Trajectory, tokenizer, fix=lambda text: text, add_special_tokens=True) -> Trajectory:
    """The common bug: rebuild the ids by tokenising each message's text on its own (with the tokenizer's
    default special tokens unless told otherwise, and `fix` applied to assistant text), keeping the
    template's end-of-turn tokens from the original."""
    ids = list(t.ids[: t.prompt_len])
    for turn in t.turns:
        text_end = turn.end - 1 if t.ids[turn.end - 1] == tokenizer.eos_token_id else turn.end
        ids += tokenizer(fix(turn.text), add_special_tokens=add_special_tokens)["input_ids"]
        ids += t.ids[text_end : turn.observation[0] if turn.observation else len(t.ids)]
        if turn.observation:
            obs = tokenizer.decode(t.ids[turn.observation[0] : turn.observation[1]], skip_special_tokens=False)
            ids += tokenizer(obs, add_special_tokens=add_special_tokens)["input_ids"]
    out = copy.deepcopy(t)
    out.ids = ids
    return out


def test_char_template_real_model_passes_and_retokenised_fails(world):
    from tests.conftest import tiny_qwen

    tok = with_chat_template(char_tokenizer(ALPHABET))
    policy = Policy(model=tiny_qwen(tok, seed=3), tokenizer=tok)
    cfg = AgentConfig(max_turns=2, max_turn_tokens=10, max_total_tokens=400)
    trajs = rollout(
        make_engine("ascent"),
        policy,
        world.questions(2, hops=1),
        lambda: SearchWorldEnv(world, prompt="Q: {question}"),
        cfg,
        n=2,
        generator=torch.Generator().manual_seed(1),
    )
    report = check_trajectories(trajs, tok)
    assert report["checked"] == 4 and report["matched"] == 4 and report["divergences"] == []

    t = next(t for t in trajs if t.turns[0].observation is not None)
    bad = retokenized(t, tok)  # tokenizer(text) prepends <bos> to every piece
    c = check_trajectory(bad, tok)
    assert not c.ok and c.index == t.turns[0].start and c.kind == "sampled"
    assert c.got[0] == tok.bos_token_id and c.expected[0] == t.ids[t.turns[0].start] and not c.same_text
    assert "diverges at token" in c.describe() and "<bos>" in c.got_text


def test_char_template_scripted_agent_and_stripped_retokenisation(world):
    tok = with_chat_template(char_tokenizer(ALPHABET))
    trajs = rollout(
        ScriptedEngine(tok, agent(world)),
        Policy(model=None, tokenizer=tok),
        world.questions(3, hops=1),
        lambda: SearchWorldEnv(world),
        AgentConfig(max_turns=3, max_turn_tokens=300, max_total_tokens=3000),
    )
    assert all(t.finish_reason == "done" and t.reward == 1.0 for t in trajs)
    assert check_trajectories(trajs, tok)["matched"] == 3
    t = trajs[0]
    assert retokenized(t, tok, add_special_tokens=False).ids == t.ids, "char tokenisation is canonical"
    c = check_trajectory(
        retokenized(t, tok, fix=str.strip, add_special_tokens=False), tok
    )  # frameworks that strip message text
    assert not c.ok and c.index == t.turns[0].start and c.kind == "sampled" and not c.same_text, (
        c.describe()
    )  # where the leading " " was
    assert c.expected[0] == tok.convert_tokens_to_ids(" ") and c.got[0] == tok.convert_tokens_to_ids("<")


@pytest.fixture(scope="module")
def smol_tok():
    from transformers import AutoTokenizer

    from ascent.policy.pretrained import smollm2_path

    try:
        path = smollm2_path()
    except RuntimeError as e:
        pytest.skip(f"SmolLM2 unavailable offline: {e}")
    return AutoTokenizer.from_pretrained(path)


def test_smollm2_template_pieces(smol_tok):
    fmt = ChatFormat.from_tokenizer(smol_tok)
    assert smol_tok.decode(fmt.assistant_end_ids) == "<|im_end|>\n" and fmt.turn_end_id == smol_tok.eos_token_id
    assert smol_tok.decode(fmt.observation_ids("x")) == "<|im_start|>tool\nx<|im_end|>\n<|im_start|>assistant\n"


def test_smollm2_scripted_agent_passes_and_retokenised_fails(smol_tok, world):
    trajs = rollout(
        ScriptedEngine(smol_tok, agent(world)),
        Policy(model=None, tokenizer=smol_tok),
        world.questions(3, hops=1),
        lambda: SearchWorldEnv(world),
        AgentConfig(max_turns=3, max_turn_tokens=200, max_total_tokens=2000),
    )
    assert all(t.finish_reason == "done" and t.reward == 1.0 for t in trajs)
    report = check_trajectories(trajs, smol_tok)
    assert report["matched"] == 3, report["divergences"]
    t = trajs[1]
    assert retokenized(t, smol_tok, add_special_tokens=False).ids == t.ids
    c = check_trajectory(retokenized(t, smol_tok, fix=str.strip, add_special_tokens=False), smol_tok)
    assert not c.ok and c.kind == "sampled" and not c.same_text and c.index == t.turns[0].start, c.describe()


class NonCanonical:
    """An engine that samples a valid but non-canonical tokenisation: one token per character."""

    def __init__(self, tokenizer, text):
        self.tokenizer, self.text = tokenizer, text

    def generate(self, model, prompt_ids, n, s, generator):
        ids = [self.tokenizer.convert_tokens_to_ids(ch) for ch in self.text] + [s.eos_id]
        tokens = torch.tensor([ids] * len(prompt_ids))
        return Generation(
            tokens,
            torch.full(tokens.shape, -1.0),
            torch.full((len(prompt_ids),), len(ids)),
            torch.ones(len(prompt_ids), dtype=torch.bool),
        )


def test_smollm2_non_canonical_sample_is_reported_as_same_text(smol_tok, world):
    text = "<answer>Yes</answer>"
    [t] = rollout(
        NonCanonical(smol_tok, text),
        Policy(model=None, tokenizer=smol_tok),
        world.questions(1, hops=1),
        lambda: SearchWorldEnv(world),
        AgentConfig(max_turns=1),
    )
    assert t.turns[0].text == text and t.ids[t.turns[0].start : t.turns[0].end - 1] == [
        smol_tok.convert_tokens_to_ids(ch) for ch in text
    ]
    c = check_trajectory(t, smol_tok)
    assert not c.ok and c.same_text and c.kind == "sampled" and t.turns[0].start <= c.index < t.turns[0].end, (
        c.describe()
    )
    assert "same text, different tokenisation" in c.describe()


def test_templates_the_loop_cannot_use():
    tok = char_tokenizer(ALPHABET)
    with pytest.raises(ValueError, match="no chat template"):
        ChatFormat.from_tokenizer(tok)
    last_only = with_chat_template(tok, "{{ messages[-1]['content'] }}{% if add_generation_prompt %}>{% endif %}")
    with pytest.raises(ValueError, match="prefix-stable"):
        ChatFormat.from_tokenizer(last_only)
    no_tool = with_chat_template(
        tok, "{% for m in messages %}{% if m['role'] != 'tool' %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}"
    )
    with pytest.raises(ValueError, match="drops the 'tool' message"):
        ChatFormat.from_tokenizer(no_tool)
