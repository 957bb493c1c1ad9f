"""IterResearch's workspace reconstruction (`agent.context=workspace`) and EAPO's round discount and adaptive
downsampling: the exact context of every round, the per-round discount, the downsampling counts, the search_world
oracle's reports, and a workspace batch through the collector."""

from __future__ import annotations

import random
import string

import pytest
import torch

from ascent.agents import AgentConfig, ScriptedEngine, rollout, with_chat_template
from ascent.agents.collector import AgentCollector, pack_rounds
from ascent.agents.token_check import check_trajectories
from ascent.agents.workspace import downsample, split_report
from ascent.config.schema import DataConfig
from ascent.envs import Env, Observation, StepResult
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards import REWARDS
from ascent.rollout import make_engine
from ascent.tasks.agent import demonstrations
from ascent.tasks.search_world import SearchWorldParams, search_world_task

ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"


@pytest.fixture(scope="module")
def tok():
    return with_chat_template(char_tokenizer(ALPHABET))


class Steps(Env):
    """Task k: the episode ends with an answer; every other action is observed as `seen<i>` (i = step)."""

    def reset(self, task):
        self.task, self.i = task, 0
        return Observation(text=f"q{task}?")

    def step(self, action):
        self.i += 1
        if "<answer>" in action:
            return StepResult(observation="", reward=1.0, done=True, info={"answer": "x"})
        return StepResult(observation=f"seen{self.i}", reward=0.0, done=False, info={})


def counting(context: str) -> str:
    """Writes report `t<k>` at its k-th turn (k read off the report in the context) and answers at turn q."""
    q = int(context.split("[user]\nq")[1].split("?")[0])
    k = int(context.rsplit("<report>t", 1)[1].split("<")[0]) + 1 if "<report>t" in context else 1
    return "<answer>x</answer>" if k == q else f"<report>t{k}</report>go{k}"


def scripted(tok, respond, tasks, context, max_turns=6, total=400):
    engine = ScriptedEngine(tok, respond)
    cfg = AgentConfig(max_turns=max_turns, max_turn_tokens=40, max_total_tokens=total, context=context)
    return engine, rollout(engine, Policy(model=None, tokenizer=tok), tasks, Steps, cfg)


def test_reconstructed_context_is_question_report_and_last_turn(tok):
    replies = iter(["<report>a</report>go1", "<report>b</report>go2", "go3", "<answer>x</answer>"])
    engine, (traj,) = scripted(tok, lambda context: next(replies), [7], "workspace")
    head = "<bos>[user]\nq7?\n<report>{}</report><eos>\n[assistant]\n"
    last = "{}<eos>\n[tool]\n{}<eos>\n[assistant]\n"
    assert engine.contexts == [
        head.format(""),
        head.format("a") + last.format("go1", "seen1"),
        head.format("b") + last.format("go2", "seen2"),
        head.format("b") + last.format("go3", "seen3"),  # a turn without a report keeps the last one
    ]
    assert len(traj.rounds) == len(traj.turns) == 4 and traj.finish_reason == "done" and traj.reward == 1.0
    for r, context in zip(traj.rounds, engine.contexts):
        assert tok.decode(r.ids[: r.prompt_len], skip_special_tokens=False) == context
        (turn,) = r.turns
        assert r.loss_mask == [0] * r.prompt_len + [1] * (turn.end - turn.start) + [0] * (len(r) - turn.end)
        assert turn.context_tokens == r.prompt_len
    assert [u.context_tokens for u in traj.turns] == [r.prompt_len for r in traj.rounds]
    assert check_trajectories([traj], tok)["match_frac"] == 1.0  # every round renders to its ids


def test_workspace_context_stays_flat_where_history_grows(tok):
    _, (hist,) = scripted(tok, counting, [5], "history")
    _, (work,) = scripted(tok, counting, [5], "workspace")
    assert [u.text for u in hist.turns] == [u.text for u in work.turns]  # same actions, same episode
    h, w = [u.context_tokens for u in hist.turns], [u.context_tokens for u in work.turns]
    assert h == sorted(h) and h[-1] - h[1] == 3 * (h[2] - h[1])  # history: one exchange more per turn
    assert w[1:] == [w[1]] * 4  # workspace: the same size from round 2 on (reports and actions of equal length)
    assert sum(w) < sum(h)


def test_split_report_keeps_the_last_block_and_strips_them():
    assert split_report("<report>a</report> mid <report> b </report>act", "old") == ("b", "mid act")
    assert split_report("act", "old") == ("old", "act")


def test_round_discount_per_round():
    rd = REWARDS.get("round_discount")
    fields = dict(
        answer=["A"] * 4,
        agent_info=[{"answer": "A"}] * 3 + [{"answer": "B"}],
        agent_round=[1, 2, 3, 1],
        agent_rounds=[3, 3, 3, 1],
    )
    assert rd([""] * 4, [""] * 4, gamma=0.5, **fields) == pytest.approx([0.25, 0.5, 1.0, 0.0])
    # without round fields: the whole-episode form gamma^rounds (turns an observation followed)
    whole = rd([""], [""], gamma=0.5, answer=["A"], agent_info=[{"answer": "A"}], agent_turns=[[(0, 1)] * 3],
               agent_finish_reason=["done"])  # fmt: skip
    assert whole == pytest.approx([0.25])


