"""tput.repetitions.used / .saved: the repetitions a benchmark ran, and those its gated points did not need."""

from __future__ import annotations

from suite.analysis.summary import headline_point
from suite.analysis.tput_spread import repetition_metrics
from suite.records.benchmark import BenchmarkResult, LoadPoint


def _result(points) -> BenchmarkResult:
    return BenchmarkResult(points=points, server_start_s=1.0, wall_s=2.0, server_log="server.log")


def test_used_counts_every_point_and_saved_only_the_gated_points_unneeded_repetitions():
    rows = lambda n: [{"output_tok_s": 100.0 + i} for i in range(n)]  # noqa: E731
    fixed = _result([LoadPoint(label="rate-50", output_tok_s=50.0, repetitions=rows(3)),
                     LoadPoint(label="rate-100", output_tok_s=100.0, repetitions=rows(3))])
    assert repetition_metrics(fixed) == {"tput.repetitions.used": 6.0}  # no gated point: nothing said about savings
    adaptive = _result([LoadPoint(label="rate-50", output_tok_s=50.0, repetitions=rows(2), repetitions_max=5,
                                  stopped="decided after 2"),
                        LoadPoint(label="rate-100", output_tok_s=100.0, repetitions=rows(5), repetitions_max=5,
                                  stopped="at the maximum"),
                        LoadPoint(label="old", output_tok_s=10.0),  # recorded before repetition rows: 1
                        LoadPoint(label="broken", ok=False, repetitions=rows(1))])
    assert repetition_metrics(adaptive) == {"tput.repetitions.used": 8.0, "tput.repetitions.saved": 3.0}


def test_the_stage_and_the_summary_pick_the_same_headline_point():
    """The stage gates the points the summary's headline rule can pick (records' BenchmarkResult.headline_point)."""
    b = _result([LoadPoint(label="rate-50", output_tok_s=50.0), LoadPoint(label="rate-100", output_tok_s=100.0),
                 LoadPoint(label="rate-200", output_tok_s=90.0), LoadPoint(label="rate-400", ok=False)])
    for rule in ("max", "last"):
        assert b.headline_point(rule) is headline_point(b, rule)
    several = b.model_copy(update={"workload": "tasks", "points": [p.model_copy(update={"workload": w})
                                                                    for p, w in zip(b.points, ["random", "tasks"] * 2)]})
    for rule in ("max", "last"):
        assert several.headline_point(rule) is headline_point(several, rule)
    assert _result([]).headline_point("max") is None
