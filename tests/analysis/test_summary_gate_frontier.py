"""Metric naming, deltas, gates (pass, fail, at the threshold, missing metric) and the Pareto front."""

from __future__ import annotations

import json

import re

import pytest

from conftest import add_serving_intervals, make_summary, plan_run, run_cli, run_folder
from suite.outputs import frontier
from suite.analysis import gate
from suite.recipe import GateSpec
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.records.summary import VariantSummary
from suite.analysis.assemble import with_metrics
from suite.analysis.summary import delta_metrics, metric_name, variant_metrics
from suite.stages.registry import BENCHMARK, EVALUATE

BASE = {"acc.suite_gsm8k": 0.50, "acc.suite_mmlu": 0.60, "acc.mean": 0.55, "tput.output_tok_s": 100.0}


def test_metric_names_are_mlflow_legal():
    assert metric_name("acc", "suite_humaneval", "pass@1,create_test") == "acc.suite_humaneval.pass_at_1.create_test"
    assert metric_name("acc", "gsm8k", "exact_match,strict-match") == "acc.gsm8k.exact_match.strict-match"
    v = VariantSummary(name="x", is_baseline=True, model_path="m", stages={EVALUATE: EvaluateResult(
        scores=[TaskScore(task="t", metric="pass@1,f", value=0.5, all_metrics={"pass@1,f": 0.5, "other,g": 0.1})],
        results_file="r", wall_s=1, engine_load_s=1)})
    m = variant_metrics(v, "max")
    assert m["acc.t"] == 0.5 and m["acc.t.other.g"] == 0.1 and "acc.t.pass_at_1.f" not in m
    assert all(re.fullmatch(r"[A-Za-z0-9_\-./ ]+", k) for k in m)


def test_deltas_and_ratio():
    s = make_summary({"bf16": BASE, "fp8": {**BASE, "acc.suite_gsm8k": 0.47, "tput.output_tok_s": 130.0}})
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    fp8 = s.variants[1]
    assert fp8.metrics["acc.suite_gsm8k.delta"] == pytest.approx(-0.03)
    assert fp8.metrics["tput.output_tok_s.ratio"] == pytest.approx(1.3)
    assert s.variants[0].metrics["acc.suite_gsm8k.delta"] == 0.0


def gate_result(fp8_metrics, **policy):
    s = make_summary({"bf16": BASE, "fp8": fp8_metrics})
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    return gate.run(gate.GateConfig(add_serving_intervals(s), GateSpec(**policy)))


def test_gate_pass():
    r = gate_result({**BASE, "acc.suite_gsm8k": 0.49, "tput.output_tok_s": 130.0},
                    default_max_drop=0.02, min_throughput_gain=1.2)
    assert r.passed and len(r.checks) == 3


def test_gate_fail_says_which_and_by_how_much():
    r = gate_result({**BASE, "acc.suite_gsm8k": 0.45}, max_drop={"suite_gsm8k": 0.02})
    (check,) = r.checks
    assert not r.passed and check.gate == "max drop suite_gsm8k"
    assert check.measured == pytest.approx(0.05) and check.margin == pytest.approx(-0.03)


def test_gate_exactly_at_threshold_passes():
    r = gate_result({**BASE, "acc.suite_gsm8k": 0.48, "tput.output_tok_s": 120.0},
                    max_drop={"suite_gsm8k": 0.02}, min_throughput_gain=1.2)
    assert r.passed


def test_gate_missing_metric_is_bad_input():
    r = gate_result({k: v for k, v in BASE.items() if k != "tput.output_tok_s"}, min_throughput_gain=1.1)
    assert not r.passed and r.missing and "tput.output_tok_s.ratio" in r.missing[0]


