"""The Plackett-Luce retriever (HARR) trained in the RL step beside the policy: its parameters get the step's
gradient, evaluation retrieves greedily, and the checkpoint carries and restores it."""

from __future__ import annotations

import json
import re

import torch

from ascent.agents import ScriptedEngine
from ascent.app.pipeline import load_companions, make_collector, prepare
from ascent.config import load_config
from ascent.envs.retriever import RetrieverTrainer
from ascent.trainer.checkpoint import Checkpointer
from ascent.trainer.rl import RLParts, RLTrainer

OVERRIDES = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "data.task=search_world(hops=[2], top_k=1, snippet_chars=200, retriever=plackett_luce)",
    "data.num_train=16",
    "data.num_eval=4",
    "agent.max_turns=2",
    "agent.max_turn_tokens=120",
    "agent.max_total_tokens=500",
    "train.prompts_per_step=2",
    "rollout.samples_per_prompt=4",
    "train.micro_batch_size=8",
    "train.eval_every=0",
    "warmstart.steps=0",
    "control.enabled=false",
    "logging.progress=false",
]
REWARD = """
def found(prompts, completions, agent_info, evidence, **fields):
    return [sum(d in info.get("docs_retrieved", []) for d in ev) / len(ev) for info, ev in zip(agent_info, evidence)]
"""


def respond(context: str) -> str:
    """Search the question, then answer."""
    if "<tool_response>" in context:
        return "<answer>x</answer>"
    question = re.findall(r"Q: (.*?\?)", context)[-1]
    return f"<tool_call>{json.dumps({'name': 'search', 'arguments': {'query': question}})}</tool_call>"


def trainer_for(tmp_path, name):
    (tmp_path / "found.py").write_text(REWARD)
    cfg = load_config("search-agent", OVERRIDES + [f"reward={tmp_path}/found.py:found", f"output_dir={tmp_path}"])
    run, policy = prepare(cfg, tmp_path / name, {})
    engine = ScriptedEngine(policy.tokenizer, respond)
    parts = RLParts(
        policy, run.task.train, run.encoder, engine, run.rewards, run.settings, make_collector(run, policy, engine)
    )
    parts.companions = run.task.agent.companions
    return RLTrainer(cfg, parts), run


def test_the_retriever_trains_in_the_rl_step_and_resumes(tmp_path):
    trainer, run = trainer_for(tmp_path, "a")
    (companion,) = trainer.parts.companions
    assert isinstance(companion, RetrieverTrainer)
    retriever = companion.retriever
    before = retriever.weight.detach().clone()
    m = trainer.step()
    assert m["reward/std"] > 0, "sampled lists give the group different rewards"
    assert m["retriever/lists"] == 8.0 and m["retriever/grad_norm"] > 0
    assert not torch.equal(retriever.weight.detach(), before), "the retriever's parameters moved"
    assert retriever.sampling is False, "evaluation after the step retrieves greedily"
    assert all(
        len(info.get("retrievals", [])) == 1 for f in trainer.last.batch.fields for info in f["agent_turn_infos"][:1]
    )

    ckpt = Checkpointer(tmp_path / "ckpt", keep=1)
    path = ckpt.save(1, trainer.parts.policy, trainer.state_dict())
    state = Checkpointer.load_state(path)
    assert torch.equal(state["companions"][0]["weights"]["weight"], retriever.weight.detach())

    other, other_run = trainer_for(tmp_path, "b")
    fresh = other.parts.companions[0].retriever
    assert not torch.equal(fresh.weight.detach(), retriever.weight.detach())
    load_companions(other_run, path)  # what `ascent eval CHECKPOINT` does
    assert torch.equal(fresh.weight.detach(), retriever.weight.detach())
    other.parts.companions[0].reset()
    other.load_state_dict(state)
    assert torch.equal(fresh.weight.detach(), retriever.weight.detach())
    assert other.parts.companions[0].optimizer.state_dict()["state"], "Adam's moments are restored too"
    # both continue identically: the same seed stream and weights give the same next lists and update
    m1, m2 = trainer.step(), other.step()
    assert m1["retriever/loss"] == m2["retriever/loss"]
    assert torch.equal(fresh.weight.detach(), retriever.weight.detach())

    run.task.agent.companions[0].reset()
    assert torch.equal(retriever.weight.detach(), before), "reset (the control's start) restores the initial weights"
