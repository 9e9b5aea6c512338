"""Paired statistics on constructed per-item results with known answers."""

from __future__ import annotations

import json

import pytest

from suite.paired import compare, item_scores, mcnemar_exact_p


def test_mcnemar_exact():
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(1, 2) == 1.0                      # 2 * (1 + 3) / 8, capped
    assert mcnemar_exact_p(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar_exact_p(3, 12) == pytest.approx(0.03515625)  # 2 * sum_{i<=3} C(15,i) / 2^15


def test_flips_delta_and_ci():
    base = {("t", i): v for i, v in enumerate([1, 1, 0, 0, 1] * 40)}
    var = {("t", i): v for i, v in enumerate([1, 0, 1, 0, 0] * 40)}
    r = compare("t", "acc,none", base, var)
    assert (r.n, r.gained, r.lost) == (200, 40, 80)
    assert r.delta == pytest.approx(-0.2)
    assert r.ci_low < -0.2 < r.ci_high < 0          # the whole interval is a loss
    assert r.mcnemar_p < 0.001
    assert r == compare("t", "acc,none", base, var)  # seeded


def test_identical_models_have_zero_width_interval():
    base = {("t", i): float(i % 2) for i in range(50)}
    r = compare("t", "acc,none", base, dict(base))
    assert (r.delta, r.ci_low, r.ci_high, r.gained, r.lost, r.mcnemar_p) == (0.0, 0.0, 0.0, 0, 0, 1.0)


def test_non_binary_scores_have_no_mcnemar():
    base = {("t", i): 0.5 for i in range(10)}
    var = {("t", i): 0.25 for i in range(10)}
    r = compare("t", "f1,none", base, var)
    assert r.mcnemar_p is None and r.delta == pytest.approx(-0.25)


def test_item_scores_reads_one_filter(tmp_path):
    f = tmp_path / "samples.jsonl"
    rows = [{"task": "g", "doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
            {"task": "g", "doc_id": 0, "filter": "flexible-extract", "exact_match": 0.0},
            {"task": "g", "doc_id": 1, "filter": "strict-match", "exact_match": 0.0}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert item_scores(f, "exact_match,strict-match") == {("g", 0): 1.0, ("g", 1): 0.0}
    assert item_scores(f, "exact_match,flexible-extract") == {("g", 0): 0.0}
