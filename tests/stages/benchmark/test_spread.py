"""Throughput intervals and the stability rule (suite.runtime.spread) on recorded repetition figures."""

from __future__ import annotations

import pytest

from suite.records.benchmark import LoadPoint, ServerStats
from suite.runtime import spread
from suite.stages.benchmark.stage import combine_repetitions


def rep(tok_s: float, ttft: float = 100.0, tpot: float = 10.0) -> tuple[LoadPoint, ServerStats]:
    return LoadPoint(label="rate=inf", output_tok_s=tok_s, req_s=tok_s / 8, ttft_p99_ms=ttft, tpot_p99_ms=tpot,
                     completed=16), ServerStats()


def test_the_issues_13x_pair_is_unstable_with_a_range_not_a_ci():
    p = combine_repetitions([rep(27.0), rep(361.0)])  # the demo's BF16 baseline on a shared machine (issue 41)
    assert p.stable is False and p.ci_method == "range" and p.output_tok_s_reps == 2
    assert (p.output_tok_s_ci_low, p.output_tok_s_ci_high) == (27.0, 361.0)


def test_three_tight_repetitions_give_a_narrow_t_interval_and_a_stable_point():
    p = combine_repetitions([rep(1000.0, 200, 20), rep(1010.0, 210, 21), rep(990.0, 190, 19)])
    assert p.stable is True and p.ci_method == "t"
    assert 960 < p.output_tok_s_ci_low < 1000 < p.output_tok_s_ci_high < 1040  # +-1% spread, t(2) = 4.30
    assert p.ttft_p99_ms_ci_low < 200 < p.ttft_p99_ms_ci_high and p.tpot_p99_ms_ci_low < 20 < p.tpot_p99_ms_ci_high


def test_three_repetitions_within_1_25x_but_a_wide_interval_are_unstable():
    # max/min 1.2 passes the spread rule; the t interval (+-~25%) does not
    p = combine_repetitions([rep(1000.0), rep(1200.0), rep(1100.0)])
    assert p.stable is False and p.output_tok_s_ci_high > 1.1 * p.output_tok_s


def test_one_repetition_has_no_interval_and_is_not_judged():
    p = combine_repetitions([rep(500.0)])
    assert p.stable is None and p.output_tok_s_ci_low is None and p.ci_method is None


@pytest.mark.parametrize("v, b", [([130, 128, 133], [100, 101, 99]), ([130, 128], [100, 30]),
                                  ([1500, 1300, 1700, 1600], [900, 1000, 1100])])
def test_ratio_interval_brackets_the_ratio_of_medians(v, b):
    import statistics

    low, high, method = spread.ratio_interval(v, b)
    point = statistics.median(v) / statistics.median(b)
    assert low < point < high and method == ("t" if min(len(v), len(b)) >= 3 else "range")


def test_tight_ratio_interval_excludes_one_and_noisy_one_includes_it():
    low, high, _ = spread.ratio_interval([130, 128, 133], [100, 101, 99])
    assert 1.2 < low < high < 1.4
    low, high, _ = spread.ratio_interval([130, 128], [27, 361])
    assert low < 1 < high


def test_t_quantiles():
    assert spread.t975(2) == pytest.approx(4.303) and spread.t975(100) == 1.96
    assert spread.t975(2) > spread.t975(2.5) > spread.t975(3)
