"""The llm4cov sampler: execution-validated curation of code rows, worst-state-first draws, exact resume, and the
error when no row survives curation."""

from __future__ import annotations

import pytest
import torch

import ascent.tasks  # noqa: F401  (registers the llm4cov sampler)
from ascent.data.sampler import RowSampler
from ascent.data.samplers import SAMPLERS, SamplerContext
from ascent.rewards.sandbox import bwrap_status
from ascent.tasks.code_functions import code_function_rows
from ascent.typed import ConfigError

SANDBOX = "bwrap" if bwrap_status()[0] else "unsafe-local"  # the rows' references are the task's own code


def sampler(rows, spec: str = "", seed: int = 0):
    inner = f"sandbox={SANDBOX}" + (f",{spec}" if spec else "")
    return SAMPLERS.resolve(f"llm4cov({inner})")(SamplerContext(rows, seed=seed, samples_per_prompt=4))


def test_curation_drops_rows_whose_reference_fails_its_tests():
    rows = code_function_rows(6, 0)
    rows[1] = {**rows[1], "solution": rows[1]["solution"].replace("return", "return 1 + ", 1)}  # wrong answers
    rows[3] = {**rows[3], "solution": "def nothing(:\n"}  # does not parse
    rows[4] = {k: v for k, v in rows[4].items() if k != "tests"}  # nothing to execute
    s = sampler(rows, "priority=0.0")
    assert s.valid == [True, False, True, False, False, True]
    drawn = [i for _ in range(4) for i in s.next(3).indices]
    assert set(drawn) == {0, 2, 5}  # never a curated-out row, each validated row once per draw of 3
    assert s.metrics()["sampler/curated_out"] == 3.0
    with pytest.raises(ConfigError, match=r"data.sampler=llm4cov: no training row passed execution validation \(2"):
        sampler([rows[1], rows[3]])


def test_draws_put_the_worst_observed_states_first_and_skip_solved_rows():
    rows = [{"prompt": str(i)} for i in range(8)]
    s = sampler(rows, "validate=false,priority=0.5")
    # observed groups: row -> rewards; row 6 solved everywhere (no candidate), row 7 never valid
    groups = {2: [1.0, 0.5], 4: [0.0, 1.0, 0.75], 5: [0.25, 0.25], 6: [1.0, 1.0], 7: [0.0]}
    rr = [r for r, xs in groups.items() for _ in xs]
    xs = [x for xs in groups.values() for x in xs]
    valid = [r != 7 for r in rr]
    s.observe(torch.tensor(rr), torch.tensor(xs), torch.tensor(valid))
    assert s.worst[:7] == [None, None, 0.5, None, 0.0, 0.25, None]
    d = s.next(4).indices
    assert d[:2] == [4, 5]  # priority 0.5 of 4: the two worst states, worst first
    ref = [i for i in RowSampler(8, 0).next(8) if i not in (4, 5)]
    assert d[2:] == ref[:2]  # the rest in the seeded epoch order
    assert s.metrics()["sampler/prioritised"] == 2.0 and s.metrics()["sampler/mean_worst"] == pytest.approx(0.125)
    # a row whose new group reached full coverage leaves the prioritised rows
    s.observe(torch.tensor([4, 4]), torch.tensor([1.0, 1.0]), torch.tensor([True, True]))
    assert s.worst[4] is None
    everything = sampler(rows, "validate=false,priority=1.0")
    everything.observe(torch.tensor(rr), torch.tensor(xs), torch.tensor(valid))
    assert everything.next(5).indices[:3] == [4, 5, 2]  # only three rows have candidates; the rest by the order


def test_llm4cov_resumes_exactly():
    rows = [{"prompt": str(i)} for i in range(12)]
    a = sampler(rows, "validate=false", seed=4)
    a.observe(torch.tensor([1, 1, 3, 3]), torch.tensor([0.0, 1.0, 0.5, 0.5]), torch.tensor([True] * 4))
    a.next(5)
    b = sampler(rows, "validate=false", seed=4)
    b.load_state_dict(a.state_dict())
    assert [b.next(5).indices for _ in range(3)] == [a.next(5).indices for _ in range(3)]


def test_without_bubblewrap_validation_says_what_to_set(monkeypatch):
    import ascent.rewards.sandbox as sandbox

    monkeypatch.setattr(sandbox, "bwrap_status", lambda: (False, "bubblewrap is not installed"))
    with pytest.raises(ConfigError, match=r"llm4cov: cannot validate rows: .*not installed; install bubblewrap"):
        SAMPLERS.resolve("llm4cov")(SamplerContext(code_function_rows(2, 0), seed=0, samples_per_prompt=4))
