"""`temporal_iou` (AudioMap's event-conditioned temporal reward): tIoU by hand, caption parsing, the event
condition, the one-to-one matching, both normalisations and bad rows."""

from __future__ import annotations

import json

import pytest

from ascent.rewards.runner import resolve_reward
from ascent.rewards.temporal import segments, tiou

EVENTS = [{"label": "dog barking", "start": 0, "end": 4}, {"label": "car passing", "start": 5, "end": 7}]


def test_tiou_by_hand():
    assert tiou((0, 4), (2, 6)) == pytest.approx(2 / 6)
    assert tiou((0, 4), (0, 4)) == 1.0 and tiou((0, 1), (1, 2)) == 0.0
    assert tiou((0, 10), (2, 3)) == pytest.approx(0.1)
    assert tiou((1, 1), (1, 1)) == 1.0 and tiou((1, 1), (2, 2)) == 0.0


def test_caption_parsing_handles_brackets_units_and_clauses():
    segs, inverted = segments("A dog barking [0-4s].\nThen a car passing from 5.0 to 7 s; rain 3 – 2")
    assert segs == [("A dog barking", 0.0, 4.0), ("Then a car passing from", 5.0, 7.0)] and inverted == 1


def test_event_conditioned_iou_by_hand():
    reward = resolve_reward("temporal_iou")
    out = reward(
        ["caption"] * 4,
        [
            "dog barking 2-6; car passing 5-7",  # (1/3 + 1) / 2
            "cat meowing 0-4; car passing 5-7",  # the right span with the wrong sound earns nothing: (0 + 1) / 2
            "dog barking 0-4; car passing 5-7; bird singing 8-9",  # an invented event costs: 2 / 3
            "car passing 0-4; dog barking 5-7",  # spans swapped between the events: both zero
        ],
        events=[EVENTS] * 4,
    )
    assert out == pytest.approx([2 / 3, 0.5, 2 / 3, 0.0])
    lenient = resolve_reward("temporal_iou(normalize=reference)")
    assert lenient(["c"], ["dog barking 0-4; car passing 5-7; bird singing 8-9"], events=[EVENTS]) == [1.0]
    any_text = resolve_reward("temporal_iou(match_f1=0)")
    assert any_text(["c"], ["cat meowing 0-4; car passing 5-7"], events=[EVENTS]) == [1.0]


def test_matching_is_one_to_one_and_takes_the_best_pairing():
    reward = resolve_reward("temporal_iou")
    # two "dog barking" segments for one dog event: only one may count, the better one (1.0); the other is invented
    assert reward(["c"], ["dog barking 0-4; dog barking 1-3"], events=[EVENTS[:1]]) == [0.5]
    # a greedy first match would take (0-4, 0-4) and leave the second dog its poor span; Hungarian maximises the sum
    two_dogs = [{"label": "dog", "start": 0, "end": 4}, {"label": "dog", "start": 0, "end": 2}]
    got = reward(["c"], ["dog 0-2; dog 0-4"], events=[two_dogs])[0]
    assert got == pytest.approx(1.0)


def test_no_timestamps_missing_events_and_bad_rows():
    reward = resolve_reward("temporal_iou")
    out = reward(["c"] * 3, ["a dog barks", "dog barking 9-8", "x"], events=[EVENTS, json.dumps(EVENTS), None])
    assert out == [0.0, 0.0, None]
    assert reward.metrics() == {
        "temporal_iou/inverted_span_frac": pytest.approx(1 / 3),
        "temporal_iou/no_events_frac": pytest.approx(1 / 3),
        "temporal_iou/no_timestamps_frac": pytest.approx(2 / 3),
    }
    assert reward(["c"], ["nothing happens"], events=[[]]) == [1.0]  # silence described as silence
    with pytest.raises(ValueError, match="event 0 needs a string label and numbers start <= end"):
        reward(["c"], ["dog 0-1"], events=[[{"label": "dog", "start": 3, "end": 1}]])
    with pytest.raises(ValueError, match="not valid JSON"):
        reward(["c"], ["dog 0-1"], events=["[{"])
    with pytest.raises(ValueError, match="normalize must be one of"):
        resolve_reward("temporal_iou(normalize=min)")


def test_in_the_runner_a_malformed_row_skips_only_its_own_sample():
    from ascent.rewards.runner import RewardRunner

    runner = RewardRunner(["temporal_iou"])
    bad = [{"label": "dog", "start": 3, "end": 1}]
    result = runner.score(
        ["c"] * 3, ["dog barking 0-4; car passing 5-7", "dog 0-1", "x"], [{"events": EVENTS}, {"events": bad}, {}]
    )
    assert result.valid.tolist() == [True, False, False]  # a failure, then no opinion
    assert float(result.rewards[0]) == pytest.approx(1.0) and result.stats["reward/failed_frac"] == pytest.approx(1 / 3)
    assert any("start <= end" in line for line in runner.failure_log)
