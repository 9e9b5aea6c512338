"""throughput.adaptive_repetitions: the design's error rates by simulation, the stage's stopping and its records."""

from __future__ import annotations

import math
import random

import pytest

from suite.analysis.gates.base import judge
from suite.records.benchmark import AdaptiveRepetitions, BenchmarkConfig, BenchmarkResult, LoadPoint
from suite.records.evaluate import EngineConfig
from suite.runtime import repeats
from suite.runtime.spread import ratio_interval
from suite.stages.benchmark.repeats import GatedPoints, Until

KEY = "output_tok_s"


def _gate(v: list[float], b: list[float], limit: float) -> str:
    """min_throughput_gain's outcome on these repetitions: the gate's interval (suite.runtime.spread) judged by the
    gate's own rule (suite.analysis.gates.base.judge)."""
    low, high, _ = ratio_interval(v, b)
    mid = (sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2)
    return judge("v", "min throughput gain", mid, low, high, limit, False, None).outcome


def _simulate(most: int, sequences: int, ratio: float, limit: float = 1.2, sigma: float = 0.03, seed: int = 7):
    """Sequences of lognormal repetition throughputs (the baseline's ``most``, then the variant's, one at a time, as
    the stage runs them); returns (adaptive pass rate, fixed-count pass rate, mean repetitions run, disagreements
    between a stopped look's decision and the gate's verdict on the stopped data)."""
    rng = random.Random(seed)
    passed = fixed_passed = reps = disagree = 0
    for _ in range(sequences):
        b = [1000.0 * math.exp(rng.gauss(0, sigma)) for _ in range(most)]
        v = [1000.0 * ratio * math.exp(rng.gauss(0, sigma)) for _ in range(most)]
        fixed_passed += _gate(v, b, limit) == "pass"
        for n in range(repeats.MIN_REPETITIONS, most + 1):
            lk = repeats.look({KEY: v[:n]}, {KEY: b}, {KEY: limit}, most)
            if lk.stop:
                break
        outcome = _gate(v[:n], b, limit)
        if lk.stopped != repeats.AT_MAXIMUM and outcome != lk.gates[KEY]["decision"]:
            disagree += 1
        passed += outcome == "pass"
        reps += n
    return passed / sequences, fixed_passed / sequences, reps / sequences, disagree


@pytest.mark.parametrize("most", [3, 4, 5, 8])
def test_the_false_pass_rate_at_the_margin_stays_within_alpha_plus_one_point(most):
    """True ratio exactly at the limit: the gate's 95% interval leaves alpha = 2.5% on the pass side; the repeated
    looks keep the false-pass rate within alpha + 0.01 over 3,000 sequences, and cost at most the interim budget
    (0.005, plus simulation noise) over the fixed count on the same sequences."""
    adaptive, fixed, _, disagree = _simulate(most, 3000, ratio=1.2)
    assert adaptive <= 0.025 + 0.01
    assert adaptive - fixed <= repeats.INTERIM_ALPHA + 0.003
    assert disagree == 0  # a stopped point gets from the gate the decision that stopped it


def test_with_more_repetitions_the_looks_still_cost_no_more_than_their_budget_over_the_fixed_count():
    """At 5 repetitions, another seed: the looks add no more than their budget to the gate's own rate."""
    adaptive, fixed, _, disagree = _simulate(5, 2000, ratio=1.2, seed=11)
    assert adaptive - fixed <= repeats.INTERIM_ALPHA + 0.003
    assert disagree == 0


def test_a_clear_ratio_stops_early_with_the_same_verdict():
    """FP8 50% faster against a limit of 1.2: a pass needs 3 repetitions (2 give the min-max range, which can fail a
    gate, never pass one), so of 5 or 8 most clear passes stop at 3; each passes as the fixed count does. A clear
    failure (ratio 0.9) stops at 2 for most and fails."""
    for most, sigma, at_most in ((5, 0.01, 3.1), (8, 0.01, 3.1), (5, 0.03, 3.4)):
        adaptive, fixed, mean_reps, _ = _simulate(most, 500, ratio=1.5, sigma=sigma)
        assert adaptive == fixed >= 0.99 and mean_reps < at_most
    adaptive, fixed, mean_reps, _ = _simulate(4, 500, ratio=0.9)
    assert adaptive == fixed == 0.0 and mean_reps < 2.6


def test_the_interim_interval_is_the_gates_construction_at_a_stricter_level():
    v, b = [1300.0, 1330.0, 1310.0], [1000.0, 1010.0, 990.0]
    low, high, method = ratio_interval(v, b)
    i_low, i_high = repeats.interim_interval(v, b, 0.025)
    assert method == "t" and i_low == pytest.approx(low, rel=2e-3) and i_high == pytest.approx(high, rel=2e-3)
    s_low, s_high = repeats.interim_interval(v, b, repeats.interim_alpha(3))
    assert s_low < low and s_high > high  # wider, same centre
    assert math.log(s_low * s_high) == pytest.approx(math.log(low * high))
    assert repeats.interim_interval([1300.0], b, 0.01) == (None, None)
    assert repeats.interim_alpha(3) == repeats.INTERIM_ALPHA and repeats.interim_alpha(6) == repeats.INTERIM_ALPHA / 4


