"""RL on agents: the agent collector's batch satisfies the turn-extras contract, the learner trains on
masks with gaps (observations between turns), one RL step on a tiny search_world changes parameters,
agent runs resume exactly, and the warm start imitates only the demonstrator's tokens."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from safetensors.torch import load_file

from ascent.agents import AgentConfig, ScriptedEngine, rollout
from ascent.agents.collector import AgentCollector, answer_probs, history_ends, prefix_hashes, turn_extras
from ascent.app.pipeline import make_demonstrations, prepare, train
from ascent.config import load_config
from ascent.policy.model import Policy, token_logprobs
from ascent.rollout import make_engine
from ascent.rollout.batch import concat_batches
from ascent.tasks import task_piece
from ascent.tasks.search_world import SearchWorldParams, SearchWorlds
from ascent.trainer.checkpoint import Checkpointer
from ascent.trainer.learner import Learner
from ascent.trainer.rl import RLParts, RLTrainer, advantage_input
from ascent.trainer.samples import read_samples

WORLD = SearchWorldParams(
    people=4, companies=2, cities=2, countries=1, questions_per_world=2, top_k=1, snippet_chars=160
)
LOOP = AgentConfig(max_turns=3, max_turn_tokens=16, max_total_tokens=800)
TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.num_train=40",
    "data.num_eval=4",
    "agent.max_turns=2",
    "agent.max_turn_tokens=12",
    "agent.max_total_tokens=240",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=3",
    "train.micro_batch_size=4",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "warmstart.steps=0",
    "control.enabled=false",
    "logging.progress=false",
    "eval.batch_size=4",
]
REWARD = """
def has_a(prompts, completions, agent_turn_texts, **fields):
    return [float("a" in texts[0]) if texts else 0.0 for texts in agent_turn_texts]
