"""`learner.shard=fsdp2` in the RL learner, 2 gloo processes on CPU: every rank trains a sharded copy of the policy
(FSDP2), rank 0 keeps its whole model for the rollout and refreshes it after each update. An update equals the
one-process update on the same batch (metrics, gradients read from AdamW's gathered moments, weights); each rank
stores half of the optimizer state; the gathered checkpoint resumes on 2 sharded ranks and in one process to the
uninterrupted run's next step (also after a Ctrl-C reached rank 1); a killed rank fails the run with one line.
~25 s (two spawned rank-1 processes)."""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
from dataclasses import replace

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from ascent.config import load_config
from ascent.policy.model import Policy
from ascent.trainer.distributed import DataParallel, LearnerProcessError
from ascent.trainer.fsdp import optimizer_state_bytes, optimizer_state_numel
from ascent.trainer.learner import Learner
from ascent.typed import ConfigError
from tests.conftest import tiny_qwen
from tests.trainer.test_data_parallel import assert_same, config, rollout, weights


def fsdp2(kl: float = 0.05):
    """The data-parallel test's config (2 ranks, micro-batches of 3, 2 mini-batches, ppo_clip) with fsdp2."""
    cfg = config(2, kl=kl)
    return replace(cfg, learner=replace(cfg.learner, shard="fsdp2"))


def moments(state: dict) -> list[torch.Tensor]:
    """exp_avg of every parameter from a one-process-layout optimizer state dict (gathered with fsdp2)."""
    return [state["optimizer"]["state"][i]["exp_avg"] for i in sorted(state["optimizer"]["state"])]


def test_fsdp2_update_equals_one_process_and_resumes(tokenizer):
    torch.set_num_threads(1)
    model = tiny_qwen(tokenizer, seed=3, hidden=32, layers=2).train()
    (b1, a1), (b2, a2) = rollout(tokenizer, model, 1), rollout(tokenizer, model, 2)
    valid = torch.ones(len(b1), dtype=torch.bool)
    one = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), config(1))
    two = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), fsdp2())
    assert isinstance(two.ranks, DataParallel) and two.lockstep and len(two.micro_batches(b1, slice(0, 8))) == 3
    try:
        m1, m2 = one.update(b1, a1, valid), two.update(b1, a1, valid)
        assert two.train_model is not two.policy.model  # rank 0: a sharded training copy beside the whole model
        assert all(isinstance(p, DTensor) for p in two.train_model.parameters())
        assert not any(isinstance(p, DTensor) for p in two.policy.model.parameters())
        for k in m1:
            assert m2[k] == pytest.approx(m1[k], rel=1e-5, abs=1e-7), k
        assert m1["loss/grad_norm"] > 0 and "kl/ref_k3" in m1
        assert_same(weights(one), weights(two))  # rank 0's whole model, refreshed from both ranks' shards
        whole = dict(two.policy.model.named_parameters())
        for name, p in two.train_model.named_parameters():  # rank 0's shard is the first dim-0 chunk of it
            torch.testing.assert_close(p.to_local(), torch.chunk(whole[name].detach(), 2)[0])
        # each rank stores its dim-0 shard of the optimizer state: about half, nothing duplicated
        total = optimizer_state_numel(one.optimizer)
        assert total == 2 * sum(p.numel() for p in model.parameters()) == 38528
        rank0 = 2 * sum(torch.chunk(p.detach(), 2)[0].numel() for p in model.parameters())
        assert optimizer_state_numel(two.optimizer) == rank0 == 19296
        mib = 4 / 2**20  # fp32 elements
        assert m2["learner/rank0_optim_state_mb"] == pytest.approx(rank0 * mib, rel=1e-12)
        assert m2["learner/rank1_optim_state_mb"] == pytest.approx((total - rank0) * mib, rel=1e-12)  # 19,232
        assert optimizer_state_bytes(one.optimizer) == total * 4
        assert m2["learner/rank1_peak_rss_mb"] > 0
        # Ctrl-C reaches every rank of a terminal's process group; rank 1 leaves it to rank 0, whose save at the next
        # clean point gathers rank 1's optimizer shards (before: rank 1 died of KeyboardInterrupt, the save failed)
        os.kill(two.ranks.procs[0].pid, signal.SIGINT)
        time.sleep(0.3)
        saved_weights, saved_state = copy.deepcopy(two.policy.model.state_dict()), two.state_dict()  # gathered
        assert two.ranks.procs[0].is_alive()
        for g1, g2 in zip(moments(one.state_dict()), moments(saved_state)):  # both ranks' gradient shards
            torch.testing.assert_close(g2, g1, atol=1e-6, rtol=1e-5)
        assert saved_state["optimizer"]["param_groups"] == one.state_dict()["optimizer"]["param_groups"]
        two.update(b2, a2, valid)
    finally:
        two.ranks.close()
    assert not dist.is_initialized() and not two.ranks.procs

    resumed = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), fsdp2())
    resumed.policy.model.load_state_dict(saved_weights)
    resumed.load_state_dict(saved_state)
    single = Learner(Policy(model=copy.deepcopy(model), tokenizer=tokenizer), config(1))  # fsdp2 -> world_size 1
    single.policy.model.load_state_dict(saved_weights)
    single.load_state_dict(saved_state)
    try:
        m_one, m_resumed, m_single = (
            one.update(b2, a2, valid),
            resumed.update(b2, a2, valid),
            single.update(b2, a2, valid),
        )
        # a killed rank: rank 0 alone in a sharded forward waits in an all-gather rank 1 never joins, and the kill
        # must end that wait with one line, not learner.timeout_s
        pid = resumed.ranks.procs[0].pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        with pytest.raises(LearnerProcessError, match=rf"^learner rank 1 \(pid {pid}\) exited with code -9; the run"):
            resumed.ranks.guarded(lambda: resumed.train_model(input_ids=b2.input_ids[:1]))
        assert not dist.is_initialized()
        with pytest.raises(LearnerProcessError, match="the learner ranks stopped after an earlier failure"):
            resumed.update(b2, a2, valid)
    finally:
        resumed.ranks.close()
    assert m_one["kl/ref_k3"] > 0  # the reference (the initial model) differs from the policy now
    for k in m_one:
        assert m_resumed[k] == pytest.approx(m_one[k], rel=1e-5, abs=1e-7), k
        assert m_single[k] == pytest.approx(m_one[k], rel=1e-5, abs=1e-7), k
    assert_same(weights(one), weights(resumed))
    assert_same(weights(one), weights(single))
    assert_same(weights(two), weights(resumed))  # the uninterrupted sharded run took the same step


def test_fsdp2_options_are_checked():
    cfg = load_config("default", ["learner.world_size=2", "learner.shard=fsdp2"])
    assert (cfg.learner.world_size, cfg.learner.shard) == (2, "fsdp2")
    with pytest.raises(ConfigError, match=r"^learner.shard=fsdp2 shards the learner over its ranks: set learner.wor"):
        load_config("default", ["learner.shard=fsdp2"])
    with pytest.raises(ConfigError, match=r"^learner.shard=fsdp2 does not shard LoRA adapters"):
        load_config("default", ["learner.world_size=2", "learner.shard=fsdp2", "model.lora.enabled=true"])