@pytest.mark.parametrize("fp8_gsm8k, policy, code", [
    (0.49, "default_max_drop: 0.02\n", 0),
    (0.40, "default_max_drop: 0.02\n", 1),
    (0.49, "min_throughput_gain: 1.1\n", 2),   # the run has no throughput ratio -> missing metric
    (0.49, "max_dorp: 0.02\n", 2),             # a typo in the policy
])
def test_gate_cli_exit_codes(tmp_path, fp8_gsm8k, policy, code):
    s = make_summary({"bf16": {k: v for k, v in BASE.items() if not k.startswith("tput")},
                      "fp8": {"acc.suite_gsm8k": fp8_gsm8k, "acc.suite_mmlu": 0.6, "acc.mean": 0.5}},
                     run_dir=str(tmp_path))
    run_folder(tmp_path, s)  # plan.json, the stage results and run.json, as the runner leaves them
    (tmp_path / "policy.yaml").write_text(policy)
    res = run_cli("gate", str(tmp_path), "--policy", str(tmp_path / "policy.yaml"))
    assert res.returncode == code, res.stdout + res.stderr
    if code == 1:
        assert "FAILED fp8: max drop suite_gsm8k" in res.stdout


def test_gate_cli_not_a_run(tmp_path):
    res = run_cli("gate", str(tmp_path))
    assert res.returncode == 2 and "not a run folder (no recipe.yaml)" in res.stderr


def test_pareto_front_and_png(tmp_path):
    s = make_summary({
        "bf16": {"acc.mean": 0.60, "tput.output_tok_s": 100.0},
        "fp8-a": {"acc.mean": 0.59, "tput.output_tok_s": 150.0},
        "fp8-b": {"acc.mean": 0.55, "tput.output_tok_s": 140.0},   # dominated by fp8-a
        "fp8-c": {"acc.mean": 0.50, "tput.output_tok_s": 160.0},
    })
    res = frontier.run(frontier.FrontierConfig(s, tmp_path / "f.png"))
    assert res.pareto == ["bf16", "fp8-a", "fp8-c"]
    assert res.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _paired(ci_low, ci_high=0.01, **extra):
    return {**BASE, "acc.suite_gsm8k": 0.49, "acc.suite_gsm8k.delta_ci_low": ci_low,
            "acc.suite_gsm8k.delta_ci_high": ci_high, "acc.suite_mmlu.delta_ci_low": 0.0,
            "acc.suite_gsm8k.items_paired": 1319.0, "acc.suite_mmlu.items_paired": 14042.0,
            "tput.output_tok_s": 130.0, "tput.output_tok_s.ratio": 1.3, "tput.ttft_p99_ms": 150.0,
            "tput.tpot_p99_ms": 30.0, **extra}


@pytest.mark.parametrize("policy,ci_low,passed", [
    ({"non_inferiority_margin": {"suite_gsm8k": 0.02}}, -0.015, True),
    ({"non_inferiority_margin": {"suite_gsm8k": 0.02}}, -0.02, True),      # exactly at the margin
    ({"non_inferiority_margin": {"suite_gsm8k": 0.02}}, -0.025, False),    # small point drop, CI too wide
    ({"default_non_inferiority_margin": 0.01}, -0.025, False),
    ({"min_recovery_lower_bound": {"suite_gsm8k": 0.95}}, -0.025, True),   # (0.50 - 0.025) / 0.50 = 0.95
    ({"min_recovery_lower_bound": {"suite_gsm8k": 0.99}}, -0.025, False),
    ({"max_relative_drop": {"suite_gsm8k": 0.02}}, -0.02, False),  # 2% exactly, but its CI straddles: inconclusive
    ({"default_max_relative_drop": 0.01}, -0.02, False),
    ({"max_ttft_p99_ms": 150, "max_tpot_p99_ms": 25}, -0.02, False),       # TPOT 30 > 25
    ({"max_ttft_p99_ms": 200, "min_throughput_gain": 1.3}, -0.02, True),
])
def test_gate_policies_on_paired_results(policy, ci_low, passed):
    s = add_serving_intervals(make_summary({"bf16": BASE, "fp8": _paired(ci_low)}))
    r = gate.run(gate.GateConfig(s, GateSpec(**policy)))
    assert not r.missing and r.checks and r.passed is passed, [(c.gate, c.measured, c.threshold) for c in r.checks]


