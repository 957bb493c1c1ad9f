"""ray.handoff=sample (the streaming store) and ray.broadcast=chain (peer-assisted pipelined weight broadcast).

The store's rules are checked in-process (its methods are plain asyncio); the broadcast and the streaming
trainer on the module's local Ray instance (2 CPUs)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import ray
import torch
from ray.exceptions import RayActorError

from ascent.config import ConfigError, load_config
from ascent.runtime.broadcast import BroadcastError, ChainBroadcast, ChunkReceiver, chunk_bounds, flatten, unflatten
from ascent.runtime.stream import Group, SampleStore, StreamTrainer, Unit
from tests.runtime.test_async_runtime import ASYNC, P, expected_counts, trainer_for
from tests.trainer.test_learning import TINY


def weights_like(seed: int = 0) -> dict[str, torch.Tensor]:
    """Tensors of several dtypes and shapes, sizes not multiples of the chunk (chunks cut through tensors)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(37, 11, generator=g),
        "layer.0.bias": torch.randn(13, generator=g).to(torch.bfloat16),
        "layer.0.nan": torch.tensor([float("nan"), -0.0, float("inf")]),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "count": torch.arange(5, dtype=torch.int64),
    }


def same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return list(a) == list(b) and all(
        a[k].dtype == b[k].dtype
        and a[k].shape == b[k].shape
        and torch.equal(a[k].reshape(-1).view(torch.uint8), b[k].reshape(-1).view(torch.uint8))
        for k in a
    )


def test_flatten_round_trip_is_bit_exact():
    state = weights_like()
    layout, buf = flatten(state)
    assert layout.total == buf.numel() == sum(t.numel() * t.element_size() for t in state.values())
    assert same_bits(unflatten(layout, buf), state)  # NaN, -0.0 and bf16 included
    assert chunk_bounds(layout.total, 64)[-1][1] == layout.total


def group(unit: Unit, worker: int = 0) -> Group:
    return Group(unit, batch=None, scores=None, errors=[], worker=worker)


def test_store_waits_for_expiring_groups_and_hands_each_out_once():
    async def scenario():
        store = SampleStore()
        units = [Unit(i, row=10 + i, version=i // 2, weights=None, seed=i) for i in range(6)]  # versions 0,0,1,1,2,2
        await store.put_work(units)
        got = [await store.next_work(worker=i % 2) for i in range(6)]
        assert [u.id for u in got] == list(range(6))  # FIFO
        for u in got[1:]:  # unit 0 (version 0) is the slow one
            await store.put_group(group(u, worker=u.id % 2))
        take = asyncio.create_task(store.take(need=[0, 1], count=2))  # step 1, K = 1: version-0 groups must go now
        await asyncio.sleep(0.01)
        assert not take.done()  # waits for the expiring group 0, though 5 groups are finished
        await store.put_group(group(got[0], worker=0))
        assert [g.unit.id for g in await take] == [0, 1]
        assert [g.unit.id for g in await store.take(need=[], count=3)] == [2, 3, 4]  # oldest versions first
        assert list(store.ready) == [5]
        # a dead worker's unit goes back to the front; a late answer from its first attempt is ignored
        await store.put_work([Unit(9, row=1, version=3, weights=None, seed=9)])
        first = await store.next_work(worker=1)
        assert await store.requeue(worker=1) == 1
        await store.put_group(group(first, worker=1))  # attempt 0: stale
        assert 9 not in store.ready
        again = await store.next_work(worker=0)
        assert again.id == 9 and again.attempt == 1
        await store.put_group(group(again, worker=0))
        assert sorted(g.unit.id for g in await store.take(need=[9], count=2)) == [5, 9]
        assert not store.ready and not store.queue

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def peers(ray_cluster):
    remote = ray.remote(num_cpus=0.1, max_concurrency=4)(ChunkReceiver)  # what the rollout workers inherit
    actors = [remote.remote() for _ in range(3)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    return actors


def test_chain_broadcast_delivers_bit_identical_weights(peers):
    chain = ChainBroadcast(peers, chunk_mb=100 / 2**20, timeout_s=60)  # 100-byte chunks: 20+ chunks, mid-tensor cuts
    for version in (0, 1):
        state = weights_like(version)
        chain.send(version, state)
        delays = chain.check(version, block=True)
        assert len(delays) == 3 and all(d >= 0 for d in delays)
        for p in peers:
            assert same_bits(ray.get(p.checksum.remote(version)), state)


def test_chain_broadcast_names_a_dead_worker(peers):
    ray.kill(peers[1])
    chain = ChainBroadcast(peers, chunk_mb=1.0, timeout_s=2)
    chain.send(5, weights_like())
    with pytest.raises(BroadcastError, match="rollout worker 1 died before receiving version 5"):
        chain.check(5, block=True)


def test_stream_options_are_checked():
    with pytest.raises(ConfigError, match="ray.handoff=sample"):
        load_config(
            "default", TINY + ["runtime=ray", "ray.handoff=sample", "ray.reward_workers=1", "ray.max_staleness=0"]
        )
    with pytest.raises(ConfigError, match="ray.broadcast"):
        load_config("default", TINY + ["ray.broadcast=tree"])


def test_stream_trains_every_row_once_within_the_staleness_bound_and_stops_on_a_dead_worker(seven, ray_cluster):
    steps, K = 5, 1
    trainer, policy = trainer_for(
        seven,
        ASYNC
        + [
            f"train.steps={steps}",
            f"ray.max_staleness={K}",
            "ray.rollout_workers=2",
            "ray.num_cpus_per_worker=0.5",
            "ray.handoff=sample",
            "ray.broadcast=chain",
        ],
    )
    assert isinstance(trainer, StreamTrainer)
    consumed = []
    real = trainer.accept_groups
    trainer.accept_groups = lambda groups: (consumed.extend(groups), real(groups))[1]
    try:
        logs = [trainer.step() for _ in range(steps)]
        trainer.cfg = replace(trainer.cfg, train=replace(trainer.cfg.train, steps=steps + 2))
        ray.kill(trainer.actors[1])  # a dead worker breaks the chain: one line, not a hang
        with pytest.raises(RayActorError):
            ray.get(trainer.actors[1].__ray_ready__.remote())
        with pytest.raises((RuntimeError, BroadcastError), match="rollout worker 1 died"):
            trainer.step()
    finally:
        trainer.close()
    ids = [g.unit.id for g in consumed]
    assert sorted(ids) == list(range(steps * P))  # every issued group consumed, exactly once
    for s in range(steps):
        groups = consumed[s * P : (s + 1) * P]
        assert all(0 <= s - g.unit.version <= K for g in groups)  # the bound, group by group
        assert logs[s]["async/staleness_max"] <= K
    rows = len(trainer.parts.rows)
    assert torch.equal(trainer.row_counts, expected_counts(rows, trainer.cfg.seed, steps))
    assert logs[-1]["async/samples"] == steps * P * 4
    assert all(g.batch.policy_version == g.unit.version for g in consumed)
