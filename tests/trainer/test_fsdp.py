"""FSDP2 on CPU with 2 gloo processes, forked (~3 s; spawned ~30 s) (`ascent.trainer.fsdp`): one optimizer step of a
sharded tiny Qwen2 on two halves of a batch equals the one-process step on the whole batch (loss, gradient norm,
updated weights, AdamW moments) within float tolerance; each rank keeps half of the optimizer state; a full
checkpoint written by 2 ranks resumes on 2 ranks and on 1 process to the same second step."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from transformers import Qwen2Config, Qwen2ForCausalLM

from ascent.config import load_config
from ascent.trainer.fsdp import full_state, load_full_state, optimizer_state_numel, shard_model, sum_scale
from ascent.typed import ConfigError

ROWS, T, VOCAB = 6, 12, 64


def model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True,
    )  # fmt: skip
    return Qwen2ForCausalLM(cfg)


def batch(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (ROWS, T), generator=torch.Generator().manual_seed(seed))


def loss_of(m: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Summed next-token NLL over `ids` divided by the WHOLE batch's token count (the learner's convention)."""
    logits = m(input_ids=ids).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), reduction="sum")
    return nll / (ROWS * (T - 1))


def step(m, opt, ids, rank=0, world=1) -> tuple[float, float]:
    loss = loss_of(m, ids[rank::world])
    (loss * sum_scale(world)).backward()
    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    opt.step()
    opt.zero_grad(set_to_none=True)
    total = loss.detach().clone()
    if world > 1:
        dist.all_reduce(total)
    return float(total), float(norm)


def optimizer(m) -> torch.optim.Optimizer:
    return torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)


def rank_main(rank: int, world: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        m = shard_model(model(), world)
        opt = optimizer(m)
        loss, norm = step(m, opt, batch(1), rank, world)
        state = full_state(m, opt)
        numel = torch.tensor([optimizer_state_numel(opt)])
        sizes = [torch.zeros_like(numel) for _ in range(world)]
        dist.all_gather(sizes, numel)
        # resume: a fresh sharded model from the full checkpoint, every rank reading rank 0's file
        if rank == 0:
            torch.save(state, os.path.join(out, "ckpt.pt"))
        dist.barrier()
        ckpt = torch.load(os.path.join(out, "ckpt.pt"), weights_only=False)
        m2 = shard_model(model(), world)
        opt2 = optimizer(m2)
        load_full_state(m2, opt2, ckpt)
        loss2, _ = step(m2, opt2, batch(2), rank, world)
        second = full_state(m2, opt2)
        if rank == 0:
            result = {"loss": loss, "norm": norm, "state": state, "numel": [int(s) for s in sizes]}
            result.update(loss2=loss2, second=second["model"])
            torch.save(result, os.path.join(out, "result.pt"))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> dict:
    out = str(tmp_path_factory.mktemp("fsdp"))
    mp.start_processes(rank_main, args=(2, free_port(), out), nprocs=2, join=True, start_method="fork")
    return torch.load(os.path.join(out, "result.pt"), weights_only=False)


def test_fsdp2_step_equals_one_process(sharded):
    m = model()
    opt = optimizer(m)
    loss, norm = step(m, opt, batch(1))
    assert sharded["loss"] == pytest.approx(loss, rel=1e-5)
    assert sharded["norm"] == pytest.approx(norm, rel=1e-5)
    full = sharded["state"]["model"]
    assert set(full) == set(m.state_dict())
    for k, v in m.state_dict().items():
        torch.testing.assert_close(full[k], v, rtol=1e-5, atol=1e-6)
    moments = sharded["state"]["optimizer"]["state"]
    for name, p in m.named_parameters():
        torch.testing.assert_close(moments[name]["exp_avg"], opt.state[p]["exp_avg"], rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(moments[name]["exp_avg_sq"], opt.state[p]["exp_avg_sq"], rtol=1e-4, atol=1e-9)


def test_each_rank_holds_half_the_optimizer_state(sharded):
    m = model()
    opt = optimizer(m)
    step(m, opt, batch(1))
    whole = optimizer_state_numel(opt)
    assert sum(sharded["numel"]) == whole  # dim-0 shards: nothing duplicated
    for n in sharded["numel"]:
        assert abs(n - whole / 2) <= 0.05 * whole  # ~half (uneven dim-0 splits round per tensor)


def test_resume_from_the_full_checkpoint(sharded):
    """The second step from the 2-rank checkpoint: on 2 ranks (in the spawned run) and on one process (here) both
    equal the uninterrupted one-process run's second step."""
    m = model()
    opt = optimizer(m)
    step(m, opt, batch(1))
    loss2, _ = step(m, opt, batch(2))
    assert sharded["loss2"] == pytest.approx(loss2, rel=1e-5)
    for k, v in m.state_dict().items():
        torch.testing.assert_close(sharded["second"][k], v, rtol=1e-5, atol=1e-6)
    single = model()
    opt1 = optimizer(single)
    load_full_state(single, opt1, sharded["state"])  # a 2-rank checkpoint into world_size 1
    step(single, opt1, batch(2))
    for k, v in m.state_dict().items():
        torch.testing.assert_close(single.state_dict()[k], v, rtol=1e-5, atol=1e-6)


def test_learner_shard_option_is_checked():
    assert load_config("default", ["learner.shard=none"]).learner.shard == "none"
    assert load_config("default", ["learner.world_size=2", "learner.shard=fsdp2"]).learner.shard == "fsdp2"
    with pytest.raises(ConfigError, match=r"^learner.shard must be 'none' or 'fsdp2', got 'zero3'"):
        load_config("default", ["learner.shard=zero3"])
