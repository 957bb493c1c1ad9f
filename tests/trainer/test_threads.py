"""The learner's thread governor (`ascent.trainer.threads`): the waiting share from scheduler statistics, the
decision rule, the probe back-off, and its wiring into the learner (`learner.adaptive_threads`)."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from ascent.trainer.threads import ThreadGovernor, read_schedstat, waiting_share


class Kernel:
    """Scheduler statistics that advance by a chosen waiting share per update (one thread of the process)."""

    def __init__(self) -> None:
        self.run = self.wait = 0
        self.share = 0.0

    def update(self, share: float, ns: int = 1_000_000) -> None:
        self.share = share
        self.wait += int(ns * share)
        self.run += ns - int(ns * share)

    def read(self) -> dict[str, tuple[int, int]]:
        return {"1": (self.run, self.wait)}


def governed(max_threads: int = 2, **kw):
    k, calls = Kernel(), []
    g = ThreadGovernor(max_threads, reader=k.read, set_threads=calls.append, **kw)
    return g, k, calls


def step(g: ThreadGovernor, k: Kernel, share: float) -> dict[str, float]:
    g.before()
    k.update(share)
    return g.after()


def test_waiting_share_over_threads_present_in_both_readings():
    before = {"1": (100, 0), "2": (50, 50), "3": (10, 10)}  # thread 3 ended before the second reading
    after = {"1": (400, 100), "2": (150, 50), "4": (999, 999)}  # thread 4 started after the first
    share, cpu_s = waiting_share(before, after)
    assert share == pytest.approx(100 / (300 + 100 + 100))
    assert cpu_s == pytest.approx(400e-9)
    assert waiting_share(before, before) == (0.0, 0.0)


def test_quiet_machine_keeps_every_thread():
    g, k, calls = governed()
    for _ in range(10):
        m = step(g, k, 0.01)
    assert m == {"learner/threads": 2.0, "learner/wait_share": pytest.approx(0.01)}
    assert set(calls) == {2} and g.threads == 2


def test_a_neighbour_takes_one_thread_off_and_the_maximum_is_restored_after_each_update():
    g, k, calls = governed()
    assert step(g, k, 0.6)["learner/threads"] == 2.0  # the update that saw the neighbour ran with 2
    assert g.threads == 1
    calls.clear()
    assert step(g, k, 0.0)["learner/threads"] == 1.0
    assert calls == [1, 2]  # 1 thread for the update, the maximum again for the rollouts after it


def test_probe_backs_off_while_the_neighbour_stays_and_returns_when_it_leaves():
    g, k, _ = governed(probe_after=2, max_probe_after=8)
    step(g, k, 0.6)  # neighbour arrives: down to 1
    used = []
    for _ in range(20):
        g.before()
        used.append(g.used)
        k.update(0.6 if g.used == 2 else 0.0)  # two threads wait while the neighbour is there; one does not
        g.after()
    # probes (2 threads) after 2 one-thread updates, then 4, then 8, then every 8 (the cap)
    assert [i for i, n in enumerate(used) if n == 2] == [2, 7, 16]
    assert g.interval == 8
    for _ in range(9):  # the neighbour leaves: the next probe does not wait, and the maximum stays
        step(g, k, 0.0)
    assert g.threads == 2 and g.interval == 2
    assert step(g, k, 0.0)["learner/threads"] == 2.0


def test_more_cores_step_down_one_at_a_time():
    g, k, _ = governed(max_threads=4)
    for expected in (3, 2, 1, 1):
        step(g, k, 0.5)
        assert g.threads == expected


def test_inactive_without_statistics_or_with_one_thread():
    calls = []
    g = ThreadGovernor(2, reader=lambda: None, set_threads=calls.append)
    g.before()
    assert g.after() == {} and calls == [] and not g.active
    assert not ThreadGovernor(1, reader=Kernel().read, set_threads=calls.append).active
    with pytest.raises(ValueError, match="max_threads must be >= 1"):
        ThreadGovernor(0)


@pytest.mark.skipif(read_schedstat() is None, reason="no per-thread scheduler statistics on this kernel")
def test_the_kernel_statistics_see_threads_waiting_for_a_core():
    """Real readings: three busy threads pinned to one core each wait for it about 2/3 of their runnable time (more
    on a loaded machine); with run and wait read the wrong way round the share would be about 1/3."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity")
    cpu = sorted(os.sched_getaffinity(0))[0]
    stop = threading.Event()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)

    def spin() -> None:
        os.sched_setaffinity(0, {cpu})  # this thread only
        a = torch.randn(128, 128)
        while not stop.is_set():
            a @ a  # releases the GIL: the three threads really compete for the core

    threads = [threading.Thread(target=spin) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        tids = {str(t.native_id) for t in threads}
        time.sleep(0.05)
        start = {k: v for k, v in (read_schedstat() or {}).items() if k in tids}
        time.sleep(0.5)
        end = {k: v for k, v in (read_schedstat() or {}).items() if k in tids}
    finally:
        stop.set()
        for t in threads:
            t.join()
        torch.set_num_threads(threads_before)
    assert set(start) == tids == set(end)
    share, cpu_s = waiting_share(start, end)
    assert share > 0.5
    assert 0.0 < cpu_s < 0.6


def test_learner_wiring_logs_threads_and_restores_them(tokenizer):
    from dataclasses import replace

    from ascent.config import load_config
    from ascent.policy.model import Policy
    from ascent.trainer.learner import Learner
    from tests.conftest import tiny_qwen
    from tests.trainer.test_data_parallel import config, rollout

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        model = tiny_qwen(tokenizer, seed=3, hidden=32, layers=2).train()
        policy = Policy(model, tokenizer)
        cfg = config(1)
        on = replace(cfg, learner=replace(cfg.learner, adaptive_threads=True))
        learner = Learner(policy, on)
        assert learner.governor is not None and learner.governor.max_threads == 2
        batch, adv = rollout(tokenizer, model, 0)
        valid = torch.ones(len(batch), dtype=torch.bool)
        m = learner.update(batch, adv, valid)
        assert m["learner/threads"] in (1.0, 2.0) and 0.0 <= m["learner/wait_share"] <= 1.0
        assert torch.get_num_threads() == 2  # the maximum is back for whatever runs next
        off = Learner(policy, cfg)
        assert off.governor is None and "learner/threads" not in off.update(batch, adv, valid)
        assert load_config("default", ["learner.adaptive_threads=true"]).learner.adaptive_threads
    finally:
        torch.set_num_threads(threads)
