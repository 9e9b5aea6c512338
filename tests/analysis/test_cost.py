"""Cost per 1M output tokens (issue 16, item 5): the recipe's GPU-hour price, the arithmetic with its GPU
scaling, no figure without a price, the Pareto front flipped on the cost axis, and where the figures show."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from conftest import edit_record, make_summary, run_folder
from suite.analysis import frontier as fa
from suite.analysis.assemble import finish, with_metrics
from suite.analysis.summary import cost_metrics, cost_per_1m, delta_metrics, variant_metrics
from suite.recipe import Recipe
from suite.records.benchmark import BenchmarkResult, LoadPoint, SloResult
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.stages.registry import BENCHMARK, EVALUATE

PRICE = {"amount": 3.6, "currency": "USD", "source": "test price list, 2025-01"}


def bench(tok_s: float, slo_tok_s: float | None = None, rate: float | None = 8.0) -> BenchmarkResult:
    """A benchmark result whose best load point makes ``tok_s`` (another point makes less)."""
    pts = [LoadPoint(label="rate-inf", request_rate="inf", output_tok_s=tok_s, req_s=1.0),
           LoadPoint(label="rate-4", request_rate=4, output_tok_s=tok_s / 4, req_s=0.5)]
    slo = SloResult(sustainable_rate=rate, output_tok_s=slo_tok_s) if slo_tok_s is not None or rate is None else None
    return BenchmarkResult(points=pts, server_start_s=1, wall_s=2, server_log="/x/server.log", slo=slo)


def recipe_with(summary, price=PRICE) -> Recipe:
    r = copy.deepcopy(summary.recipe)
    if price is not None:
        r["throughput"]["gpu_hour_cost"] = price
    return Recipe.model_validate(r)


def priced_run(price=PRICE):
    """bf16 on 1 GPU at 1,000 tok/s (500 at the SLO rate); fp8 on 1 GPU at 2,000 (1,600); fp8-tp on
    tensor 2 x pipeline 2 = 4 GPUs at 2,000 tok/s, its SLO search found no sustainable rate."""
    s = make_summary({"bf16": {}, "fp8": {}, "fp8-tp": {}})
    for v, b in zip(s.variants, (bench(1000.0, 500.0), bench(2000.0, 1600.0), bench(2000.0, None, rate=None))):
        v.stages = {BENCHMARK: b}
    s.variants[2].engine_args = {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "enforce_eager": True}
    s = finish(s, recipe_with(s, price), {}, {})
    return s


def test_cost_per_1m_output_tokens_arithmetic_and_gpu_scaling():
    s = priced_run()
    bf16, fp8, tp = (v.metrics for v in s.variants)
    # 3.6 USD/h x 1 GPU / (1,000 tok/s x 3,600 s/h) x 1e6 = 1.0 USD per 1M output tokens
    assert bf16["cost.per_1m_output_tokens"] == pytest.approx(1.0)
    assert bf16["cost.per_1m_output_tokens.slo"] == pytest.approx(2.0)          # at 500 tok/s
    assert fp8["cost.per_1m_output_tokens"] == pytest.approx(0.5)
    assert fp8["cost.per_1m_output_tokens.slo"] == pytest.approx(0.625)         # 3.6e6 / (1,600 x 3,600)
    assert fp8["cost.per_1m_output_tokens.ratio"] == pytest.approx(0.5)
    assert fp8["cost.per_1m_output_tokens.slo.ratio"] == pytest.approx(0.3125)
    # 4 GPUs: four times the hourly price at the same rate
    assert tp["cost.gpus"] == 4.0 and bf16["cost.gpus"] == 1.0
    assert tp["cost.per_1m_output_tokens"] == pytest.approx(2.0)
    assert tp["cost.per_1m_output_tokens.ratio"] == pytest.approx(2.0)
    assert "cost.per_1m_output_tokens.slo" not in tp  # no sustainable rate, no SLO cost (not a 0 tok/s division)
    assert cost_per_1m(2.0, 8, 1e6 / 3600) == pytest.approx(16.0)
    assert s.cost.gpu_hour == 3.6 and s.cost.currency == "USD" and s.cost.source == PRICE["source"]
    assert "GPU time only" in s.cost.scope and "no idle" in s.cost.scope
    assert s.cost.params() == {"cost.gpu_hour": "3.6", "cost.currency": "USD", "cost.source": PRICE["source"]}


def test_no_price_no_cost_figures():
    s = priced_run(price=None)
    assert s.cost is None
    assert not [k for v in s.variants for k in v.metrics if k.startswith("cost.")]
    assert s.variants[1].metrics["tput.output_tok_s.ratio"] == pytest.approx(2.0)  # the rest is still there
    # a price given, then taken away: a second summary pass leaves no stale figure
    s = priced_run()
    s.cost, costs = cost_metrics(s.variants, None)
    s.variants = with_metrics(s.variants, costs)
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    assert s.cost is None and not [k for v in s.variants for k in v.metrics if k.startswith("cost.")]


def test_headline_last_prices_the_last_point():
    s = make_summary({"bf16": {}})
    s.variants[0].stages[BENCHMARK] = bench(1000.0)
    s.variants[0].stages.pop(EVALUATE, None)
    r = recipe_with(s)
    r.throughput.headline = "last"  # rate-4: 250 tok/s
    s = finish(s, r, {}, {})
    assert s.variants[0].metrics["cost.per_1m_output_tokens"] == pytest.approx(4.0)


@pytest.mark.parametrize("price, says", [
    ({"amount": 3.6, "currency": "USD"}, "no source"),
    ({"amount": 3.6, "currency": "USD", "source": "   "}, "no source"),
    ({"amount": 0, "currency": "USD", "source": "x"}, "greater than 0"),
    ({"amount": -1.0, "currency": "USD", "source": "x"}, "greater than 0"),
    ({"amount": "3.6", "currency": "USD", "source": "x"}, "valid number"),
    ({"amount": 3.6, "currency": "dollars", "source": "x"}, "pattern"),
    ({"amount": 3.6, "source": "x"}, "currency"),
    ({"amount": 3.6, "currency": "USD", "source": "x", "per": "hour"}, "Extra inputs"),
])
def test_recipe_refuses_a_price_without_source_or_sense(price, says):
    s = make_summary({"bf16": {}})
    with pytest.raises(ValidationError) as e:
        recipe_with(s, price)
    assert says in str(e.value) and "gpu_hour_cost" in str(e.value)


def test_recipe_has_no_default_price():
    s = make_summary({"bf16": {}})
    assert recipe_with(s, None).throughput.gpu_hour_cost is None
    assert recipe_with(s).throughput.gpu_hour_cost.amount == 3.6


def test_pareto_front_flips_on_the_cost_axis():
    P = fa.FrontierPoint
    pts = [P("bf16", 1.0, 0.60, True), P("fp8-a", 0.5, 0.59, False),
           P("fp8-b", 0.6, 0.55, False),   # dearer and less accurate than fp8-a: dominated
           P("fp8-c", 0.4, 0.50, False), P("fp8-d", 0.4, 0.45, False)]  # as cheap as c, less accurate
    assert [p.name for p in fa.pareto_front(pts, lower_is_better=True)] == ["fp8-c", "fp8-a", "bf16"]
    # read as a throughput (higher is better) the same numbers give another front: the flip matters
    assert [p.name for p in fa.pareto_front(pts)] == ["bf16"]
    assert fa.lower_is_better("cost.per_1m_output_tokens.slo") and not fa.lower_is_better("tput.output_tok_s")


def test_frontier_draws_the_cost_chart_with_the_price(tmp_path):
    from suite.outputs import frontier

    s = priced_run()
    for v, acc in zip(s.variants, (0.60, 0.59, 0.61)):
        v.metrics["acc.mean"] = acc
    res = frontier.run(fa.FrontierConfig(s, tmp_path / "frontier.png", out_html=tmp_path / "frontier.html"))
    assert res.pareto == ["fp8-tp"]  # 2,000 tok/s at 0.61: as fast as fp8 and more accurate, faster than bf16
    assert res.cost_png == tmp_path / "frontier-cost.png" and res.cost_png.read_bytes()[:4] == b"\x89PNG"
    # per 1M tokens: fp8 0.5 USD (0.59), bf16 1.0 (0.60), fp8-tp 2.0 on 4 GPUs (0.61): none is cheaper and as accurate
    assert res.cost_pareto == ["fp8", "bf16", "fp8-tp"]
    page = res.html.read_text()
    assert "acc.mean against cost" in page and "USD/1M output tokens" in page and PRICE["source"] in page
    # a cost metric as the axis itself: the front flips there too
    res = frontier.run(fa.FrontierConfig(s, tmp_path / "c.png", throughput="cost.per_1m_output_tokens"))
    assert res.pareto == ["fp8", "bf16", "fp8-tp"] and res.cost_png is None


def test_a_long_price_source_is_wrapped_onto_the_cost_chart_not_clipped(tmp_path):
    """The study's source line (a URL, a date, another quote seen) was wider than the chart: matplotlib could not
    lay the figure out and the end of the assumption fell off the PNG (H200 study, stretch 5)."""
    import warnings

    from suite.outputs import frontier

    source = ("ASSUMPTION: public on-demand list price of one H200 SXM GPU-hour, Spheron, as of 2026-03-17 "
              "(https://www.spheron.network/blog/nvidia-h200-vs-b200-vs-gb200); other public H200 on-demand "
              "quotes seen: USD 3.50 (gpuaas.com, 2026-05-26). Replace with your own rate.")
    s = priced_run({**PRICE, "source": source})
    for v in s.variants:
        v.metrics["acc.mean"] = 0.5
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Tight layout not applied")  # matplotlib's, a UserWarning
        res = frontier.run(fa.FrontierConfig(s, tmp_path / "f.png"))
    assert res.cost_png.read_bytes()[:4] == b"\x89PNG"


def test_the_slo_frontier_leaves_out_rates_not_checked_as_steady(tmp_path, capsys):
    """The study's four benchmarks from before the steadiness check put burst rates on the SLO chart: fp8-dynamic
    'sustained' 20,714 tok/s against 18,675 at saturation. A rate the gate would not judge is no point there."""
    from types import SimpleNamespace

    from suite.cli.report import cmd_frontier
    from suite.outputs import frontier

    s = priced_run()
    for v, acc in zip(s.variants, (0.60, 0.59, 0.61)):
        v.metrics["acc.mean"] = acc
    s.variants[0].result(BenchmarkResult).slo.steady = True  # bf16 checked; fp8's rate unchecked (None); fp8-tp found none
    for key in ("tput.sustainable_output_tok_s", "cost.per_1m_output_tokens.slo"):
        res = frontier.run(fa.FrontierConfig(s, tmp_path / "f.png", throughput=key, out_html=tmp_path / "f.html"))
        assert [p.name for p in res.points] == ["bf16"] and res.left_out == ["fp8"]
        assert "Not shown: fp8." in res.html.read_text()
    assert frontier.run(fa.FrontierConfig(s, tmp_path / "g.png")).left_out == []  # saturation: every point
    s.variants[1].result(BenchmarkResult).slo.steady = True
    assert fa.left_out([s], "acc.mean", "tput.sustainable_output_tok_s") == []
    s.variants[1].result(BenchmarkResult).slo.steady = None
    run_dir = tmp_path / "run"
    for v, acc in zip(s.variants, (0.60, 0.59, 0.61)):  # the records acc.mean comes from, in the run folder
        v.stages[EVALUATE] = EvaluateResult(scores=[TaskScore(task=t, metric="acc,none", value=acc, n=100) for t in s.tasks],
                                    results_file="r.json", wall_s=1, engine_load_s=1)
    run_folder(run_dir, s)
    args = SimpleNamespace(runs=[str(run_dir)], out=str(tmp_path / "cli"), accuracy="acc.mean", throughput="slo")
    assert cmd_frontier(args) == 0
    assert "not shown: fp8: the SLO rate's steadiness was not checked" in capsys.readouterr().out
    # none checked (every result from before the check): no chart, and the refusal says why, not "no metrics"
    edit_record(run_dir, "bf16", "benchmark.result.json", lambda d: d["slo"].update(steady=None))
    assert cmd_frontier(args) == 2
    assert "left out: bf16, fp8, whose SLO rate's steadiness was not checked" in capsys.readouterr().err


def test_frontier_without_price_or_with_mixed_currencies_has_no_cost_chart(tmp_path):
    from suite.outputs import frontier

    plain = priced_run(price=None)
    for v in plain.variants:
        v.metrics["acc.mean"] = 0.5
    res = frontier.run(fa.FrontierConfig(plain, tmp_path / "f.png"))
    assert res.png and res.cost_png is None and not (tmp_path / "f-cost.png").exists()
    a, b = priced_run(), priced_run({**PRICE, "currency": "EUR"})
    for v in a.variants + b.variants:
        v.metrics["acc.mean"] = 0.5
    b.run_dir = "/tmp/other"
    res = frontier.run(fa.FrontierConfig(None, tmp_path / "m.png", summaries=[a, b], out_html=tmp_path / "m.html"))
    assert res.png and res.cost_png is None and "different currencies" in res.html.read_text()


def test_cli_summary_shows_one_cost_column_when_priced(capsys):
    from suite.cli.render import print_summary

    print_summary(priced_run())
    out = capsys.readouterr().out
    assert "USD/1M out" in out and "0.500" in out and "2.000" in out and PRICE["source"] in out
    print_summary(priced_run(price=None))
    assert "/1M out" not in capsys.readouterr().out


def test_mlflow_gets_the_cost_metrics_and_the_price_as_params(tmp_path):
    from mlflow.tracking import MlflowClient

    from suite.outputs import mlflow as track

    s = priced_run()
    s.run_dir = str(tmp_path / "run")
    uri = track.default_uri(tmp_path)
    res = track.run(track.TrackConfig(s, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts"))
    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(res.info.parent_run_id).data
    assert parent.params["cost.gpu_hour"] == "3.6" and parent.params["cost.currency"] == "USD"
    assert parent.params["cost.source"] == PRICE["source"]
    fp8 = client.get_run(res.info.variant_run_ids["fp8"]).data
    assert fp8.metrics["cost.per_1m_output_tokens"] == pytest.approx(0.5)
    assert fp8.metrics["cost.per_1m_output_tokens.slo.ratio"] == pytest.approx(0.3125)
    assert fp8.params["cost.source"] == PRICE["source"] and fp8.params["variant"] == "fp8"


def test_a_burst_slo_rate_is_left_out_warned_and_refused_by_the_gate():
    # fp8's SLO search decided on a probe that stayed a burst (suite.stages.benchmark.slo): its rate is not a
    # sustained one, so no tput.sustainable_rate, no SLO cost, a warning, and a gate that needs it says why
    from suite.analysis import gate
    from suite.recipe import GateSpec

    s = make_summary({"bf16": {}, "fp8": {}})
    for v, b in zip(s.variants, (bench(1000.0, 500.0), bench(2000.0, 1600.0))):
        v.stages = {BENCHMARK: b}
    s.variants[1].result(BenchmarkResult).slo = s.variants[1].result(BenchmarkResult).slo.model_copy(update={
        "steady": False, "probes": [{"rate": 8.0, "meets": True}],
        "note": "the probe at 8 req/s was a burst even with 6000 prompts (slo.max_num_prompts): not a sustained rate"})
    s = finish(s, recipe_with(s), {}, {})
    bf16, fp8 = (v.metrics for v in s.variants)
    assert "tput.sustainable_rate" in bf16 and "tput.sustainable_rate" not in fp8
    assert "cost.per_1m_output_tokens.slo" not in fp8 and fp8["cost.per_1m_output_tokens"] == pytest.approx(0.5)
    (w,) = [w for w in s.warnings if "burst" in w]
    assert w.startswith("fp8: the SLO search's deciding probe was a burst") and "left out" in w
    r = gate.run(gate.GateConfig(s, GateSpec(min_sustainable_rate_gain=1.1)))
    assert not r.passed and not r.checks
    assert any("fp8: tput.sustainable_rate" in m and "was a burst" in m and "max_num_prompts" in m for m in r.missing)
    # a result made before the check (steady unknown) keeps its rate, with a warning that it was not checked
    s = make_summary({"bf16": {}, "fp8": {}})
    for v, b in zip(s.variants, (bench(1000.0, 500.0), bench(2000.0, 1600.0))):
        v.stages = {BENCHMARK: b}
        v.stages[BENCHMARK].slo.probes = [{"rate": 8.0, "meets": True}]
    s = finish(s, recipe_with(s), {}, {})
    assert all("tput.sustainable_rate" in v.metrics for v in s.variants)
    assert len([w for w in s.warnings if "was not checked" in w]) == 2
    # ... but the gate does not judge an unchecked rate (nor one whose 'steady' a tampered summary dropped)
    r = gate.run(gate.GateConfig(s, GateSpec(min_sustainable_rate_gain=0.5)))
    assert not r.passed and not [c for c in r.checks if "sustainable" in c.gate]
    unchecked = [m for m in r.missing if "not checked for a steady state" in m and "steady_windows" in m]
    assert len(unchecked) == 2 and [n for n in ("bf16", "fp8") if any(f"{n}: tput.sustainable_rate" in m
                                                                        for m in unchecked)] == ["bf16", "fp8"]
    # checked and steady on both sides: judged
    for v in s.variants:
        v.stages[BENCHMARK].slo.steady = True
    r = gate.run(gate.GateConfig(s, GateSpec(min_sustainable_rate_gain=0.5)))
    assert r.passed and [c.gate for c in r.checks] == ["min sustainable-rate gain"]


def test_a_summary_that_keeps_a_bursts_rate_is_still_refused():
    # an adversary (or an older tool) leaves tput.sustainable_rate and its ratio in a summary whose SLO result says the
    # deciding probe was a burst: the gate judges nothing on it, and no sustainable-rate check passes
    from suite.analysis import gate
    from suite.recipe import GateSpec

    s = make_summary({"bf16": {}, "fp8": {}})
    for v, b in zip(s.variants, (bench(1000.0, 500.0), bench(2000.0, 1600.0))):
        v.stages = {BENCHMARK: b}
    s = finish(s, recipe_with(s), {}, {})
    fp8 = s.variants[1]
    assert fp8.metrics["tput.sustainable_rate.ratio"] == 1.0  # both at 8 req/s: it would pass a 1.0 gate
    fp8.stages[BENCHMARK].slo = fp8.stages[BENCHMARK].slo.model_copy(update={"steady": False, "note": "a burst"})
    r = gate.run(gate.GateConfig(s, GateSpec(min_sustainable_rate_gain=1.0)))
    assert not r.passed and not [c for c in r.checks if "sustainable" in c.gate]
    assert any("fp8: tput.sustainable_rate" in m and "was a burst" in m for m in r.missing)
