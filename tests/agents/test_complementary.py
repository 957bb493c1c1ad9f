"""Complementary RL's experience extractor (Muhtar et al. 2026): the bank's evidence features, the Plackett-Luce
draw and its log-probability, and the extractor learning, from with-minus-without rewards alone, to write the
statements that help."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ascent.agents.complementary import (
    ExperienceBank,
    ExperienceExtractor,
    ExtractorParams,
    extractor_reward,
    plackett_luce_logprob,
)


def test_bank_features_by_hand():
    bank = ExperienceBank(keep=3)
    bank.add("t", (0, 1), True)
    bank.add("t", (0, 2), False)
    bank.add("t", (1, 2), False)
    by = {(s.step, s.option, s.use): s.features for s in bank.candidates("t")}
    # step 0 option 0: taken by the one success (1/1) and by one of the two failures (1/2)
    assert by[(0, 0, True)] == (1.0, 0.5, 1.0, 0.0, 0.0, 0.0)
    assert by[(0, 0, False)] == (0.0, 0.0, 0.0, 1.0, 0.5, 1.0)
    assert by[(1, 2, True)] == (0.0, 1.0, 1.0, 0.0, 0.0, 0.0)
    assert len(by) == 2 * 4  # (0,0) (0,1) (1,1) (1,2): every (step, option) seen, both polarities
    bank.add("t", (3, 3), True)  # keep=3: the oldest trajectory, (0, 1), leaves
    assert (1, 1) not in {(s.step, s.option) for s in bank.candidates("t")}
    assert bank.candidates("other") == []
    assert [s.text for s in bank.candidates("t")][:2] == ["step 0: use 0", "step 0: avoid 0"]


def test_plackett_luce_logprob_sums_to_one_over_orderings():
    scores = torch.tensor([0.3, -1.0, 2.0, 0.5])
    for k in (1, 2, 3):
        total = sum(math.exp(float(plackett_luce_logprob(scores, p))) for p in itertools.permutations(range(4), k))
        assert total == pytest.approx(1.0, abs=1e-5)
    # first pick 2 then 0: softmax over all, then over the rest
    expected = (2.0 - torch.logsumexp(scores, 0)) + (0.3 - torch.logsumexp(scores[[0, 1, 3]], 0))
    assert float(plackett_luce_logprob(scores, [2, 0])) == pytest.approx(float(expected))


def test_write_samples_distinct_statements_with_the_right_frequencies():
    bank = ExperienceBank()
    bank.add("t", (0, 1, 2), True)
    cands = bank.candidates("t")
    ext = ExperienceExtractor(ExtractorParams(num_statements=2))
    with torch.no_grad():
        ext.weight[0] = 2.0  # favour `use` statements backed by successes
    g = torch.Generator().manual_seed(0)
    firsts, n = [], 4000
    for _ in range(n):
        written, lp = ext.write(cands, g)
        assert len(written) == 2 and written[0] != written[1] and lp.requires_grad
        firsts.append(written[0].use)
    p_use = torch.softmax(ext.scores(cands).detach(), 0)[[s.use for s in cands]].sum()
    assert sum(firsts) / n == pytest.approx(float(p_use), abs=0.03)
    written, lp = ext.write([], g)
    assert written == [] and float(lp) == 0.0


def test_extractor_learns_from_with_minus_without_rewards():
    """A bank of one success and one failure: only `use` statements from the success help the actor (reward 1 -
    0); everything else changes nothing (0 - 0) or hurts (0 - 1 for `avoid` of the right option). The extractor
    learns to write the helpful ones."""
    bank = ExperienceBank()
    right = (2, 0, 3)
    bank.add("t", right, True)
    bank.add("t", (1, 1, 3), False)
    cands = bank.candidates("t")

    def success(written, with_experience: bool) -> float:
        if not with_experience:
            return 0.0
        if any(not s.use and right[s.step] == s.option for s in written):
            return 0.0
        return float(any(s.use and right[s.step] == s.option for s in written))

    ext = ExperienceExtractor(ExtractorParams(num_statements=1, lr=0.2))
    g = torch.Generator().manual_seed(1)

    def helpful_mass() -> float:
        p = torch.softmax(ext.scores(cands).detach(), 0)
        return float(sum(p[i] for i, s in enumerate(cands) if s.use and right[s.step] == s.option))

    before = helpful_mass()
    for _ in range(60):
        lps, rs = [], []
        for _ in range(16):
            written, lp = ext.write(cands, g)
            lps.append(lp)
            rs.append(extractor_reward(success(written, True), success(written, False)))
        ext.update(lps, rs)
    assert before < 0.5 < 0.9 < helpful_mass()
    state = ext.state_dict()
    other = ExperienceExtractor(ExtractorParams(num_statements=1, lr=0.2))
    other.load_state_dict(state)
    assert torch.equal(other.weight, ext.weight)


def test_clear_errors():
    with pytest.raises(ValueError, match="num_statements must be >= 1"):
        ExtractorParams(num_statements=0)
    with pytest.raises(ValueError, match="keep must be >= 1"):
        ExperienceBank(keep=0)


def test_registered_with_provenance():
    from ascent.agents.complementary import EXTRACTORS

    entry = EXTRACTORS.entry("complementary")
    assert entry.provenance.fidelity == "reduced" and entry.provenance.papers[0].ref == "arXiv:2603.17621"


def test_benchmark_runs_on_a_tiny_budget():
    """benchmarks/agent_complementary.py end to end: both arms per seed at equal episodes, then the summary."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    args = ["benchmarks/agent_complementary.py", "--seeds", "2", "--instances", "48", "--tasks", "4"]
    out = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert [r["arm"] for r in lines[:2]] == ["alone", "complementary"] and len(lines) == 5
    assert all(r["episodes"] == 96 for r in lines[:4]), "equal episodes: two per task instance in both arms"
    assert all(0 <= r["success"] <= 1 for r in lines[:4])
    assert lines[0]["success"] == lines[0]["success_no_experience"], "the actor alone deploys without experience"
    assert "success" in lines[-1]["complementary_vs_alone"]
