"""SOAR's tagged streams and per-stream credit (ascent.algorithms.soar): the stream rewards by hand, token labels
of the tagged blocks, the advantage against a hand computation, and the state on a rollout batch."""

from __future__ import annotations

import math
import types

import pytest
import torch

from ascent.algorithms import ADVANTAGES, AdvantageInput
from ascent.algorithms.soar import EXT, INT, LABELS, SoarParams, SoarState, stream_rewards, stream_token_labels
from ascent.config.schema import AlgorithmConfig

CFG = AlgorithmConfig()
SHOWN = ["[doc-1] Velmor Kadran\nVelmor Kadran was born in Lumia. Velmor Kadran works for Silthar Labs."]
VOCAB = ["<external>", "</external>", "<internal>", "</internal>", "Velmor ", "born ", "in ", "Lumia ", "Zorbia ", "x "]


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def test_stream_rewards_by_hand():
    texts = [
        "<external>Velmor was born in Zorbia</external> <internal>I recall Lumia</internal> <answer>Lumia</answer>"
    ]
    r_ext, r_int = stream_rewards(texts, SHOWN)
    # external words: velmor was born in zorbia -> 4 of 5 in the shown text (zorbia fabricated)
    assert r_ext == pytest.approx(4 / 5)
    # internal words: i recall lumia -> lumia was shown: 1 - 1/3
    assert r_int == pytest.approx(2 / 3)
    assert stream_rewards(["<answer>Lumia</answer>"], SHOWN) == (None, None)
    # blocks across turns join; nothing shown: external all fabricated, internal all own
    assert stream_rewards(["<external>Velmor</external>", "<external>Lumia</external><internal>x</internal>"], []) == (
        0.0,
        1.0,
    )


def test_token_labels_cover_the_tagged_blocks():
    ids = [9, 0, 4, 5, 1, 2, 7, 3, 9]  # x <external>Velmor born </external><internal>Lumia </internal>x
    assert stream_token_labels(ids, decode) == [0, 1, 1, 1, 1, 2, 2, 2, 0]
    assert stream_token_labels([9, 4, 7], decode) == [0, 0, 0]
    assert stream_token_labels([0, 4, 9], decode) == [0, 0, 0]  # an unclosed block is no block


def test_soar_advantage_by_hand():
    # one group of three; rewards 1, 0, 0; streams: ext 1.0 / 0.5 / none, int none / 1.0 / 0.0
    rewards = torch.tensor([1.0, 0.0, 0.0])
    mask = torch.ones(3, 4)
    labels = torch.tensor([[0, 1, 1, 0], [1, 2, 0, 0], [2, 2, 0, 0]])
    extras = {EXT: torch.tensor([1.0, 0.5, math.nan]), INT: torch.tensor([math.nan, 1.0, 0.0]), LABELS: labels}
    inp = AdvantageInput(rewards, torch.ones(3, dtype=torch.bool), torch.zeros(3, dtype=torch.long), mask, extras)
    adv = ADVANTAGES.get("soar")(inp, CFG, SoarParams(weight=0.5))
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    a = [(r - 1 / 3) / (std + CFG.std_eps) for r in (1.0, 0.0, 0.0)]
    ze = 0.25 / (math.sqrt(2 * 0.25**2) + CFG.std_eps)  # ext 1.0, 0.5: (v - mean) / unbiased std
    zi = 0.5 / (math.sqrt(2 * 0.5**2) + CFG.std_eps)  # int 1.0, 0.0
    z_ext, z_int = [ze, -ze, 0.0], [0.0, zi, -zi]
    want = [
        [a[0], a[0] + 0.5 * z_ext[0], a[0] + 0.5 * z_ext[0], a[0]],
        [a[1] + 0.5 * z_ext[1], a[1] + 0.5 * z_int[1], a[1], a[1]],
        [a[2] + 0.5 * z_int[2], a[2] + 0.5 * z_int[2], a[2], a[2]],
    ]
    assert adv.tolist() == [pytest.approx(r, rel=1e-6) for r in want]
    assert torch.allclose(ADVANTAGES.get("soar")(inp, CFG, SoarParams(weight=0.0)), ADVANTAGES.get("grpo")(inp, CFG))


def test_soar_state_reads_a_rollout_batch():
    class Tok:
        def decode(self, ids, skip_special_tokens=True):
            return decode(ids)

    state = SoarState(SoarParams(), types.SimpleNamespace(tokenizer=Tok()))
    ids = torch.tensor([[9, 0, 4, 7, 1, 9], [9, 2, 8, 3, 9, 9]])
    completion_mask = torch.tensor([[0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1]], dtype=torch.float32)
    fields = [
        {"agent_turn_texts": [decode([0, 4, 7, 1])], "agent_observation_texts": SHOWN},
        {"agent_turn_texts": [decode([2, 8, 3, 9])], "agent_observation_texts": SHOWN},
    ]
    batch = types.SimpleNamespace(input_ids=ids, completion_mask=completion_mask, fields=fields, completions=["", ""])
    out = state.advantage_extras(batch)
    assert out[EXT][0] == 1.0 and math.isnan(out[EXT][1])  # velmor lumia: both shown
    assert math.isnan(out[INT][0]) and out[INT][1] == 1.0  # zorbia: never shown
    assert out[LABELS].tolist() == [[0, 1, 1, 1, 1, 0], [0, 2, 2, 2, 0, 0]]


def test_soar_needs_its_extras_and_a_valid_weight():
    inp = AdvantageInput(
        torch.ones(2), torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.long), torch.ones(2, 3)
    )
    with pytest.raises(ValueError, match="soar needs"):
        ADVANTAGES.get("soar")(inp, CFG)
    with pytest.raises(ValueError, match="weight"):
        SoarParams(weight=-1.0)