def test_a_look_needs_every_gate_decided_and_stops_at_the_maximum():
    base = {KEY: [1000.0, 1010.0, 990.0], "goodput_req_s": [10.0, 10.1, 9.9]}
    clear = {KEY: [1500.0, 1510.0], "goodput_req_s": [12.0, 12.6]}
    two = repeats.look(clear, base, {KEY: 1.2}, 3)  # 2 repetitions: the min-max range cannot pass a gate
    assert not two.stop and two.gates[KEY]["decision"] is None
    slow = repeats.look({KEY: [900.0, 905.0]}, base, {KEY: 1.2}, 3)  # ... but can fail one
    assert slow.stop and slow.stopped == "decided after 2" and slow.gates[KEY]["decision"] == "fail"
    three = repeats.look({KEY: [1500.0, 1510.0, 1505.0]}, base, {KEY: 1.2}, 5)
    assert three.stop and three.stopped == "decided after 3" and three.gates[KEY]["decision"] == "pass"
    undecided = repeats.look(clear, base, {KEY: 1.2, "goodput_req_s": 1.2}, 3)
    assert not undecided.stop and undecided.stopped is None
    last = repeats.look({k: x + [x[0]] for k, x in clear.items()}, base, {KEY: 1.2, "goodput_req_s": 1.2}, 3)
    assert last.stop and last.stopped == repeats.AT_MAXIMUM and last.gates[KEY]["interim_ci_low"] is None


def _config(tmp_path, headline="max", repetitions=3, workload="random", write_base=True) -> BenchmarkConfig:
    path = tmp_path / "base" / "benchmark.result.json"
    if write_base:
        rows = [{"output_tok_s": x} for x in (1000.0, 1010.0, 990.0)]
        pts = [LoadPoint(label="rate-50", output_tok_s=500.0, repetitions=[{"output_tok_s": 500.0}] * 3),
               LoadPoint(label="rate-100", output_tok_s=1000.0, repetitions=rows)]
        BenchmarkResult(points=pts, server_start_s=1.0, wall_s=2.0, server_log="server.log").write(path)
    return BenchmarkConfig(engine=EngineConfig(model="m"), input_len=8, output_len=8, num_prompts=4,
                           request_rates=[50, 100], repetitions=repetitions, workload=workload,
                           output_dir=str(tmp_path / "out"),
                           adaptive=AdaptiveRepetitions(limits={KEY: 1.2}, headline=headline,
                                                        baseline_result=str(path)))


def test_gated_points_are_the_headline_candidates_judged_against_the_baselines_headline(tmp_path):
    g = GatedPoints(_config(tmp_path))
    assert g.against == "rate-100" and g.base == {KEY: [1000.0, 1010.0, 990.0]}
    assert all(g.until("random", i, 2) is not None for i in range(2))  # max: either can be the headline
    last = GatedPoints(_config(tmp_path, headline="last"))
    assert last.until("random", 0, 2) is None and last.until("random", 1, 2) is not None
    several = GatedPoints(_config(tmp_path, workload=["random", "tasks"]))
    assert several.until("tasks", 1, 2) is None  # another workload's points are not the headline's
    assert not GatedPoints(_config(tmp_path, repetitions=2)).active  # 2 of at least 2: nothing to decide


def test_an_unreadable_baseline_result_fails_loudly_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="benchmark.result.json.*adaptive_repetitions: false"):
        GatedPoints(_config(tmp_path, write_base=False))


def test_the_stage_stops_a_decided_point_and_records_why(tmp_path):
    """LoadRunner.measure with a gated point's rule: repetitions stop once decided; the point records them."""
    from suite.stages.benchmark.stage import LoadRunner

    class Replay(LoadRunner):  # each repetition's figures from a list, in place of `vllm bench serve`
        def __init__(self, figures):
            self.figures, self.runs = list(figures), 0

        def _one(self, label, rate, concurrency, num_prompts, rep, reps, workload):
            self.runs += 1
            reps.append((LoadPoint(label=label, output_tok_s=self.figures[rep], completed=4), None))

    until = GatedPoints(_config(tmp_path)).until("random", 1, 2)
    point = Replay([900.0, 905.0, 902.0]).measure("rate-100", 100, None, 4, 3, "random", until)  # a clear failure
    assert len(point.repetitions) == 2 and point.repetitions_max == 3 and point.stopped == "decided after 2"
    assert point.repetition_looks[0]["baseline_point"] == "rate-100"
    near = Replay([1200.0, 1230.0, 1190.0])
    point = near.measure("rate-100", 100, None, 4, 3, "random", GatedPoints(_config(tmp_path)).until("random", 1, 2))
    assert near.runs == 3 and point.stopped == repeats.AT_MAXIMUM and len(point.repetition_looks) == 2
    fixed = Replay([1500.0, 1505.0, 1502.0]).measure("rate-100", 100, None, 4, 3, "random")
    assert len(fixed.repetitions) == 3 and fixed.repetitions_max is None and fixed.stopped is None


def test_until_records_nothing_before_the_second_repetition():
    u = Until({KEY: [1000.0, 1001.0, 999.0]}, {KEY: 1.2}, 3)
    assert u.after([LoadPoint(label="x", output_tok_s=1500.0)]) is False and u.fields()["stopped"] is None
