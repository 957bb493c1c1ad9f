"""runtime=ray: K=0 reproduces the local run, staleness stays within K, a killed worker is replaced without
losing or double-counting samples, and async N + resume + N steps trains on the same rows as 2N steps.

Ray is started here (2 CPUs, no dashboard) once for the module and stopped after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray
import torch

from ascent.app.pipeline import prepare, train
from ascent.config import ConfigError, load_config
from ascent.data.sampler import RowSampler
from ascent.rollout import make_engine
from ascent.runtime import make_trainer
from ascent.runtime.async_trainer import AsyncTrainer
from ascent.runtime.worker import RewardSpec, RolloutRequest, RolloutWorker, trainable_state
from ascent.trainer.checkpoint import Checkpointer
from ascent.trainer.rl import RLParts
from tests.trainer.test_learning import TINY

P, N = 4, 4  # prompts per step, samples per prompt
BASE = ["train.prompts_per_step=4", "rollout.samples_per_prompt=4", "train.optim.lr=3e-3"]
ASYNC = ["runtime=ray", "algorithm.tis_cap=2.0", "ray.num_cpus_per_worker=0.5"]


def trainer_for(seven, overrides):
    cfg = load_config("default", TINY + seven + BASE + overrides)
    run, policy = prepare(cfg, Path(cfg.output_dir) / cfg.name, {})
    parts = RLParts(policy, run.task.train, run.encoder, make_engine(cfg.rollout.backend), run.rewards, run.settings)
    return make_trainer(cfg, parts), policy


def flat(policy) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in policy.model.parameters()])


def expected_counts(rows: int, seed: int, steps: int) -> torch.Tensor:
    """(rows,) how often each row is trained on in `steps` steps: the sampler's first steps x P rows."""
    counts = torch.zeros(rows, dtype=torch.long)
    sampler = RowSampler(rows, seed)
    for _ in range(steps):
        counts[torch.tensor(sampler.next(P))] += 1
    return counts


def test_worker_in_process_matches_the_collector(seven):
    trainer, policy = trainer_for(seven, [])
    threads = torch.get_num_threads()
    worker = RolloutWorker(trainer.collector, RewardSpec.of(trainer.parts.rewards))
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(3)
    req = RolloutRequest(0, [5, 7, 9, 11], 4, trainable_state(policy.model), seed=0, rng_state=gen.get_state())
    result = worker.run(req)
    batch = trainer.collector.collect([5, 7, 9, 11], gen)
    assert torch.equal(result.batch.input_ids, batch.input_ids) and torch.equal(result.rng_state, gen.get_state())
    assert result.batch.policy_version == 4 and worker.version == 4
    assert torch.equal(
        result.scores.rewards,
        trainer.parts.rewards.score(batch.prompts, batch.completions, batch.reward_fields()).rewards,
    )
    again = [
        worker.run(RolloutRequest(1, [5, 7], 4, None, seed=11)).batch.input_ids for _ in range(2)
    ]  # version loaded: weights not needed
    assert torch.equal(again[0], again[1])  # a request's own seed reproduces its batch


def test_max_staleness_0_reproduces_the_local_run(seven, ray_cluster):
    local, local_policy = trainer_for(seven, ["train.steps=4"])
    remote, remote_policy = trainer_for(
        seven, ["train.steps=4", "runtime=ray", "ray.max_staleness=0", "ray.rollout_workers=1"]
    )
    assert isinstance(remote, AsyncTrainer)
    try:
        for _ in range(4):
            a, b = local.step(), remote.step()
            assert a["reward/mean"] == b["reward/mean"] and b["async/staleness_mean"] == 0.0
    finally:
        remote.close()
    assert not torch.equal(flat(local_policy), flat(trainer_for(seven, [])[1]))  # training moved the parameters
    assert torch.allclose(flat(local_policy), flat(remote_policy), atol=1e-6, rtol=0)


def run_async(seven, steps, kill_after=None):
    """K=2 with 3 workers; optionally kill worker 0 after step `kill_after` (the pool hands every later request
    to its lowest free worker first, so the death is always met). Returns (state, policy, metrics)."""
    trainer, policy = trainer_for(
        seven, ASYNC + [f"train.steps={steps}", "ray.max_staleness=2", "ray.rollout_workers=3"]
    )
    metrics = []
    try:
        for step in range(1, steps + 1):
            metrics.append(trainer.step())
            if step == kill_after:
                ray.kill(trainer.pool.workers[0])
        state = trainer.state_dict()
    finally:
        trainer.close()
    return state, policy, metrics


