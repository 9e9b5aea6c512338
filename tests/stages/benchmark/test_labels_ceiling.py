"""A served point that reached its offline ceiling with the GPU mostly busy is not labelled engine-cpu (issue 41: the
8B shape's FP8 at rate 100 on an H100 reached 99.75% of its offline figure with the GPU 90% busy and was)."""

from __future__ import annotations

from suite.stages.benchmark import bottleneck
from suite.stages.benchmark.labels import classify_point

from test_gpumon import LOW_ROOF, samples


def _point(ceiling_fraction):
    # ~90% busy in the 70-90% band (89.5 mean), the engine core at a full core: host-bound phases hold the idle time
    st = bottleneck.summarize(samples([[85], [85], [85], [95], [95], [87]], engine_core=99.0, power=520.0))
    assert 70 <= st.gpu_util_mean < 90 and st.host_bound_samples >= 3
    from suite.records.benchmark import LoadPoint

    return LoadPoint(label="rate-100", request_rate=100, completed=1500, output_tok_s=20_000.0, req_s=78.0,
                     server=st, roofline=LOW_ROOF, ceiling_fraction=ceiling_fraction)


def test_at_the_offline_ceiling_with_a_busy_gpu_the_point_is_the_engines_not_engine_cpu():
    label, reason = classify_point(_point(0.9975), {})
    assert label == "engine" and "99.8% of the offline engine's output" in reason


def test_the_same_evidence_well_below_the_ceiling_or_without_one_stays_engine_cpu():
    assert classify_point(_point(0.60), {})[0] == "engine-cpu"
    assert classify_point(_point(None), {})[0] == "engine-cpu"


def test_the_kv_capacity_is_named_a_capacity_and_older_results_still_load():
    """The KV-derived figure is ``kv_capacity_requests``; a result written when it was ``peak_concurrency`` loads
    into it (the measured peak is each point's server.running_max, never this field)."""
    from suite.records.benchmark import BenchmarkResult

    base = {"points": [], "server_start_s": 1.0, "wall_s": 1.0, "server_log": "server.log"}
    old = BenchmarkResult.model_validate({**base, "peak_concurrency": 586.375})
    assert old.kv_capacity_requests == 586.375
    written = old.model_dump()
    assert "peak_concurrency" not in written and written["kv_capacity_requests"] == 586.375
    assert BenchmarkResult.model_validate(written).kv_capacity_requests == 586.375


def test_a_result_carrying_both_names_is_refused_not_read_as_either(tmp_path):
    """Both names in one result (an edited or merged file: which figure is the run's is not known): the record does
    not load (the old name is then an extra field): a resume does not keep it (its job runs again) and `suite
    summarize` calls it a result that does not parse."""
    import json

    import pytest
    from pydantic import ValidationError

    from suite.plan.results import read_result
    from suite.records.benchmark import BenchmarkResult

    base = {"points": [], "server_start_s": 1.0, "wall_s": 1.0, "server_log": "server.log"}
    for both in ({"kv_capacity_requests": 5.0, "peak_concurrency": 3.0},
                 {"peak_concurrency": 3.0, "kv_capacity_requests": 5.0}):
        with pytest.raises(ValidationError, match="peak_concurrency"):
            BenchmarkResult.model_validate({**base, **both})
        (tmp_path / "benchmark.result.json").write_text(json.dumps({**base, **both}))
        result, why = read_result(tmp_path, "benchmark")
        assert result is None and why.startswith("its result file does not parse")