def test_gate_margins_point_the_right_way():
    s = make_summary({"bf16": BASE, "fp8": _paired(-0.03)})
    r = gate.run(gate.GateConfig(s, GateSpec(non_inferiority_margin={"suite_gsm8k": 0.02}, max_ttft_p99_ms=100)))
    ni, ttft = r.checks
    assert ni.margin == pytest.approx(-0.01) and not ni.passed          # 0.01 below the allowed -0.02
    assert ttft.margin == pytest.approx(-50) and not ttft.passed


def test_gate_non_inferiority_without_paired_data_is_bad_input():
    s = make_summary({"bf16": BASE, "fp8": {**BASE, "acc.suite_gsm8k": 0.49}})
    r = gate.run(gate.GateConfig(s, GateSpec(non_inferiority_margin={"suite_gsm8k": 0.02}, min_sustainable_rate_gain=1.1)))
    assert not r.passed and len(r.missing) == 2 and "delta_ci_low" in r.missing[0]
    assert "tput.sustainable_rate.ratio" in r.missing[1]


def test_frontier_across_runs_and_recipes(tmp_path):
    a = make_summary({"bf16": {"acc.suite_gsm8k": 0.60, "acc.suite_mmlu": 0.60, "tput.output_tok_s": 100.0,
                               "tput.sustainable_rate": 1.0, "tput.sustainable_output_tok_s": 70.0},
                      "fp8": {"acc.suite_gsm8k": 0.59, "acc.suite_mmlu": 0.59, "tput.output_tok_s": 150.0,
                              "tput.sustainable_rate": 2.0, "tput.sustainable_output_tok_s": 120.0}},
                     run_dir=str(tmp_path / "a"))
    b = make_summary({"bf16": {"acc.suite_gsm8k": 0.58, "acc.suite_mmlu": 0.58, "tput.output_tok_s": 90.0},
                      "fp8-bad": {"acc.suite_gsm8k": 0.50, "acc.suite_mmlu": 0.50, "tput.output_tok_s": 95.0}},
                     run_dir=str(tmp_path / "b"))
    b.recipe["name"] = "other"
    for s, d in ((a, "a"), (b, "b")):
        run_folder(tmp_path / d, s)  # the figures are the records' (acc.mean and one chart a task)
    res = run_cli("frontier", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "f"))
    assert res.returncode == 0, res.stderr
    front = {ln.split()[1] for ln in res.stdout.splitlines() if ln.startswith("* ") and "tok/s" in ln}
    assert front == {"demo-cpu/bf16", "demo-cpu/fp8"}  # other/* are dominated by demo-cpu/bf16
    page = (tmp_path / "f" / "frontier.html").read_text()
    assert "<script" not in page and "acc.suite_gsm8k" in page and "other/fp8-bad" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', "")  # self-contained: no URL but the SVG namespaces
    assert page.count("<svg") == 3 and "<title>demo-cpu/fp8: 150 tok/s, acc.mean 0.5900 (on the front)</title>" in page
    assert (tmp_path / "f" / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    slo = run_cli("frontier", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "g"), "--throughput", "slo")
    assert slo.returncode == 0 and "120.0 tok/s" in slo.stdout and "fp8-bad" not in slo.stdout
    none = run_cli("frontier", str(tmp_path / "b"), "--throughput", "slo", "--out", str(tmp_path / "h"))
    assert none.returncode == 2


