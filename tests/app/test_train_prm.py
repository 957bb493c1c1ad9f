"""Math-Shepherd step labels and the process reward model: Monte Carlo labels on a tiny deterministic two-step
environment (hand-computed hard and soft labels), replay refusing a non-deterministic environment, and
`ascent train-prm` end to end on a tiny search_world (folder format, held-out metrics, `prm(path=...)` in RL)."""

from __future__ import annotations

import json
import math
from itertools import count

import pytest
import torch

from ascent.agents import AgentConfig, with_chat_template
from ascent.agents.scripted import ScriptedEngine
from ascent.app.train_prm import StepSampler, mc_labels, read_steps
from ascent.cli import main
from ascent.config.process_reward import StepDataConfig
from ascent.envs.base import Env, Observation, StepResult
from ascent.policy.model import Policy
from ascent.policy.tokenizer import char_tokenizer
from ascent.rewards.runner import RewardRunner
from ascent.tasks import DataError
from ascent.tasks.agent import AgentTask

REWARD = """
def env_reward(prompts, completions, agent_reward, **fields):
    return [float(r) for r in agent_reward]
"""

HAS_A = """
def has_a(prompts, completions, agent_turn_texts, **fields):
    return [float("a" in texts[0]) if texts else 0.0 for texts in agent_turn_texts]
"""


class SayAB(Env):
    """Two turns; reward 1 when the replies were 'a' then 'b'."""

    def reset(self, task):
        self.said = []
        return Observation(text=f"go {task}")

    def step(self, action):
        self.said.append(action.strip())
        done = len(self.said) == 2
        return StepResult(f"ok {len(self.said)}", float(self.said == ["a", "b"]) if done else 0.0, done)


class Drifting(SayAB):
    """Like SayAB, but its first observation changes every episode (not reproducible by replay)."""

    counter = count()

    def reset(self, task):
        super().reset(task)
        return Observation(text=f"go {task} {next(self.counter)}")


def cycling_responder():
    """Turn 0 replies cycle a, c; turn 1 replies cycle b, x (the turn is read from the context)."""
    first, second = count(), count()

    def respond(context: str) -> str:
        if "ok " not in context:
            return "ac"[next(first) % 2]
        return "bx"[next(second) % 2]

    return respond


def sampler(tmp_path, env_cls, completions=4):
    (tmp_path / "r.py").write_text(REWARD)
    tok = with_chat_template(char_tokenizer("abcxgo0123456789 k"))
    engine = ScriptedEngine(tok, cycling_responder())
    agent = AgentTask(make_env=env_cls, env_task=lambda row: row["prompt"])
    loop = AgentConfig(max_turns=2, max_turn_tokens=4, max_total_tokens=200, stop_strings=())
    runner = RewardRunner([f"{tmp_path}/r.py:env_reward"])
    cfg = StepDataConfig(policy="x", samples=1, completions=completions)
    return StepSampler(agent, Policy(model=None, tokenizer=tok), engine, loop, runner, cfg)


def test_mc_step_labels_by_hand(tmp_path):
    """Originals: row p says a,b (success), row q says c,x (failure). Completions from step 0 replay the first
    reply and continue with the cycling turn-1 replies b, x, b, x, | b, x, b, x: p's a+b twice in four (soft
    0.5, hard 1), q's c+anything never (0, 0). The last step's label is the trajectory's own outcome."""
    rows = [{"prompt": "p"}, {"prompt": "q"}]
    recs = sampler(tmp_path, SayAB).records(rows, seed=0)
    assert [r.outcome for r in recs] == [1.0, 0.0]
    assert recs[0].hard == [1.0, 1.0] and recs[0].soft == [0.5, 1.0]
    assert recs[1].hard == [0.0, 0.0] and recs[1].soft == [0.0, 0.0]
    assert len(recs[0].starts) == 2 and all(s < e for s, e in zip(recs[0].starts, recs[0].ends))
    assert mc_labels([0.0, 1.0, 0.0], 1.0) == (1.0, 1 / 3)


def test_replay_refuses_a_non_deterministic_environment(tmp_path):
    with pytest.raises(DataError, match="deterministic"):
        sampler(tmp_path, Drifting).records([{"prompt": "p"}], seed=0)


def test_outcome_labels_without_completions(tmp_path):
    recs = sampler(tmp_path, SayAB, completions=0).records([{"prompt": "p"}, {"prompt": "q"}], seed=0)
    assert [r.hard for r in recs] == [[1.0, 1.0], [0.0, 0.0]]  # every step gets the trajectory's outcome


