"""`learner.world_size=2`: a second learner process (gloo on CPU) takes half of each step's micro-batches and the
ranks sum their gradients, so an update equals the one-process update up to float summation order (loss metrics,
gradients, weights); a resumed learner restarts its ranks from the restored state; a killed rank stops the run
with one line instead of a hang."""

from __future__ import annotations

import copy
import os
import signal
import threading
from dataclasses import replace

import pytest
import torch
import torch.distributed as dist

from ascent.config import load_config
from ascent.policy.model import Policy
from ascent.rollout import SamplingSettings, assemble, make_engine
from ascent.trainer.distributed import DataParallel, LearnerProcessError
from ascent.trainer.learner import Learner
from ascent.typed import ConfigError
from tests.conftest import tiny_qwen

PROMPTS = ["12+34=", "7+8=", "99+1=", "5="]


def rollout(tokenizer, model, seed):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    s = SamplingSettings(max_new_tokens=10, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    gen = make_engine("ascent").generate(model, ids, 4, s, torch.Generator().manual_seed(seed))
    batch = assemble(PROMPTS, ids, [{} for _ in PROMPTS], gen, 4, tokenizer)
    adv = torch.randn(len(batch), generator=torch.Generator().manual_seed(seed))[:, None]
    return batch, adv.expand_as(batch.completion_mask).contiguous()


def config(world: int, loss: str = "ppo_clip", kl: float = 0.05):
    cfg = load_config(
        "default",
        [f"algorithm.loss={loss}", f"algorithm.kl_coef={kl}", f"learner.world_size={world}", "learner.timeout_s=60"],
    )
    return replace(
        cfg,
        threads=1,
        algorithm=replace(cfg.algorithm, mini_batches=2, ppo_epochs=1),
        train=replace(
            cfg.train, steps=10, micro_batch_size=3, kl_monitor=True, optim=replace(cfg.train.optim, lr=1e-3)
        ),
        rollout=replace(cfg.rollout, temperature=1.0, max_new_tokens=10),
    )


def gradients(learner):
    """The first step's gradients, read back from AdamW's first moment (exp_avg = (1 - beta1) g after one step)."""
    return [learner.optimizer.state[p]["exp_avg"].clone() for p in learner.policy.model.parameters()]


def weights(learner):
    return [p.detach().clone() for p in learner.policy.model.parameters()]


def assert_same(a, b):
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=1e-5)


def test_two_ranks_step_like_one_and_resume(tokenizer):
    torch.set_num_threads(1)
    model = tiny_qwen(tokenizer, seed=3, hidden=32, layers=2).train()
    (b1, a1), (b2, a2) = rollout(tokenizer, model, 1), rollout(tokenizer, model, 2)
    valid = torch.ones(len(b1), dtype=torch.bool)
    one = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), config(1))
    two = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), config(2))
    assert isinstance(two.ranks, DataParallel) and len(two.micro_batches(b1, slice(0, 8))) == 3  # uneven shares
    try:
        m1, m2 = one.update(b1, a1, valid), two.update(b1, a1, valid)
        assert_same(gradients(one), gradients(two))
        assert_same(weights(one), weights(two))
        assert set(m1) == {k for k in m2 if not k.startswith("learner/rank")}  # + each rank's memory
        assert m2["learner/rank0_optim_state_mb"] == m2["learner/rank1_optim_state_mb"] > 0  # replicated
        for k in m1:
            assert m2[k] == pytest.approx(m1[k], rel=1e-5, abs=1e-7), k
        assert m1["loss/grad_norm"] > 0 and "kl/ref_k3" in m1
        saved_weights, saved_state = copy.deepcopy(two.policy.model.state_dict()), copy.deepcopy(two.state_dict())
        two.update(b2, a2, valid)  # rank 1 checks its weights against rank 0's (a fingerprint) before it steps
    finally:
        two.ranks.close()
    assert not dist.is_initialized() and not two.ranks.procs

    # resume: a fresh world_size=2 learner restored from the checkpointed weights and learner state
    resumed = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), config(2))
    resumed.policy.model.load_state_dict(saved_weights)
    resumed.load_state_dict(saved_state)
    try:
        m_one, m_resumed = one.update(b2, a2, valid), resumed.update(b2, a2, valid)
    finally:
        resumed.ranks.close()
    assert_same(weights(one), weights(resumed))
    assert m_one["kl/ref_k3"] > 0  # the reference (the initial model) differs from the policy now
    for k in m_one:
        assert m_resumed[k] == pytest.approx(m_one[k], rel=1e-5, abs=1e-7), k
    assert_same(weights(two), weights(resumed))  # the run that went on without a restart took the same step


def test_a_killed_rank_fails_the_update_in_one_line(tokenizer):
    torch.set_num_threads(1)
    model = tiny_qwen(tokenizer, seed=3, hidden=32, layers=2).train()
    b, a = rollout(tokenizer, model, 1)
    valid = torch.ones(len(b), dtype=torch.bool)
    learner = Learner(Policy(model=model, tokenizer=tokenizer), config(2, kl=0.0))
    try:
        learner.update(b, a, valid)
        pid = learner.ranks.procs[0].pid
        # rank 0 waits in a collective rank 1 never joins; the kill must end the wait, not learner.timeout_s
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        with pytest.raises(LearnerProcessError, match=rf"^learner rank 1 \(pid {pid}\) exited with code -9; the run"):
            learner.ranks._call(dist.barrier)
        assert not dist.is_initialized()
        with pytest.raises(LearnerProcessError):  # the group is gone: the next update restarts nothing silently
            learner.update(b, a, valid)
    finally:
        learner.ranks.close()


def test_piece_states_are_refused_with_more_than_one_rank(tokenizer):
    model = tiny_qwen(tokenizer, seed=3, hidden=32, layers=2)
    learner = Learner(Policy(model=model, tokenizer=tokenizer), config(2), states=[object()])
    with pytest.raises(ConfigError, match=r"^learner.world_size=2: the pieces' states \(object\) are not sharded"):
        learner.check_shardable()
    assert not learner.ranks.started  # refused before any process was spawned


def test_world_size_is_checked():
    with pytest.raises(ConfigError, match="learner.world_size must be >= 1"):
        load_config("default", ["learner.world_size=0"])
    with pytest.raises(ConfigError, match=r"^learner.world_size=2: algorithm.advantage=reinforce_pp keeps a state"):
        load_config("default", ["learner.world_size=2", "algorithm.advantage=reinforce_pp"])
    with pytest.raises(ConfigError, match=r"^learner.world_size=2: algorithm.advantage=gae keeps a state"):
        load_config("default", ["learner.world_size=2", "algorithm.advantage=gae"])
    assert load_config("default", ["learner.world_size=2"]).learner.world_size == 2
