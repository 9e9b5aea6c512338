"""Paired statistics on constructed per-item results with known answers."""

from __future__ import annotations

import json

import pytest

from suite.analysis.paired import compare, item_scores, mcnemar_exact_p


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


def test_identical_models_still_have_an_interval():
    """No item flipped: the score interval is +-z^2 / (n + z^2) (its statistic is n|d| / (1 - |d|) = z^2 there), the
    paired analogue of the rule of three, not the bootstrap's [0, 0] (which passed any margin on 8 items)."""
    z2 = 1.959963984540054 ** 2
    for n in (8, 50, 1319):
        base = {("t", i): float(i % 2) for i in range(n)}
        r = compare("t", "acc,none", base, dict(base))
        assert (r.delta, r.gained, r.lost, r.mcnemar_p, r.ci_method) == (0.0, 0, 0, 1.0, "tango")
        assert r.ci_low == pytest.approx(-z2 / (n + z2), rel=1e-12)
        assert r.ci_high == pytest.approx(z2 / (n + z2), rel=1e-12)


def test_other_scores_with_few_changed_items_get_the_whole_range():
    """Scores other than 0/1 (an F1, a BLEU): the bootstrap collapses when few items changed, so under MIN_CHANGED
    changed items the interval is every delta the scores' range allows ('bounds': any gate is inconclusive)."""
    from suite.analysis.paired import MIN_CHANGED

    base = {("t", i): 0.5 for i in range(200)}
    same = compare("t", "f1,none", base, dict(base))
    assert (same.ci_method, same.ci_low, same.ci_high, same.delta) == ("bounds", -1.0, 1.0, 0.0)
    few = dict(base) | {("t", i): 0.25 for i in range(MIN_CHANGED - 1)}
    assert compare("t", "f1,none", base, few).ci_method == "bounds"
    bleu = {k: 40.0 for k in base}
    assert (compare("t", "bleu,none", bleu, dict(bleu)).ci_low, compare("t", "bleu,none", bleu, dict(bleu)).ci_high) \
        == (-40.0, 40.0)
    many = dict(base) | {("t", i): 0.5 + (i % 7 - 3) / 10 for i in range(MIN_CHANGED + 10)}
    r = compare("t", "f1,none", base, many)
    assert r.ci_method == "BCa" and r.ci_low < r.delta < r.ci_high and r.ci_high - r.ci_low < 0.2


def test_non_binary_scores_have_no_mcnemar():
    base = {("t", i): 0.5 for i in range(40)}
    var = {("t", i): 0.25 for i in range(40)}
    r = compare("t", "f1,none", base, var)
    assert r.mcnemar_p is None and r.delta == pytest.approx(-0.25)
    assert (r.ci_method, r.ci_low, r.ci_high) == ("constant", -0.25, -0.25)  # 40 items changed, by the same amount