def test_bounded_staleness_and_a_killed_worker_loses_no_sample(seven, ray_cluster):
    steps = 6
    clean, clean_policy, m = run_async(seven, steps)
    assert [x["async/staleness_mean"] for x in m] == [0, 1, 2, 2, 2, 2]  # request r sampled by version max(0, r - K)
    assert [x["async/request"] for x in m] == list(range(steps))
    assert all(0 < x["async/tis_weight_mean"] <= 2.0 for x in m) and any(
        x["async/tis_weight_mean"] != 1.0 for x in m[2:]
    )
    assert m[-1]["async/dropped_stale"] == 0 and m[-1]["async/samples"] == steps * P * N
    killed, killed_policy, k = run_async(seven, steps, kill_after=2)
    assert killed["async"]["totals"]["workers_replaced"] >= 1 and k[-1]["async/requests_retried"] >= 1
    expected = expected_counts(100, 0, steps)
    for state in (clean, killed):
        assert (
            torch.equal(state["async"]["row_counts"], expected) and state["async"]["totals"]["samples"] == steps * P * N
        )
    assert torch.equal(flat(clean_policy), flat(killed_policy))  # the dead workers' batches were re-run unchanged


def rl_lines(run_dir: Path) -> list[dict]:
    return [
        json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"phase": "rl"' in line
    ]


def test_async_resume_has_the_accounting_of_an_uninterrupted_run_and_survives_a_kill(
    seven, ray_cluster, tmp_path, monkeypatch
):
    cfg = load_config(
        "default",
        TINY
        + seven
        + BASE
        + ASYNC
        + [
            "train.steps=4",
            "ray.max_staleness=1",
            "ray.rollout_workers=2",
            "train.checkpoint_every=0",
            "eval.pass_k=0",
            f"output_dir={tmp_path}",
        ],
    )
    real_step = AsyncTrainer.step

    def step_then_kill(self):  # `ascent train` keeps going when a worker is killed after step 1
        out = real_step(self)
        if self.step_count == 1 and self.cfg.name == "full":
            ray.kill(self.pool.workers[0])
        return out

    monkeypatch.setattr(AsyncTrainer, "step", step_then_kill)
    full = train(cfg.__class__(**{**cfg.__dict__, "name": "full"}))
    assert full is not None and full["steps"] == 4
    split = cfg.__class__(**{**cfg.__dict__, "name": "split"})
    assert train(split, stop_at=2) is None
    half = Checkpointer.load_state(Checkpointer(tmp_path / "split" / "checkpoints").latest())
    assert half["step"] == 2 and [p["id"] for p in half["async"]["pending"]] == [2, 3]  # in flight at the checkpoint
    assert train(run_dir=tmp_path / "split", resume=True)["steps"] == 4
    states = [
        Checkpointer.load_state(Checkpointer(tmp_path / name / "checkpoints").latest()) for name in ("full", "split")
    ]
    assert states[0]["async"]["totals"]["workers_replaced"] >= 1
    for state, name in zip(states, ("full", "split")):
        assert torch.equal(state["async"]["row_counts"], expected_counts(100, 0, 4))
        assert state["async"]["totals"]["samples"] == 4 * P * N and state["async"]["pending"] == []
        lines = rl_lines(tmp_path / name)
        assert [x["step"] for x in lines] == [1, 2, 3, 4] and [x["async/request"] for x in lines] == [0, 1, 2, 3]
        assert lines[-1]["async/samples"] == 4 * P * N


def test_config_and_cluster_checks(seven, ray_cluster):
    with pytest.raises(ConfigError, match="set algorithm.tis_cap"):
        load_config("default", ["runtime=ray", "ray.max_staleness=1"])
    load_config("default", ["runtime=ray", "ray.max_staleness=0"])  # synchronous: nothing stale to correct
    trainer, _ = trainer_for(seven, ASYNC + ["ray.rollout_workers=3", "ray.num_cpus_per_worker=1"])
    with pytest.raises(ValueError, match="needs 3 CPUs, the Ray cluster has 2"):
        trainer.step()
