"""Partial rollouts (ray.partial_rollout_tokens): segments continue the exact ids and keep each token's own
sampling-time log-prob and version; under Ray the schedule fixes which version samples which token (so a
killed worker changes nothing), the accounting is exact, and a resume re-samples the batches in flight.

Ray is started here (2 CPUs, no dashboard) once for the module and stopped after it."""

from __future__ import annotations

import pytest
import ray
import torch

from ascent.config import ConfigError, load_config
from ascent.policy.model import token_logprobs
from ascent.runtime.partial import sample_segment, start, to_batch
from ascent.runtime.worker import trainable_state
from tests.runtime.test_async_runtime import ASYNC, N, P, expected_counts, flat, trainer_for

LONG = ["rollout.max_new_tokens=6"]
PARTIAL = ASYNC + ["ray.max_staleness=2", "ray.partial_rollout_tokens=2", "rollout.max_new_tokens=4"]


def test_segments_continue_the_exact_ids_and_keep_each_tokens_logprob(seven):
    trainer, policy = trainer_for(seven, LONG)
    c, rows = trainer.collector, [3, 14, 15, 92]
    whole = c.collect(rows, torch.Generator().manual_seed(5))
    one, versions = to_batch(c, sample_segment(c, start(c, rows), torch.Generator().manual_seed(5), 0, None))
    assert torch.equal(one.input_ids, whole.input_ids) and torch.equal(
        one.sampled_logprobs, whole.sampled_logprobs
    )  # uncapped: a one-piece rollout
    assert set(versions[versions >= 0].tolist()) == {0}

    first = sample_segment(c, start(c, rows), torch.Generator().manual_seed(5), 0, 2)
    assert first.segments == 1 and all(len(t) == 2 or f for t, f in zip(first.tokens, first.finished))
    assert first.open(6), "some sequence must be carried over for this test to mean anything"
    for i, t in enumerate(first.tokens):  # the first segment draws what the one-piece rollout drew first
        start_col = len(first.prompt_ids[i // c.n])
        assert whole.input_ids[i, start_col : start_col + len(t)].tolist() == t
    weights = {0: trainable_state(policy.model)}
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    weights[1] = trainable_state(policy.model)
    done = sample_segment(c, first, torch.Generator().manual_seed(6), 1, None)
    assert done.segments == 2 and not done.open(6) and first.segments == 1  # the input carry is left unchanged
    for before, after in zip(first.tokens, done.tokens):
        assert after[: len(before)] == before  # continued from the exact ids
    batch, versions = to_batch(c, done)
    assert batch.policy_version == 0 and set(versions[versions >= 0].tolist()) == {0, 1}
    assert torch.equal(versions >= 0, batch.completion_mask.bool())
    for v, w in weights.items():  # every token's log-prob is that of the version that sampled it: exact TIS
        policy.model.load_state_dict(w, strict=False)
        with torch.no_grad():
            lp = token_logprobs(policy.model, batch.input_ids, batch.attention_mask, trainer.cfg.rollout.temperature)
        mine = versions == v
        assert mine.any() and torch.allclose(lp[mine], batch.sampled_logprobs[mine], atol=1e-4)
    assert not torch.allclose(
        lp[versions == 0], batch.sampled_logprobs[versions == 0], atol=1e-4
    )  # the versions differ


def run_partial(seven, steps, kill_after=None, resume_from=None, workers=2):
    """K=2, 2 tokens per segment of 4: returns (trainer state, (trainer state, model state) at step 2,
    policy, metrics). `resume_from`: (trainer state, model state) to continue from; `kill_after`: kill
    worker 0 after that step."""
    trainer, policy = trainer_for(seven, PARTIAL + [f"train.steps={steps}", f"ray.rollout_workers={workers}"])
    if resume_from is not None:
        policy.model.load_state_dict(resume_from[1])
        trainer.load_state_dict(resume_from[0])
    metrics, snapshot = [], None
    try:
        while trainer.step_count < steps:
            metrics.append(trainer.step())
            if trainer.step_count == kill_after:
                ray.kill(trainer.pool.workers[0])
            if trainer.step_count == 2 and snapshot is None:
                snapshot = (trainer.state_dict(), {k: v.clone() for k, v in policy.model.state_dict().items()})
        state = trainer.state_dict()
    finally:
        trainer.close()
    return state, snapshot, policy, metrics


def test_partial_schedule_is_reproducible_exactly_counted_and_resumable(seven, ray_cluster):
    steps = 5
    clean, half, policy, m = run_partial(seven, steps)
    assert [x["async/staleness_mean"] for x in m] == [0, 1, 2, 2, 2]  # the oldest token: version max(0, s - K)
    vps = [x["async/versions_per_sample_mean"] for x in m]
    assert vps[:2] == [1.0, 1.0]  # requests 0 and 1 are consumed within a step of version 0: one segment
    assert all(1.0 < v <= 2.0 for v in vps[2:]), vps  # then segments under versions s-2 and s-1
    assert all(x["async/token_staleness_mean"] < x["async/staleness_mean"] for x in m[2:])  # later tokens are fresher
    assert all(0 < x["async/tis_weight_mean"] <= 2.0 for x in m)
    assert m[-1]["async/samples"] == steps * P * N and torch.equal(
        clean["async"]["row_counts"], expected_counts(100, 0, steps)
    )

    killed, _, killed_policy, k = run_partial(seven, steps, kill_after=2)
    assert k[-1]["async/workers_replaced"] >= 1 and k[-1]["async/requests_retried"] >= 1
    assert [x["async/versions_per_sample_mean"] for x in k] == vps
    assert torch.equal(flat(policy), flat(killed_policy))  # a segment lost with its worker is re-run unchanged
    assert (
        torch.equal(killed["async"]["row_counts"], clean["async"]["row_counts"])
        and killed["async"]["totals"]["samples"] == steps * P * N
    )

    assert [p["id"] for p in half[0]["async"]["pending"]] == [
        2,
        3,
        4,
    ]  # in flight at step 2, partly sampled: re-sampled
    resumed, _, resumed_policy, r = run_partial(
        seven, steps, resume_from=half, workers=1
    )  # the worker count changes nothing either
    assert [x["async/request"] for x in r] == [2, 3, 4] and [x["async/staleness_mean"] for x in r] == [0, 1, 2]
    assert r[-1]["async/samples"] == steps * P * N and torch.equal(
        resumed["async"]["row_counts"], expected_counts(100, 0, steps)
    )
    assert not torch.equal(flat(resumed_policy), flat(policy))  # the re-sampled batches were drawn with newer weights


def test_partial_rollouts_need_two_versions_of_staleness():
    with pytest.raises(ConfigError, match="ray.max_staleness >= 2"):
        load_config(
            "default", ["runtime=ray", "algorithm.tis_cap=2.0", "ray.max_staleness=1", "ray.partial_rollout_tokens=8"]
        )
    with pytest.raises(ConfigError, match="must be >= 0"):
        load_config("default", ["ray.reward_workers=-1"])
    load_config(
        "default", ["runtime=ray", "algorithm.tis_cap=2.0", "ray.max_staleness=2", "ray.partial_rollout_tokens=8"]
    )
