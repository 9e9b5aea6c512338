"""The paired interval of 0/1 scores at the margin, simulated: the gate's false-pass rate holds at small n and few
discordant pairs (the bootstrap it replaces passed 35% of the time at 50 items, and any margin when all items agree)."""

from __future__ import annotations

import numpy as np
import pytest

from suite.analysis.paired import compare, tango_interval

ALPHA = 0.025  # each side of the 95% interval
SIMS = 20_000  # datasets per shape: the rate's sampling sd is 0.0011 at 0.025
SHAPES = [(n, disc, margin) for n in (8, 20, 50, 200, 1319) for disc in (0.02, 0.05, 0.1, 0.2, 0.3)
          for margin in (0.02, 0.05) if margin <= disc]


def _intervals(n: int, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interval of each (gained, lost) row, computed once per distinct row."""
    rows, inverse = np.unique(counts, axis=0, return_inverse=True)
    low, high = tango_interval(n, rows[:, 0], rows[:, 1])
    return low[inverse.ravel()], high[inverse.ravel()]


def test_false_pass_and_false_fail_at_the_margin_hold_at_every_size():
    """True paired difference = -margin (items lost at (disc + margin) / 2, gained at (disc - margin) / 2): the
    non-inferiority gate passes (CI low >= -margin) at most alpha + 0.01 of the time (worst 0.032 computed
    exactly over n 2-120 and 150-500, discordance 1-50%, margins 0.005-0.2). The other side, a build exactly at
    the margin failed (CI high < -margin), reaches 0.047 where no item is gained at all (n = 200, 2% lost): the
    score interval's one-sided error at the boundary of the table, on the side that costs a rerun, not a wrong
    release.
    900,000 datasets over 45 shapes."""
    rng = np.random.default_rng(20261207)
    worst = {}
    for n, disc, margin in SHAPES:
        p_gain, p_lose = (disc - margin) / 2, (disc + margin) / 2
        counts = rng.multinomial(n, [p_gain, p_lose, 1 - disc], size=SIMS)[:, :2]
        low, high = _intervals(n, counts)
        worst[(n, disc, margin)] = (float(np.mean(low >= -margin)), float(np.mean(high < -margin)))
    false_passes = {k: v for k, v in worst.items() if v[0] > ALPHA + 0.01}
    assert not false_passes, false_passes
    false_fails = {k: v for k, v in worst.items() if v[1] > ALPHA + 0.025}
    assert not false_fails, false_fails
    assert len(SHAPES) * SIMS == 900_000
    assert max(p for p, _ in worst.values()) > 0.015  # the bound is met by the interval, not by never passing


def test_the_gate_can_pass_a_clear_build_with_few_items_flipped():
    """Power where it is due: 1,319 items, 2% flipped each way (no drop), margin 0.02: the interval is narrow
    enough to pass 94% of the time (the normal test: 95%); with 50 items it cannot (the honest answer there is
    inconclusive)."""
    rng = np.random.default_rng(7)
    for n, expect in ((1319, lambda r: r > 0.9), (50, lambda r: r < 0.05)):
        counts = rng.multinomial(n, [0.02, 0.02, 0.96], size=4000)[:, :2]
        low, _ = _intervals(n, counts)
        assert expect(float(np.mean(low >= -0.02))), (n, float(np.mean(low >= -0.02)))


@pytest.mark.parametrize("n", [2, 8, 50, 1319])
def test_compare_uses_the_score_interval_on_binary_scores(n):
    rng = np.random.default_rng(n)
    base = {("t", i): float(rng.random() < 0.6) for i in range(n)}
    var = {k: (1.0 - v if rng.random() < 0.1 else v) for k, v in base.items()}
    c = compare("t", "acc,none", base, var)
    low, high = tango_interval(n, c.gained, c.lost)
    assert c.ci_method == "tango" and (c.ci_low, c.ci_high) == (float(low), float(high))
    assert -1 <= c.ci_low <= c.delta <= c.ci_high <= 1


def test_score_interval_known_answers():
    """Fagerland, Lydersen & Laake (2017), chapter 8: Tango's interval for two published paired tables
    (Bentur 2009: 1 gained, 7 lost of 21; Cavo 2012: 6 gained, 16 lost of 161), and the ends of the range."""
    assert [round(float(x), 4) for x in tango_interval(21, 1, 7)] == [-0.5172, -0.0260]
    assert [round(float(x), 4) for x in tango_interval(161, 6, 16)] == [-0.1240, -0.0054]
    assert float(tango_interval(5, 0, 5)[0]) == -1.0 and float(tango_interval(5, 5, 0)[1]) == 1.0


def test_the_gate_names_the_interval_it_judged(tmp_path, capsys):
    """8 items that all agree: non-inferiority at 0.02 is inconclusive on Tango's interval (+-0.32), and the gate's
    line and its JSON report say which interval; the summary's paired record carries ci_method 'tango'."""
    import json

    from conftest import build_gated_run, run_gate

    s = build_gated_run(tmp_path, {"non_inferiority_margin": {"suite_gsm8k": 0.02}}, n=8)
    assert [p["ci_method"] for v in s["variants"] for p in v["paired"]] == ["tango"]
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(tmp_path / "gate.json"))
    assert code == 3 and "INCONCLUSIVE fp8: non-inferiority suite_gsm8k" in out, out + err
    assert "[-0.3244, 0.3244] (Tango score interval) straddles the threshold -0.02" in out, out
    case = json.loads((tmp_path / "gate.json").read_text())["cases"][0]
    assert case["outcome"] == "inconclusive" and "Tango score interval" in case["reason"]


def test_a_decided_check_names_its_interval_in_the_json_report(tmp_path, capsys):
    """300 identical items against a 0.2 margin: a pass, whose reason in the JSON report names the interval."""
    import json

    from conftest import build_gated_run, run_gate

    s = build_gated_run(tmp_path, {"non_inferiority_margin": {"suite_gsm8k": 0.2}}, n=300)
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(tmp_path / "gate.json"))
    case = json.loads((tmp_path / "gate.json").read_text())["cases"][0]
    assert code == 0 and case["outcome"] == "pass", out + err
    assert case["reason"].endswith("(Tango score interval), n = 300"), case["reason"]
