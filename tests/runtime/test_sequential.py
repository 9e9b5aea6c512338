"""The sequential design's bounds, its decisions on one task, and its error rates and power by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from suite.runtime import sequential as seq

PATHS = 10_000
# (items, flip rate: share of items whose score differs between the two models, margin): a GSM8K, an MMLU and a
# HumanEval-sized task at the flip rates and margins the project's gates use
SHAPES = [(1319, 0.10, 0.02), (14042, 0.04, 0.01), (164, 0.12, 0.05)]


def simulate(n_items: int, flips: float, delta: float, margin: float, looks: int, seed: int):
    """PATHS paired 0/1 datasets of ``n_items`` items in random order with true delta ``delta``, judged by the
    module's own ``decide_paths``: each look's new items are a multinomial draw of (+1, -1, 0) differences."""
    p_up, p_down = (flips + delta) / 2, (flips - delta) / 2
    assert p_up >= 0 and p_down >= 0
    rng = np.random.default_rng(seed)
    sizes = seq.look_sizes(n_items, looks)
    segs = np.diff([0, *sizes])
    draws = np.stack([rng.multinomial(s, [p_up, p_down, 1 - p_up - p_down], size=PATHS) for s in segs], axis=1)
    up, down = np.cumsum(draws[:, :, 0], axis=1), np.cumsum(draws[:, :, 1], axis=1)
    _, _, decision, look = seq.decide_paths(up - down, up + down, sizes, n_items, margin)
    used = np.asarray(sizes)[look]
    return decision, used


def brownian_power(theta: float, fractions, paths: int = 200_000, seed: int = 1) -> float:
    """P(pass) of the design for a Brownian motion with drift ``theta`` (the z statistic's mean at the last look):
    the ideal the item-level simulation should come near (known variance, no discreteness)."""
    t = np.asarray(fractions)
    c = seq.design_bounds(t)
    rng = np.random.default_rng(seed)
    b = np.cumsum(rng.standard_normal((paths, len(t))) * np.sqrt(np.diff(np.concatenate([[0], t]))), axis=1)
    z = (b + theta * t) / np.sqrt(t)
    hit = (z >= c) | (z <= -c)
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), len(t) - 1)
    return float(np.mean(z[np.arange(paths), first] >= c[first]))


def test_the_bounds_are_lan_demets_obrien_fleming():
    # the published one-sided alpha = 0.025 bounds for 4 equally spaced looks (Jennison & Turnbull, table 7.6 style)
    assert seq.boundaries([0.25, 0.5, 0.75, 1.0]) == pytest.approx([4.333, 2.963, 2.359, 2.014], abs=2e-3)
    assert seq.boundaries([1.0]) == pytest.approx([stats.norm.isf(0.025)], abs=1e-6)  # one look: the fixed test
    total = sum(np.diff(np.concatenate([[0], seq.spent([0.25, 0.5, 0.75, 1.0])])))
    assert total == pytest.approx(0.025)
    # the suite's design: the interim bounds, then the fixed-size test on every item
    assert seq.design_bounds([0.25, 0.5, 0.75, 1.0]) == pytest.approx([4.333, 2.963, 2.359, 1.960], abs=2e-3)


@pytest.mark.parametrize("bad", [[], [0.5, 0.5], [0.0, 1.0], [0.5, 1.5], [0.2] * 21])
def test_bad_fractions_are_refused(bad):
    with pytest.raises(ValueError):
        seq.boundaries(bad)


@pytest.mark.parametrize("n_items, flips, margin", SHAPES)
def test_false_pass_at_the_margin_is_at_most_alpha_and_power_at_no_drop_is_near_the_ideal(n_items, flips, margin):
    looks = 4
    decision, used = simulate(n_items, flips, -margin, margin, looks, seed=n_items)
    false_pass, fail_rate = float(np.mean(decision == 1)), float(np.mean(decision == -1))
    assert false_pass <= seq.ALPHA + 0.01, f"false-pass rate {false_pass:.4f} at the margin"
    assert fail_rate <= seq.ALPHA + 0.01 or fail_rate > 0.5  # at the margin neither side is a clear answer
    decision0, used0 = simulate(n_items, flips, 0.0, margin, looks, seed=n_items + 1)
    power = float(np.mean(decision0 == 1))
    theta = margin * math.sqrt(n_items / flips)
    ideal = brownian_power(theta, np.array(seq.look_sizes(n_items, looks)) / n_items)
    fixed = float(stats.norm.cdf(theta - stats.norm.isf(seq.ALPHA)))
    print(f"\n{n_items} items, flips {flips}, margin {margin}: false pass {false_pass:.4f}, power at 0 {power:.4f} "
          f"(ideal {ideal:.4f}, fixed-size {fixed:.4f}), items used at 0: {used0.mean() / n_items:.1%}")
    assert power >= ideal - 0.03, f"power {power:.4f} against the design's {ideal:.4f}"
    assert ideal >= fixed - 0.03  # O'Brien-Fleming spending costs little power against the fixed-size test


def test_a_clear_pass_stops_early_and_a_clear_fail_too():
    rng = np.random.default_rng(0)
    same = rng.choice([-1.0, 0.0, 1.0], size=14042, p=[0.02, 0.96, 0.02])
    r = seq.run(same, margin=0.01, looks=4)
    assert r.decision == seq.PASS and r.items_used < 14042 and r.items_saved == 14042 - r.items_used
    worse = rng.choice([-1.0, 0.0, 1.0], size=1319, p=[0.15, 0.83, 0.02])
    r = seq.run(worse, margin=0.02, looks=4)
    assert r.decision == seq.FAIL and r.items_used <= 660
    assert [lk.decision for lk in r.looks][-1] == seq.FAIL and all(lk.decision == seq.CONTINUE for lk in r.looks[:-1])


def test_undecided_at_the_last_look_is_inconclusive_and_short_data_continue():
    d = np.array([-1.0, 1.0] * 100 + [0.0] * 100)[np.random.default_rng(1).permutation(300)]
    full = seq.run(d, margin=0.0, looks=3)
    assert full.decision == seq.INCONCLUSIVE and full.items_used == 300 and len(full.looks) == 3
    part = seq.run(d[:150], margin=0.0, looks=3, n_items=300)
    assert part.decision == seq.CONTINUE and part.items_used == 100


def test_no_stop_before_the_minimum_items_even_when_every_item_agrees():
    r = seq.run(np.zeros(40), margin=0.05, looks=4)  # looks at 10, 20, 30, 40 items
    assert r.looks[0].decision == seq.CONTINUE and r.looks[1].decision == seq.CONTINUE
    assert math.isfinite(r.looks[0].z)  # the pseudo pairs keep the variance above zero


def test_the_order_is_seeded_and_independent_of_the_keys_order():
    keys = [("b", 1), ("a", 2), ("a", 1)]
    assert seq.item_order(keys, 3) == seq.item_order(list(reversed(keys)), 3)
    assert sorted(seq.item_order(keys, 3)) == sorted(keys)


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        seq.run([0.0, math.nan], margin=0.01, looks=2)
    with pytest.raises(ValueError):
        seq.run([0.0] * 5, margin=0.01, looks=2, n_items=4)
    with pytest.raises(ValueError):
        seq.look_sizes(10, 0)


def test_the_looks_cover_the_items_once_in_the_seeded_order():
    keys = [("suite_mmlu_a", i) for i in range(7)] + [("suite_mmlu_b", i) for i in range(6)]
    parts = seq.look_items(keys, seed=5, looks=4)
    assert [len(p) for p in parts] == [4, 3, 3, 3]  # look_sizes(13, 4) = 4, 7, 10, 13
    assert [k for p in parts for k in p] == seq.item_order(keys, 5)


def test_a_stopped_evaluation_must_have_scored_a_prefix_of_the_order():
    keys = [("t", i) for i in range(100)]
    order = seq.item_order(keys, 2)
    assert seq.stopped_look(order[:50], keys, 2, 4) == 1
    assert seq.stopped_look(reversed(order), keys, 2, 4) == 3
    with pytest.raises(ValueError, match="not scored"):
        seq.stopped_look(order[1:51], keys, 2, 4)  # 50 items, but not the first 50: picked, not stopped
    with pytest.raises(ValueError, match="no look"):
        seq.stopped_look(order[:40], keys, 2, 4)
    with pytest.raises(ValueError, match="not among"):
        seq.stopped_look([("u", 0)], keys, 2, 4)
