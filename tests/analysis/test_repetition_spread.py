"""tput.repetitions[.max/.saved]: the headline point's repetitions, and those a gated point did not need."""

from __future__ import annotations

from suite.analysis.summary import headline_point
from suite.analysis.tput_spread import spread_metrics
from suite.records.benchmark import BenchmarkResult, LoadPoint


def _result(points) -> BenchmarkResult:
    return BenchmarkResult(points=points, server_start_s=1.0, wall_s=2.0, server_log="server.log")


def _rows(n: int) -> list[dict]:
    return [{"output_tok_s": 100.0 + i} for i in range(n)]


def test_a_gated_headline_point_says_its_most_and_what_it_saved_a_fixed_one_only_its_count():
    fixed = spread_metrics(LoadPoint(label="rate-100", output_tok_s=101.0, repetitions=_rows(3)))
    assert fixed["tput.repetitions"] == 3.0
    assert "tput.repetitions.max" not in fixed and "tput.repetitions.saved" not in fixed
    gated = spread_metrics(LoadPoint(label="rate-100", output_tok_s=100.5, repetitions=_rows(2), repetitions_max=5,
                                     stopped="decided after 2"))
    assert [gated[f"tput.repetitions{k}"] for k in ("", ".max", ".saved")] == [2.0, 5.0, 3.0]
    full = spread_metrics(LoadPoint(label="rate-100", output_tok_s=102.0, repetitions=_rows(5), repetitions_max=5,
                                    stopped="at the maximum"))
    assert full["tput.repetitions.saved"] == 0.0


def test_the_stage_and_the_summary_pick_the_same_headline_point():
    """The stage gates the points the summary's headline rule can pick (records' BenchmarkResult.headline_point)."""
    b = _result([LoadPoint(label="rate-50", output_tok_s=50.0), LoadPoint(label="rate-100", output_tok_s=100.0),
                 LoadPoint(label="rate-200", output_tok_s=90.0), LoadPoint(label="rate-400", ok=False)])
    for rule in ("max", "last"):
        assert b.headline_point(rule) is headline_point(b, rule)
    tagged = [p.model_copy(update={"workload": w}) for p, w in zip(b.points, ["random", "tasks"] * 2)]
    several = b.model_copy(update={"workload": "tasks", "points": tagged})
    for rule in ("max", "last"):
        assert several.headline_point(rule) is headline_point(several, rule)
    assert _result([]).headline_point("max") is None
