"""`gui_point` (SE-GUI dense point reward, GUI-G² Gaussian point reward, the binary baseline): values by hand,
near misses above far misses, point parsing and bad rows."""

from __future__ import annotations

import math

import pytest

from ascent.rewards.gui_point import click_point, se_gui_reward
from ascent.rewards.runner import resolve_reward

BOX = [40, 40, 60, 60]  # centre (50, 50) of a 100 x 100 screenshot


def score(spec: str, completions: list[str], bbox=BOX, w=100, h=100) -> list:
    n = len(completions)
    return resolve_reward(spec)(["click"] * n, completions, bbox=[bbox] * n, width=[w] * n, height=[h] * n)


def test_se_gui_values_by_hand():
    d_max = math.sqrt(0.5)  # from the centre (0.5, 0.5) to a corner
    got = score("gui_point", ["(50, 50)", "(55, 50)", "(70, 50)", "[0, 0]"])
    assert got == pytest.approx([2.0, 1 + 1 - (0.05 / d_max) ** 2, 1 - (0.2 / d_max) ** 2, 0.0])
    # an off-centre box: d_max is the far corner (1, 1); a click there is 1.27 away (> 1): no decay term
    assert se_gui_reward((80, 10), [0, 0, 20, 20], 100, 100) == pytest.approx(1 - (0.7 / (0.9 * math.sqrt(2))) ** 2)
    assert se_gui_reward((100, 100), [0, 0, 20, 20], 100, 100) == 0.0
    assert se_gui_reward((-500, -500), BOX, 100, 100) == 0.0  # off the screen: clipped at 0, never negative


def test_gaussian_and_binary_values_by_hand():
    assert score("gui_point(method=gaussian)", ["(50, 50)", "(60, 50)", "(60, 60)"]) == pytest.approx(
        [1.0, math.exp(-0.5), math.exp(-1.0)]  # sigma = 0.5 * 20 = 10 pixels
    )
    assert score("gui_point(method=gaussian, alpha=1)", ["(60, 50)"]) == pytest.approx([math.exp(-0.125)])
    assert score("gui_point(method=binary)", ["(60, 50)", "(61, 50)", "(90, 90)"]) == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("method", ["se_gui", "gaussian"])
def test_dense_rewards_rank_a_near_miss_above_a_far_miss(method):
    near, far = score(f"gui_point(method={method})", ["(62, 50)", "(95, 95)"])
    assert near > far and score("gui_point(method=binary)", ["(62, 50)", "(95, 95)"]) == [0.0, 0.0]


def test_point_parsing_and_bad_rows():
    assert click_point('<answer>{"coordinate": [12, 34]}</answer>') == (12.0, 34.0)
    assert click_point("(1, 2) then (3.5, 4)") == (3.5, 4.0)
    reward = resolve_reward("gui_point")
    out = reward(["c"] * 2, ["no idea", "(50, 50)"], bbox=[BOX, None], width=[100, 100], height=[100, 100])
    assert out == [0.0, None]
    assert reward.metrics() == {"gui_point/no_bbox_frac": 0.5, "gui_point/no_point_frac": 0.5}
    with pytest.raises(ValueError, match=r"bbox must be \[x1, y1, x2, y2\]"):
        reward(["c"], ["(1, 1)"], bbox=[[60, 40, 40, 60]], width=[100], height=[100])
    with pytest.raises(ValueError, match="width must be a positive number"):
        reward(["c"], ["(1, 1)"], bbox=[BOX], width=[0], height=[100])
    with pytest.raises(ValueError, match="method must be one of"):
        resolve_reward("gui_point(method=iou)")