def _bench(*points):
    from suite.records.benchmark import BenchmarkResult, LoadPoint, ServerStats

    pts = [LoadPoint(label=label, request_rate=label, output_tok_s=sorted(reps)[len(reps) // 2] if len(reps) % 2
                     else sum(sorted(reps)[len(reps) // 2 - 1:len(reps) // 2 + 1]) / 2,
                     repetitions=[{"output_tok_s": r, "ttft_p99_ms": 100.0 + i, "tpot_p99_ms": 10.0 + i}
                                  for i, r in enumerate(reps)],
                     server=ServerStats(running_max=running)) for label, reps, running in points]
    return BenchmarkResult(points=pts, kv_cache_tokens=76800, kv_capacity_requests=100.0, server_start_s=1, wall_s=1,
                           server_log="s")


def test_the_issues_13x_baseline_is_unstable_and_its_ratio_interval_spans_one():
    """Recorded as the issue's fresh clone had it (points from before intervals were kept: derived from the rows)."""
    s = make_summary({"bf16": {}, "fp8": {}})
    bf16, fp8 = s.variants
    bf16.stages[BENCHMARK], fp8.stages[BENCHMARK] = _bench(("inf", [27.0, 361.0], 16)), _bench(("inf", [330.0, 345.0], 16))
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    bf16, fp8 = s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    assert bf16.metrics["tput.stable"] == 0.0 and bf16.metrics["tput.repetitions"] == 2.0
    assert fp8.metrics["tput.stable"] == 1.0
    m = fp8.metrics
    assert m["tput.output_tok_s.ratio.ci_low"] < 1.0 < m["tput.output_tok_s.ratio"] < m["tput.output_tok_s.ratio.ci_high"]
    assert bf16.metrics["tput.ttft_p99_ms.ci_low"] == 100.0 and bf16.metrics["tput.ttft_p99_ms.ci_high"] == 101.0


def test_ratio_equal_rate_beside_best_against_best_and_the_renamed_capacity():
    """The issue's H100 case: BF16 peaks at rate 50, FP8 at rate 100; best vs best 1.45x, at equal rate more."""
    s = make_summary({"bf16": {}, "fp8": {}})
    bf16, fp8 = s.variants
    bf16.stages[BENCHMARK] = _bench(("50", [1000.0, 990.0, 1010.0], 825), ("100", [890.0, 900.0, 880.0], 830))
    fp8.stages[BENCHMARK] = _bench(("50", [1020.0, 1000.0, 1010.0], 300), ("100", [1450.0, 1440.0, 1460.0], 1024))
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    bf16, fp8 = s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    m = fp8.metrics
    assert m["tput.output_tok_s.ratio"] == pytest.approx(1.45)
    assert m["tput.output_tok_s.ratio_equal_rate"] == pytest.approx(1450 / 890)
    assert m["tput.output_tok_s.ratio_equal_rate.ci_low"] < 1450 / 890 < m["tput.output_tok_s.ratio_equal_rate.ci_high"]
    assert m["tput.output_tok_s.ratio.ci_low"] < 1.45 < m["tput.output_tok_s.ratio.ci_high"]
    assert m["tput.stable"] == 1.0 and m["tput.point.100.stable"] == 1.0
    assert m["tput.peak_concurrency"] == 1024 and bf16.metrics["tput.peak_concurrency"] == 825  # measured maxima
    assert m["tput.kv_capacity_requests"] == 100.0  # the KV-derived figure, under its own name


def test_run_table_marks_the_unstable_baseline_and_prints_the_ratio_interval(capsys):
    from suite.cli.render import print_summary

    s = make_summary({"bf16": {}, "fp8": {}})
    bf16, fp8 = s.variants
    bf16.stages[BENCHMARK], fp8.stages[BENCHMARK] = _bench(("inf", [27.0, 361.0], 16)), _bench(("inf", [330.0, 345.0], 16))
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    bf16, fp8 = s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    print_summary(s)
    out = capsys.readouterr().out
    assert "194.0 UNSTABLE" in out and "27-361" in out  # the load-point table
    assert re.search(r"1\.74 \[0\.91-12\.78\] unstable", out)  # the ratio, its range, the baseline's instability