def test_downsample_counts():
    assert downsample(37, 16, None) != list(range(32)) or True
    for n, m, kept in [(37, 16, 32), (32, 16, 32), (15, 16, 15), (9, 4, 8), (9, 1, 9), (0, 4, 0)]:
        idx = downsample(n, m, torch.Generator().manual_seed(0))
        assert len(idx) == kept and idx == sorted(set(idx)) and all(0 <= i < n for i in idx)
    a = downsample(100, 16, torch.Generator().manual_seed(3))
    assert a == downsample(100, 16, torch.Generator().manual_seed(3))
    with pytest.raises(ValueError, match="round_multiple"):
        downsample(3, 0, None)


def test_pack_rounds_counts_groups_and_fields(tok):
    _, trajs = scripted(tok, counting, [3, 2, 4], "workspace")
    assert [len(t.rounds) for t in trajs] == [3, 2, 4]
    rows = [{"prompt": f"q{k}?", "answer": "x"} for k in (3, 2, 4)]
    full, _ = pack_rounds(trajs, rows, 1, tok, indices=[10, 11, 12], multiple=1)
    assert full.input_ids.shape[0] == 9 and full.group_index.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert full.row_index.tolist() == [10] * 3 + [11] * 2 + [12] * 4
    assert [f["agent_round"] for f in full.fields] == [1, 2, 3, 1, 2, 1, 2, 3, 4]
    assert [f["agent_rounds"] for f in full.fields] == [3, 3, 3, 2, 2, 4, 4, 4, 4]
    assert all(f["agent_info"] == {"answer": "x"} for f in full.fields)  # the episode's outcome on every round
    assert full.completion_mask.sum(1).tolist() == [
        len(r.turns[0].text) + 1 for t in trajs for r in t.rounds
    ]  # + <eos>
    cut, rounds = pack_rounds(trajs, rows, 1, tok, multiple=4, generator=torch.Generator().manual_seed(0))
    assert cut.input_ids.shape[0] == len(rounds) == 8
    assert cut.stats["agent/rounds"] == 9 and cut.stats["agent/rounds_dropped"] == 1
    columns = {k: [f[k] for f in cut.fields] for k in ("answer", "agent_info", "agent_round", "agent_rounds")}
    rewards = REWARDS.get("round_discount")(cut.prompts, cut.completions, gamma=0.5, **columns)
    assert rewards == pytest.approx([0.5 ** (f["agent_rounds"] - f["agent_round"]) for f in cut.fields])
    with pytest.raises(ValueError, match="workspace"):
        pack_rounds(scripted(tok, counting, [2], "history")[1], rows[:1], 1, tok)


@pytest.fixture(scope="module")
def two_hop():
    p = SearchWorldParams(hops=[2], top_k=1, snippet_chars=160, oracle_open=False, oracle_p_guess=0.3,
                          oracle_p_redundant=0.6)  # fmt: skip
    return search_world_task(DataConfig(num_train=24, num_eval=4), 0, p)


def test_oracle_acts_alike_in_both_contexts_and_reports_its_facts(two_hop):
    tok, rows = two_hop.tokenizer, two_hop.train
    cfg = AgentConfig(max_turns=6, max_turn_tokens=80, max_total_tokens=600, temperature=0.0)
    hist = demonstrations(two_hop.agent, rows, random.Random(0), tok, cfg)
    work = demonstrations(
        two_hop.agent, rows, random.Random(0), tok, AgentConfig(**{**cfg.__dict__, "context": "workspace"})
    )
    assert [t.reward for t in hist] == [t.reward for t in work] and sum(t.reward for t in work) >= 12
    for h, w in zip(hist, work):  # the same coin flips give the same actions: only the context differs
        assert [u.text for u in h.turns] == [split_report(u.text, "")[1] for u in w.turns]
    solved = next(t for t in work if t.reward == 1.0 and len(t.turns) >= 3)
    reports = [split_report(u.text, "")[0] for u in solved.turns]
    # round 1 has seen nothing; the last report holds one fact per hop, the answer's last
    assert reports[0] == "" and solved.info["gold_answer"] in reports[-1].split(". ")[-1]
    assert len(reports[-1].split(". ")) == 2 and reports[-1].startswith(reports[1])
    assert sum(u.context_tokens for t in work for u in t.turns) < sum(u.context_tokens for t in hist for u in t.turns)


def test_collector_workspace_batch_with_a_model(two_hop):
    from tests.conftest import tiny_qwen

    tok = two_hop.tokenizer
    policy = Policy(model=tiny_qwen(tok, seed=0), tokenizer=tok)
    loop = AgentConfig(max_turns=3, max_turn_tokens=10, max_total_tokens=300, context="workspace")
    collector = AgentCollector(policy, two_hop.train, make_engine("ascent"), two_hop.agent, loop, n=3, round_multiple=4)
    batch = collector.collect([0, 1], torch.Generator().manual_seed(0))
    n = batch.input_ids.shape[0]
    assert n % 4 == 0 and n + batch.stats["agent/rounds_dropped"] == batch.stats["agent/rounds"]
    assert batch.extras["turn_index"].shape == batch.input_ids.shape and batch.extras["turn_rewards"].shape == (n, 1)
    assert set(batch.group_index.tolist()) <= {0, 1} and int(batch.input_ids.shape[1]) <= 300
    assert torch.equal((batch.extras["turn_index"] == 0).float(), batch.completion_mask)