TINY = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.num_train=24",
    "data.num_eval=6",
    "agent.max_turns=3",
    "agent.max_turn_tokens=24",
    "agent.max_total_tokens=400",
    "threads=1",
]


@pytest.fixture(scope="module")
def prm_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prm")
    steps = ["prm.policy=demonstrator", "prm.num_train=4", "prm.num_eval=3", "prm.samples=2", "prm.completions=1"]
    assert main(["make-steps", "search-agent", *TINY, *steps, "--out", str(tmp / "steps")]) == 0
    train = ["rm.steps=3", "rm.batch_size=4", "rm.micro_batch_size=2", "rm.eval_every=0", f"rm.out={tmp / 'prm'}"]
    files = [f"prm.file={tmp / 'steps' / 'steps.train.jsonl'}", f"prm.eval_file={tmp / 'steps' / 'steps.eval.jsonl'}"]
    assert main(["train-prm", "search-agent", *TINY, *files, *train]) == 0
    return tmp / "prm"


def test_train_prm_writes_a_reward_model_folder(prm_folder):
    meta = json.loads((prm_folder / "reward_model.json").read_text())
    assert meta["kind"] == "process" and 0.0 <= meta["step_accuracy"] <= 1.0
    assert meta["train_steps"] == sum(len(r.ends) for r in read_steps(prm_folder / "steps.train.jsonl"))
    for name in ("config.json", "model.safetensors", "reward_head.safetensors", "steps.eval.jsonl"):
        assert (prm_folder / name).exists(), name


def rl_trainer(tmp_path, extra: list[str]):
    """An RL trainer on the tiny search_world (2 prompts x 2 samples a step), no warm start."""
    from ascent.app.pipeline import make_collector, prepare
    from ascent.config import load_config
    from ascent.rollout import make_engine
    from ascent.trainer.rl import RLParts, RLTrainer

    over = [
        "train.prompts_per_step=2",
        "rollout.samples_per_prompt=2",
        "train.micro_batch_size=4",
        "warmstart.steps=0",
        "control.enabled=false",
        "logging.progress=false",
        f"output_dir={tmp_path}",
    ]
    cfg = load_config("search-agent", TINY + over + extra)
    run, policy = prepare(cfg, tmp_path / "run", {})
    engine = make_engine("ascent")
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    return RLTrainer(cfg, parts)


def test_prm_gives_step_credit_in_an_rl_step(prm_folder, tmp_path):
    trainer = rl_trainer(tmp_path, [f"algorithm.advantage=prm(path={prm_folder})"])
    batch, scores, _ = trainer.collect()
    inp_scores = trainer.states["advantage"].advantage_extras(batch)["prm_scores"]
    turns = (batch.extras["turn_index"].max(dim=1).values + 1).tolist()
    for i, k in enumerate(turns):  # a score in (0, 1) for each of the row's turns, NaN after
        assert all(0 < float(s) < 1 for s in inp_scores[i, :k]) and all(math.isnan(s) for s in inp_scores[i, k:])
    adv = trainer.advantages(batch, scores)
    assert adv.shape == batch.completion_mask.shape and torch.isfinite(adv).all()


@pytest.mark.parametrize(
    "spec,metric", [("q_evolve(batch_size=4)", "critic/q_loss"), ("spa(batch_size=4)", "progress/loss")]
)
def test_learned_critics_train_inside_an_rl_step(spec, metric, tmp_path):
    (tmp_path / "has_a.py").write_text(HAS_A)  # a reward the random tiny policy sometimes earns
    trainer = rl_trainer(tmp_path, [f"algorithm.advantage={spec}", f"reward={tmp_path}/has_a.py:has_a"])
    state = trainer.states["advantage"]
    before = {k: {n: p.clone() for n, p in m.state_dict().items()} for k, m in state.models.items()}
    m = trainer.step()
    assert math.isfinite(m[metric])
    for k, model in state.models.items():
        changed = sum(not torch.equal(before[k][n], p) for n, p in model.state_dict().items())
        assert changed >= 2, k  # at least the head (zero-initialised heads give the trunk gradients from step 2)
    assert len(state.buffer) == 4  # 2 prompts x 2 samples joined the buffer


def test_a_prm_folder_is_refused_as_an_outcome_reward(prm_folder):
    from ascent.rewards.reward_model import RewardModelReward
    from ascent.typed import ConfigError

    with pytest.raises(ConfigError, match="prm\\(path="):
        RewardModelReward(str(prm_folder))