def test_item_scores_reads_one_filter(tmp_path):
    f = tmp_path / "samples.jsonl"
    rows = [{"task": "g", "doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
            {"task": "g", "doc_id": 0, "filter": "flexible-extract", "exact_match": 0.0},
            {"task": "g", "doc_id": 1, "filter": "strict-match", "exact_match": 0.0}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert item_scores(f, "exact_match,strict-match") == {("g", 0): 1.0, ("g", 1): 0.0}
    assert item_scores(f, "exact_match,flexible-extract") == {("g", 0): 0.0}


def test_item_scores_reads_an_archived_items_file_as_the_samples_file(tmp_path):
    """An archived run folder's evaluate/items.jsonl.gz (studies/2026-12-05-verdicts/scripts/collect.py): lm-eval's
    rows cut to task, doc_id, filter, filtered_resps and the scores (resps_key on the strict-match row), gzipped."""
    import gzip

    rows = [{"task": "g", "doc_id": 0, "filter": "strict-match", "filtered_resps": ["32"], "exact_match": 1.0,
             "resps_key": "95704dbc8f43bc6c"},
            {"task": "g", "doc_id": 0, "filter": "flexible-extract", "filtered_resps": ["3"], "exact_match": 0.0},
            {"task": "g", "doc_id": 1, "filter": "strict-match", "filtered_resps": ["2.5"], "exact_match": 0.0,
             "resps_key": "c3db54777d1596c8"}]
    plain, packed = tmp_path / "samples_g.jsonl", tmp_path / "items.jsonl.gz"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        fh.write(plain.read_text())
    for metric in ("exact_match,strict-match", "exact_match,flexible-extract"):
        assert item_scores(packed, metric) == item_scores(plain, metric) != {}


def test_mcnemar_agrees_with_the_exact_binomial_sum():
    """scipy's binomtest against the two-sided sum written out: 2 * P(X <= min) for X ~ Bin(g + l, 1/2)."""
    import math

    for g, lost in ((40, 80), (7, 7), (0, 1), (13, 30), (250, 300)):
        n, k = g + lost, min(g, lost)
        by_hand = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
        assert mcnemar_exact_p(g, lost) == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize("base, var, n", [
    ({("t", i): 1.0 for i in range(5)}, {("t", i): 0.0 for i in range(5, 9)}, 0),   # no item in common
    ({("t", 0): 1.0, ("t", 1): 1.0}, {("t", 1): 0.0, ("t", 2): 1.0}, 1),          # one
    ({}, {}, 0),
])
def test_too_few_common_items_give_no_interval(base, var, n):
    """The old code returned delta 0 with CI [0, 0] over zero items (and non-inferiority passed)."""
    import math

    r = compare("t", "acc,none", base, var)
    assert r.n == n and r.ci_method == "none" and math.isnan(r.ci_low) and math.isnan(r.ci_high)
    assert math.isnan(r.delta) if n == 0 else r.delta == -1.0
    assert r.mcnemar_p is None if n == 0 else r.mcnemar_p == 1.0


def test_interval_is_close_to_the_normal_one_on_many_items():
    """On 4,000 items both the score interval (0/1 scores) and the bootstrap (the same deltas as scores other than
    0/1) are the normal-theory one, delta +- 1.96 sd / sqrt(n), to 10%."""
    import random

    rnd = random.Random(7)
    base = {("t", i): float(rnd.random() < 0.6) for i in range(4000)}
    var = {k: (1 - v if rnd.random() < 0.05 else v) for k, v in base.items()}
    r = compare("t", "acc,none", base, var)
    diffs = [var[k] - base[k] for k in base]
    sd = (sum((d - r.delta) ** 2 for d in diffs) / (len(diffs) - 1)) ** 0.5
    half = 1.96 * sd / len(diffs) ** 0.5
    boot = compare("t", "f1,none", {k: v / 2 for k, v in base.items()}, {k: v / 2 for k, v in var.items()})
    assert (r.ci_method, boot.ci_method) == ("tango", "BCa") and r.ci_low < r.delta < r.ci_high
    for low, high in ((r.ci_low, r.ci_high), (2 * boot.ci_low, 2 * boot.ci_high)):
        assert low == pytest.approx(r.delta - half, abs=0.1 * half)
        assert high == pytest.approx(r.delta + half, abs=0.1 * half)


def test_item_scores_refuses_a_gzipped_row_too_long_to_be_an_items_row(tmp_path, monkeypatch):
    """A decompression bomb (one line unpacking to gigabytes) is refused after MAX_GZ_ROW_CHARS, not read whole."""
    import gzip

    import suite.analysis.paired as paired

    monkeypatch.setattr(paired, "MAX_GZ_ROW_CHARS", 1000)
    bomb = tmp_path / "items.jsonl.gz"
    with gzip.open(bomb, "wt", encoding="utf-8") as fh:
        fh.write('{"task": "g", "doc_id": 0, "acc": 1.0}\n' + " " * 5000)
    with pytest.raises(ValueError, match=r"items.jsonl.gz: .*line 2: a row longer than 1000 characters"):
        item_scores(bomb, "acc")
    ok = tmp_path / "ok.jsonl.gz"
    with gzip.open(ok, "wt", encoding="utf-8") as fh:
        fh.write('{"task": "g", "doc_id": 0, "acc": 1.0, "pad": "' + "x" * 900 + '"}\n')
    assert item_scores(ok, "acc") == {("g", 0): 1.0}
