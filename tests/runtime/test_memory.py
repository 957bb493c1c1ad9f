"""Allocator tuning (`malloc` in the run config, `ascent.runtime.memory`): large freed blocks are reused
instead of faulting in fresh pages every step."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascent.config import load_config
from ascent.config.loader import ConfigError
from ascent.runtime.memory import glibc, tune_malloc

STEPS = 6
SIZES_MIB = (3, 9, 24, 9, 5, 30, 2, 12)  # a step's tensors, three alive at a time, as in a forward/backward
TOUCHED_PAGES = STEPS * sum(SIZES_MIB) * 256  # 4 KiB pages written after the warm-up step

PROBE = f"""
import resource, sys, torch
from ascent.runtime.memory import tune_malloc
print(tune_malloc(sys.argv[1]))
def step():
    held = []
    for mb in {SIZES_MIB}:
        held.append(torch.empty(mb << 18).fill_(1.0))
        if len(held) > 3:
            held.pop(0)
step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({STEPS}):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(glibc() is None, reason="allocator tuning applies to Linux with glibc")
def test_tuned_allocator_reuses_pages():
    applied, tuned = faults("tuned")
    assert applied
    not_applied, system = faults("system")
    assert not not_applied
    assert tuned < 0.05 * TOUCHED_PAGES, (tuned, TOUCHED_PAGES)  # the pages of freed tensors are reused
    assert tuned < system, (tuned, system)


def test_modes_and_config():
    assert tune_malloc("system") is False
    with pytest.raises(ValueError, match="malloc must be one of"):
        tune_malloc("jemalloc")
    assert load_config("default").malloc == "tuned"
    assert load_config("default", ["malloc=system"]).malloc == "system"
    with pytest.raises(ConfigError, match="malloc"):
        load_config("default", ["malloc=jemalloc"])
