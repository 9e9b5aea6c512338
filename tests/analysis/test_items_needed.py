"""The gate's "to decide" hint: a straddled threshold always asks for more items than were scored, on the side of
the interval that faces the threshold (score and log-ratio intervals are not symmetric)."""

import pytest

from suite.analysis.gates.base import items_needed


def more(text: str) -> int:
    return int(text.split("(")[1].split(" more")[0].replace(",", ""))


@pytest.mark.parametrize("low,high,point,threshold", [
    (-0.020, 0.001, -0.015, 0.0),  # the short half faces the threshold: half-width alone said "0 more"
    (-0.05, 0.01, -0.01, -0.02),
    (-0.03, 0.03, 0.0, 0.029),  # the threshold at the interval's edge
])
def test_a_straddled_threshold_asks_for_more_items_than_scored(low, high, point, threshold):
    assert more(items_needed(100, low, high, point, threshold)) >= 1


def test_the_estimate_on_the_threshold_cannot_be_decided_by_items():
    assert "no number of items" in items_needed(100, -0.01, 0.01, 0.0, 0.0)


def test_the_count_follows_the_inverse_square_law():
    # reach 0.02 towards a threshold 0.01 away: four times the items
    assert items_needed(250, -0.03, 0.01, -0.01, 0.0).startswith("about 1,000 items")