"""


@pytest.fixture(scope="module")
def worlds():
    return SearchWorlds(WORLD)


@pytest.fixture(scope="module")
def rows(worlds):
    return worlds.rows(6, range(100, 200), set())


@pytest.fixture(scope="module")
def policy():
    from ascent.agents import with_chat_template
    from ascent.envs.search_world import ALPHABET
    from ascent.policy.tokenizer import char_tokenizer
    from tests.conftest import tiny_qwen

    tok = with_chat_template(char_tokenizer(ALPHABET))
    return Policy(model=tiny_qwen(tok, seed=5), tokenizer=tok)


@pytest.fixture(scope="module")
def agent_batch(worlds, rows, policy):
    from ascent.tasks.agent import AgentTask

    task = AgentTask(worlds.make_env, worlds.env_task, worlds.demonstrator)
    collector = AgentCollector(policy, rows, make_engine("ascent"), task, LOOP, n=3)
    return collector, collector.collect([1, 4], torch.Generator().manual_seed(0))


def test_collector_batch_satisfies_the_turn_contract(agent_batch, rows):
    _, b = agent_batch
    n, t = b.input_ids.shape
    idx, rew, kind, pre = (b.extras[k] for k in ("turn_index", "turn_rewards", "turn_kind", "turn_prefix"))
    turns = [len(f["agent_turns"]) for f in b.fields]
    m = max(turns)
    assert n == 6 and idx.shape == (n, t) and rew.shape == kind.shape == pre.shape == (n, m)
    assert idx.dtype == kind.dtype == pre.dtype == torch.long and rew.dtype == torch.float32
    assert torch.equal(idx >= 0, b.completion_mask.bool()), "turn_index >= 0 exactly on the sampled tokens"
    for i, f in enumerate(b.fields):
        for k, (s, e) in enumerate(f["agent_turns"]):
            assert (idx[i, s:e] == k).all() and (idx[i, :s] != k).all() and (idx[i, e:] != k).all()
        k = turns[i]
        assert not torch.isnan(rew[i, :k]).any() and torch.isnan(rew[i, k:]).all()
        assert (
            (kind[i, :k] >= 0).all()
            and (kind[i, k:] == -1).all()
            and (pre[i, :k] >= 0).all()
            and (pre[i, k:] == -1).all()
        )
        assert rew[i, : k - 1].tolist() == [0.0] * (k - 1) and float(rew[i, :k].sum()) == f["agent_reward"], (
            "env step rewards: tool turns 0, the answer turn its score"
        )
        assert kind[i, :k].tolist() == [int(inf.get("tool_calls", 0) > 0) for inf in f["agent_turn_infos"]]
    assert b.group_index.tolist() == [0, 0, 0, 1, 1, 1] and b.row_index.tolist() == [1, 1, 1, 4, 4, 4]
    assert (
        b.fields[0]["answer"] == rows[1]["answer"] and b.prompts[3] == rows[4]["prompt"] and "agent_info" in b.fields[0]
    )
    gaps = [(b.completion_mask[i, : int(b.attention_mask[i].sum())].diff() == 1).sum() for i in range(n)]
    assert max(gaps) >= 2, "some trajectory has several turns separated by masked observation tokens"
    observations = [o for f in b.fields for o in f["agent_observation_texts"] if o is not None]
    assert observations and all(len(f["agent_observation_texts"]) == len(f["agent_turns"]) for f in b.fields)
    for f, completion in zip(b.fields, b.completions):
        for obs in f["agent_observation_texts"]:
            assert obs is None or obs.strip() in completion, "observations decoded as the completion shows them"


def test_extras_survive_select_and_concat(agent_batch):
    _, b = agent_batch
    part = b.select(torch.tensor([4, 1]))
    width = int(part.attention_mask.sum(-1).max())
    assert part.extras["turn_index"].shape == (2, width) and torch.equal(
        part.extras["turn_index"], b.extras["turn_index"][[4, 1], :width]
    )
    assert torch.equal(part.extras["turn_kind"], b.extras["turn_kind"][[4, 1]])
    both = concat_batches([b.select(torch.tensor([0, 1, 2])), b.select(torch.tensor([3, 4, 5]))])
    for k, v in b.extras.items():
        if v.dim() == 1:  # per-episode extras (durations)
            assert torch.equal(both.extras[k], v), k
            continue
        w = min(v.shape[1], both.extras[k].shape[1])
        assert torch.equal(torch.nan_to_num(both.extras[k][:, :w], nan=-7.0), torch.nan_to_num(v[:, :w], nan=-7.0)), k
    assert torch.equal(
        both.extras["turn_index"],
        torch.where(
            both.completion_mask.bool(), both.extras["turn_index"], torch.full_like(both.extras["turn_index"], -1)
        ),
    )
    inp = advantage_input(
        b,
        type(
            "S",
            (),
            {"rewards": torch.zeros(6), "valid": torch.ones(6, dtype=torch.bool), "components": torch.zeros(6, 1)},
        )(),
    )
    assert all(inp.extras[k] is b.extras[k] for k in b.extras), "advantage_input merges the batch's extras"


def test_prefix_hashes_mark_identical_histories(worlds, rows, policy):
    """Scripted episodes: the same replies give the same prefixes; a reply that differs at turn 1 shares turn 0 only."""
    calls = {"n": 0}

    def respond(context):
        if "<tool_response>" not in context:
            return '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
        calls["n"] += 1
        return "<answer>a</answer>" if calls["n"] % 2 else "<answer>b</answer>"

    loop = AgentConfig(max_turns=3, max_turn_tokens=100, max_total_tokens=2000)
    trajs = rollout(
        ScriptedEngine(policy.tokenizer, respond),
        Policy(None, policy.tokenizer),
        [worlds.env_task(rows[0])],
        worlds.make_env,
        loop,
        n=2,
    )
    extras = turn_extras(trajs, max(len(t) for t in trajs), [[u.reward for u in t.turns] for t in trajs])
    pre = extras["turn_prefix"]
    assert pre[0, 0] == pre[1, 0] and pre[0, 1] != pre[1, 1]
    assert extras["turn_kind"].tolist() == [[1, 0], [1, 0]]
    h = __import__("hashlib").blake2b(
        __import__("numpy").asarray(trajs[0].ids[: trajs[0].turns[0].end], dtype="int64").tobytes(), digest_size=8
    )
    assert prefix_hashes(trajs[0])[0] == int.from_bytes(h.digest(), "little") & (2**63 - 1)


def test_learner_on_masks_with_gaps(agent_batch, policy):
    """Sampled log-probs match the learner's recompute (<= 1e-4) on multi-turn batches; values at masked
    positions (observations between turns) cannot change the update; the loss is the token mean over turns."""
    from ascent.config.schema import OptimConfig, RolloutConfig, RunConfig, TrainConfig

    _, b = agent_batch
    mask = b.completion_mask
    adv = torch.randn(mask.shape, generator=torch.Generator().manual_seed(1)) * mask
    junk = adv + 100.0 * (1 - mask)  # garbage wherever mask == 0
    results = []
    for a in (adv, junk):
        p = Policy(model=__import__("copy").deepcopy(policy.model), tokenizer=policy.tokenizer)
        cfg = RunConfig(
            train=TrainConfig(steps=1, micro_batch_size=64, optim=OptimConfig(lr=1e-2)),
            rollout=RolloutConfig(temperature=1.0, max_new_tokens=16),
        )
        learner = Learner(p, cfg)  # one micro-batch: loss/policy is the whole loss
        m = learner.update(b, a, torch.ones(len(b), dtype=torch.bool))
        assert m["rollout/logprob_mismatch"] <= 1e-4
        assert m["loss/policy"] == pytest.approx(float(-(adv * mask).sum() / mask.sum()), abs=1e-5), (
            "ratio 1: loss = -token-mean advantage over the turns"
        )
        results.append(p.model.state_dict())
    assert all(torch.equal(results[0][k], results[1][k]) for k in results[0])
    assert any(not torch.equal(results[0][k], policy.model.state_dict()[k]) for k in results[0])


def test_igpo_answer_probs_are_the_policy_probability_of_the_gold_answer(agent_batch, policy, worlds, rows):
    collector, _ = agent_batch
    trajs = rollout(
        collector.engine,
        policy,
        [worlds.env_task(rows[2])],
        worlds.make_env,
        LOOP,
        n=2,
        generator=torch.Generator().manual_seed(3),
    )
    probs = answer_probs(policy.model, trajs, [rows[2]["answer"]] * 2, "<answer>{answer}</answer>", policy.tokenizer)
    tok = policy.tokenizer
    for t, p in zip(trajs, probs):
        ends = history_ends(t)
        assert len(p) == len(t.turns) + 1 and [x is None for x in p] == [e is None for e in ends]
        head = t.ids[: ends[0]] + tok("<answer>", add_special_tokens=False)["input_ids"]
        gold = tok(rows[2]["answer"], add_special_tokens=False)["input_ids"]
        ids = torch.tensor([head + gold])
        with torch.no_grad():
            lp = token_logprobs(policy.model, ids, torch.ones_like(ids))[0, len(head) :]
        assert p[0] == pytest.approx(math.exp(float(lp.mean())), rel=1e-5)
    igpo = AgentCollector(policy, rows, collector.engine, collector.task, LOOP, n=2, turn_rewards="igpo").collect(
        [2], torch.Generator().manual_seed(3)
    )
    for i, f in enumerate(igpo.fields):
        p, step = f["agent_answer_probs"], igpo.extras["turn_rewards"][i]
        for k in range(
            len(f["agent_turns"])
        ):  # a gain where an observation followed, else the step reward (0: the tiny model never answers right)
            assert float(step[k]) == pytest.approx(p[k + 1] - p[k] if p[k + 1] is not None else 0.0)


def test_eapo_turn_rewards_are_log_gains_of_the_probe_on_exploratory_turns(agent_batch, policy, rows):
    # the oracle plays (tool calls, then answers), the probe scores the gold answer with the tiny policy
    collector, _ = agent_batch
    oracle = collector.task.demonstrator(rows, random.Random(0))
    loop = AgentConfig(max_turns=4, max_turn_tokens=100, max_total_tokens=2000)
    eapo = AgentCollector(
        policy, rows, ScriptedEngine(policy.tokenizer, oracle), collector.task, loop, n=2, turn_rewards="eapo"
    ).collect([1, 2], torch.Generator().manual_seed(4))
    kinds, checked = eapo.extras["turn_kind"], 0
    for i, f in enumerate(eapo.fields):
        p, step = f["agent_answer_probs"], eapo.extras["turn_rewards"][i]
        for k in range(len(f["agent_turns"])):
            explored = int(kinds[i, k]) == 1 and p[k + 1] is not None
            want = math.log(max(p[k + 1], 1e-6)) - math.log(max(p[k], 1e-6)) if explored else 0.0
            assert float(step[k]) == pytest.approx(want, rel=1e-5, abs=1e-6)
            checked += explored
    assert checked > 0, "the tiny policy made no exploratory turn: the test checks nothing"


@pytest.fixture
def reward_file(tmp_path):
    (tmp_path / "has_a.py").write_text(REWARD)
    return f"{tmp_path}/has_a.py:has_a"


def test_one_rl_step_changes_parameters(tmp_path, reward_file):
    cfg = load_config(
        "search-agent",
        TINY + [f"reward={reward_file}", f"output_dir={tmp_path}", "train.optim.lr=1e-2", "train.steps=1"],
    )
    run, policy = prepare(cfg, tmp_path / "run", {})
    from ascent.app.pipeline import make_collector

    engine = make_engine("ascent")
    trainer = RLTrainer(
        cfg,
        RLParts(
            policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
        ),
    )
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    m = trainer.step()
    assert m["reward/std"] > 0 and math.isfinite(m["loss/policy"]) and m["loss/skipped_steps"] == 0
    assert m["rollout/logprob_mismatch"] <= 1e-4 and "agent/turns_mean" in m
    after = policy.model.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert sum(not torch.equal(before[k], after[k]) for k in before) == len(before)


def test_agent_run_resumes_exactly(tmp_path, reward_file):
    over = TINY + [
        f"reward=[{reward_file},trace]",
        f"output_dir={tmp_path}",
        "train.steps=2",
        "train.optim.lr=1e-2",
        "warmstart.steps=1",
        "warmstart.batch_size=2",
        "warmstart.eval_every=0",
        "logging.samples_every=1",
    ]
    cfg = load_config("search-agent", over)
    full = train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    assert train(cfg.__class__(**{**cfg.__dict__, "name": "split"}), stop_at=1) is None
    resumed = train(run_dir=tmp_path / "split", resume=True)
    weights = [
        load_file(Checkpointer(tmp_path / n / "checkpoints").latest() / "model.safetensors") for n in ("full", "split")
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert (
        full["accuracy_after_rl"] == resumed["accuracy_after_rl"]
        and full["tool_calls_after_rl"] == resumed["tool_calls_after_rl"]
    )
    state = Checkpointer.load_state(Checkpointer(tmp_path / "split" / "checkpoints").latest())
    assert "1:trace" in state["rewards"], "the stateful reward's state is checkpointed"
    for key in (
        "accuracy_before_rl",
        "tool_calls_before_rl",
        "unsupported_answer_rate_before_rl" if "unsupported_answer_rate_before_rl" in full else "answer_rate_before_rl",
        "token_check_pass_rate",
    ):
        assert key in full
    assert full["token_check_pass_rate"] == 1.0
    logged = [read_samples(tmp_path / n) for n in ("full", "split")]
    assert logged[0] == logged[1] and [r["step"] for r in logged[0]] == [1] * 6 + [2] * 6, "resumed sample log"
    turns = [t for r in logged[0] for t in r["agent"]["turns"]]
    assert turns and all(
        (t["observation"] or "").strip() in r["completion"] for r in logged[0] for t in r["agent"]["turns"]
    )
    finish = {r["agent"]["finish_reason"] for r in logged[0]}
    assert any(t["observation"] for t in turns) and finish <= {"done", "max_turns", "max_tokens"}


def test_warm_start_imitates_only_the_demonstrators_tokens(tmp_path):
    cfg = load_config(
        "search-agent",
        TINY
        + [f"output_dir={tmp_path}", "agent.max_turns=5", "agent.max_turn_tokens=40", "agent.max_total_tokens=400"],
    )
    run, policy = prepare(cfg, tmp_path / "run", {})
    demos = make_demonstrations(run, policy)
    b = demos(run.task.train[:6], random.Random(0))
    tok = policy.tokenizer
    for i, f in enumerate(b.fields):
        text = "".join(tok.convert_ids_to_tokens(int(x)) for x, m in zip(b.input_ids[i], b.completion_mask[i]) if m)
        sampled = "".join(t + "<eos>" for t in f["agent_turn_texts"])
        assert text == sampled, "the loss covers exactly the demonstrator's turns (and their end tokens)"
        assert f["agent_finish_reason"] == "done"
    assert any("<tool_response>" in tok.decode(b.input_ids[i]) for i in range(len(b)))


def test_recipe_loads():
    cfg = load_config("search-agent")
    task = task_piece(cfg.data)
    assert task.name == "search_world" and cfg.agent.max_total_tokens <= cfg.model.max_position_embeddings
    assert cfg.control.enabled and cfg.warmstart.optim.schedule == "cosine" and cfg.warmstart.optim.min_lr_ratio == 0.0
    assert json.loads(json.dumps(task.params.hops)) == [1]


def test_serl_hindsight_teacher_runs_in_an_agent_step(tmp_path, reward_file):
    from ascent.algorithms.hindsight import DELTA, SerlState

    cfg = load_config(
        "search-agent",
        TINY + [f"reward={reward_file}", f"output_dir={tmp_path}", "train.steps=1", "algorithm.advantage=serl"],
    )
    run, policy = prepare(cfg, tmp_path / "run", {})
    from ascent.app.pipeline import make_collector

    engine = make_engine("ascent")
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    trainer = RLTrainer(cfg, parts)
    (state,) = [s for s in trainer.states.values() if isinstance(s, SerlState)]
    seen = {}
    extras = state.advantage_extras
    state.advantage_extras = lambda batch: seen.setdefault("out", extras(batch))
    m = trainer.step()
    assert math.isfinite(m["loss/policy"]) and state.steps == 1
    assert float(seen["out"][DELTA].abs().sum()) > 0  # the feedback moved the teacher's log-probs


def test_soar_stream_credit_runs_in_an_agent_step(tmp_path, reward_file):
    from ascent.algorithms.soar import EXT, LABELS, SoarState

    cfg = load_config(
        "search-agent",
        TINY + [f"reward={reward_file}", f"output_dir={tmp_path}", "train.steps=1", "algorithm.advantage=soar"],
    )
    run, policy = prepare(cfg, tmp_path / "run", {})
    from ascent.app.pipeline import make_collector

    engine = make_engine("ascent")
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    trainer = RLTrainer(cfg, parts)
    (state,) = [s for s in trainer.states.values() if isinstance(s, SoarState)]
    seen = {}
    extras = state.advantage_extras
    state.advantage_extras = lambda batch: (
        seen.setdefault("shape", batch.input_ids.shape) and seen.setdefault("out", extras(batch))
    )
    m = trainer.step()
    shape, out = seen["shape"], seen["out"]
    assert math.isfinite(m["loss/policy"]) and tuple(out[LABELS].shape) == tuple(shape)
    assert out[EXT].shape == (shape[0],)  # one stream reward per episode (NaN: no external stream written)


def test_meta_tags_turn_rewards_are_each_turns_tag_score(agent_batch, policy, worlds, rows):
    from ascent.rewards.agentic import answer_em
    from ascent.rewards.meta_tags import meta_turn_rewards, turn_tag_types

    collector, _ = agent_batch
    meta = AgentCollector(policy, rows, collector.engine, collector.task, LOOP, n=2, turn_rewards="meta_tags")
    b = meta.collect([2], torch.Generator().manual_seed(3))
    for i, f in enumerate(b.fields):
        texts = f["agent_turn_texts"]
        ok = answer_em([""], [""], [rows[2]["answer"]], [f["agent_info"]], [texts])[0]
        want = meta_turn_rewards(texts, f["agent_turn_infos"], bool(ok))
        assert b.extras["turn_rewards"][i, : len(texts)].tolist() == pytest.approx(want)
        assert b.extras["turn_tag"][i, : len(texts)].tolist() == turn_tag_types(texts)  # GRPO-MR's tag groups
        assert (b.extras["turn_tag"][i, len(texts) :] == -1).all()


def test_meta_tags_credit_goes_to_the_tagged_turn():
    # two episodes with the same tag mean (episode-level meta_tags reward) but the good exploration in
    # different turns: per-turn credit tells them apart, the episode-level mean cannot
    from ascent.algorithms import ADVANTAGES, AdvantageInput
    from ascent.algorithms.turn_advantages import ExploreGroupParams
    from ascent.config.schema import AlgorithmConfig
    from ascent.rewards.meta_tags import meta_turn_rewards

    call = '<tool_call>{"name": "search", "arguments": {"q": "%s"}}</tool_call>'
    first = ["<explore/>" + call % "a", "<explore/>" + call % "a", "<answer>x</answer>"]  # new call, then a repeat
    second = ["<explore/>" + call % "a", "<explore/>" + call % "b", "<answer>x</answer>"]  # new, new
    third = ["<explore/>" + call % "a" + call % "a", "<explore/>" + call % "a", "<answer>x</answer>"]
    infos = [{"tool_calls": 1}, {"tool_calls": 1}, {}]
    f = [meta_turn_rewards(t, infos, success=False) for t in (first, second, third)]
    assert f == [[1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]
    idx = torch.tensor([[0, 1, 2]] * 3)
    inp = AdvantageInput(
        torch.zeros(3),
        torch.ones(3, dtype=torch.bool),
        torch.zeros(3, dtype=torch.long),
        torch.ones(3, 3),
        {
            "turn_index": idx,
            "turn_rewards": torch.tensor(f),
            "turn_kind": torch.tensor([[1, 1, 0]] * 3),
        },
    )
    adv = ADVANTAGES.get("explore_group")(inp, AlgorithmConfig(), ExploreGroupParams(step_coef=1.0))
    assert float(adv[1, 1]) > 0 > float(adv[0, 1])  # the second episode's second exploration is the credited one
    assert torch.equal(adv[0], adv[2])


def test_grpo_mr_runs_in_an_agent_step_on_the_tagging_oracles_task(tmp_path, reward_file):
    """RLVMR's GRPO-MR end to end: meta_tags turn rewards and tag types reach the estimator in a training step."""
    cfg = load_config(
        "search-agent",
        TINY
        + [
            f"reward={reward_file}",
            f"output_dir={tmp_path}",
            "train.steps=1",
            "agent.turn_rewards=meta_tags",
            "algorithm.advantage=grpo_mr",
            "data.task.search_world.oracle_markup=meta",
        ],
    )
    run, policy = prepare(cfg, tmp_path / "run", {})
    from ascent.app.pipeline import make_collector

    engine = make_engine("ascent")
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    m = RLTrainer(cfg, parts).step()
    assert math.isfinite(m["loss/policy"])
