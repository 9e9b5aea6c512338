"""`suite report`: one self-contained HTML page from a run (gates, accuracy with paired CIs, frontier,
load points with their bottleneck, provenance), checked as HTML and, where Debian's chromium is
installed, rendered headless to a screenshot that must show the tables and the charts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from html.parser import HTMLParser

import pytest

from conftest import make_summary, plan_run, run_cli
from suite.records.summary import RunSummary
from suite.outputs import report
from suite.records.benchmark import BenchmarkResult, LoadPoint, ServerStats, SloResult
from suite.analysis.assemble import with_metrics
from suite.analysis.summary import delta_metrics
from suite.stages.registry import BENCHMARK, EVALUATE, KVCHECK


def in_run_folder(s):
    """The summary's run folder holds the recipe it was made from (recipe.yaml, its sha256 recorded), its plan and
    stage results, as `suite run` leaves it: the report's verdict takes its gates from there
    (``analysis.gate.verdict``), never from the summary."""
    import hashlib
    from pathlib import Path

    import yaml

    text = yaml.safe_dump(s.recipe, sort_keys=False)
    (Path(s.run_dir) / "recipe.yaml").write_text(text)
    s.recipe_sha256 = hashlib.sha256(text.encode()).hexdigest()
    return RunSummary.model_validate(plan_run(s.run_dir, s.model_dump(mode="json")))  # plan.json, stage results


def summary_with_everything(tmp_path):
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.50, "acc.suite_mmlu": 0.60, "acc.mean": 0.55,
                               "tput.output_tok_s": 9000.0},
                      "fp8": {"acc.suite_gsm8k": 0.47, "acc.suite_mmlu": 0.60, "acc.mean": 0.535,
                              "tput.output_tok_s": 12000.0, "acc.suite_gsm8k.delta_ci_low": -0.06,
                              "acc.suite_gsm8k.delta_ci_high": -0.004}},
                     gates={"max_drop": {"suite_gsm8k": 0.02}, "min_throughput_gain": 1.2}, run_dir=str(tmp_path))
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    s.variants[1].paired = [{"task": "suite_gsm8k", "metric": "exact_match,strict-match", "n": 1319, "delta": -0.03,
                             "ci_low": -0.06, "ci_high": -0.004, "gained": 20, "lost": 60, "mcnemar_p": 0.0001,
                             "confidence": 0.95}]
    for v, tok in zip(s.variants, (9000.0, 12000.0)):
        pts = [LoadPoint(label=f"rate-{r}", request_rate=r, output_tok_s=tok * r / 100, req_s=r * 0.9,
                         ttft_p99_ms=120.0, tpot_p99_ms=30.0, output_tok_s_min=tok * r / 110, output_tok_s_max=tok * r / 95,
                         server=ServerStats(samples=10), bottleneck="engine" if r == 100 else "offered-load",
                         bottleneck_reason="the engine had a queue", roofline={"hbm_frac": 0.21, "tensor_frac": 0.44})
               for r in (50, 100)]
        v.stages[BENCHMARK] = BenchmarkResult(points=pts, kv_cache_tokens=900_000, kv_capacity_requests=1171.9, server_start_s=90,
                                      wall_s=300, server_log="/x/server.log", gpu="NVIDIA H200",
                                      slo=SloResult(sustainable_rate=32, bracket_high=48, output_tok_s=6900,
                                                    ttft_p99_ms=124, probes=[{"rate": 32, "meets": True, "why": "ok",
                                                                              "output_tok_s": 6900}]))
    return in_run_folder(s)


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.srcs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.srcs += [v for k, v in attrs if k in ("src", "href", "xlink:href")]

    def handle_data(self, data):
        self.text.append(data)


def test_report_is_self_contained_and_complete(tmp_path):
    s = summary_with_everything(tmp_path)  # its paired figures have no per-item records: the page made in process
    s.variants[1].paired[0]["ci_method"] = "tango"  # the interval's method: beside the CI and the gate's reason
    report.run(report.ReportConfig(s, tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    p = Collect()
    p.feed(page)
    text = " ".join(p.text)
    # nothing external: images are data, the charts' hrefs point inside the page (matplotlib's markers)
    assert "script" not in p.tags and p.srcs and all(src.startswith(("data:", "#")) for src in p.srcs)
    # the drop's interval [0.004, 0.06] straddles max_drop 0.02, the throughput ratio has no interval: inconclusive
    for needle in ("Gates", "INCONCLUSIVE", "straddles the threshold", "max drop suite_gsm8k", "Paired against the baseline", "[-0.0600, -0.0040]", " tango ",
                   "(Tango score interval) straddles the threshold 0.02",
                   "rate-100", "engine", "Sustainable rate under the SLO", "1,172", "NVIDIA H200"):
        assert needle in text, needle
    assert p.tags.count("table") >= 5 and p.tags.count("svg") >= 3  # CI bars, frontier, throughput curve
    assert re.search(r'stroke="#b00"', page)  # the CI entirely below zero is drawn red


def test_report_escapes_names_once(tmp_path):
    """Autoescape: a variant, task or bottleneck reason holding markup comes out as text, escaped once."""
    s = summary_with_everything(tmp_path)
    gate = report.recipe_verdict(s)
    s.variants[1].name = 'fp8<script>alert("x")</script>'
    s.variants[1].paired[0]["task"] = "<script>t</script>&amp;"
    s.tasks = ["suite_gsm8k", "<b>task</b>"]
    s.variants[0].result(BenchmarkResult).points[0].bottleneck_reason = 'queue "full" <b>'
    s.variants[0].result(BenchmarkResult).points[0].server = None  # no statistics to classify again: the recorded reason shows
    s.recipe["description"] = "<i>desc</i> & more"
    page = report.run(report.ReportConfig(s, tmp_path / "report.html", gate=gate)).html.read_text()
    p = Collect()
    p.feed(page)
    text = " ".join(p.text)
    assert "script" not in p.tags and "b" not in p.tags and "i" not in p.tags
    assert "<script>" not in page and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    for needle in ('fp8<script>alert("x")</script>', "<script>t</script>&amp;", "<b>task</b>", "<i>desc</i> & more",
                   'fp8<script>alert("x")</script>: 12000 tok/s'):  # the last: a chart's tooltip
        assert needle in text, needle  # escaped once: the reader sees exactly the name
    assert "&amp;amp;" in page and "&amp;amp;amp;" not in page  # "&amp;" in a name shows as "&amp;", not "&"
    assert 'title="queue &#34;full&#34; &lt;b&gt;"' in page


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_in_headless_chromium(tmp_path):
    from PIL import Image

    s = summary_with_everything(tmp_path)
    out = report.run(report.ReportConfig(s, tmp_path / "report.html")).html
    shot = tmp_path / "shot.png"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1300,2600", out.as_uri()], check=True, capture_output=True, timeout=120)
    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 2600)
    colors = img.getcolors(maxcolors=1 << 20)
    # the page is not blank: table borders/text and the series colours of the charts are on it
    painted = sum(n for n, c in colors if c != (255, 255, 255))
    assert painted > 0.02 * 1300 * 2600
    def near(target, tol=16):  # colour management shifts sRGB values a little
        return sum(n for n, c in colors if all(abs(a - b) <= tol for a, b in zip(c, target)))

    assert near((31, 119, 180)) > 50 and near((214, 39, 40)) > 50  # the two variants' series (#1f77b4, #d62728)
    assert near((176, 0, 0)) > 50  # the red CI bar and the FAIL verdict (#b00)


def summary_with_kv_check_and_perplexity(tmp_path):
    """A run with suite_longppl (the paired perplexity record and metrics as suite.analysis.summary writes them,
    the H200 run's calibrated-skip-layer-0 figures) and a kvcheck result over 6 layers and 3 scale options."""
    from suite.records.evaluate import EvaluateResult, TaskScore
    from suite.records.kvcheck import KVCheckResult

    s = make_summary({"bf16": {"ppl.suite_longppl": 53.5441},
                      "fp8-kv": {"ppl.suite_longppl": 54.7445, "ppl.suite_longppl.delta": 0.9394,
                                 "ppl.suite_longppl.delta_ci_low": 0.7448, "ppl.suite_longppl.delta_ci_high": 1.1191,
                                 "ppl.suite_longppl.docs_paired": 30.0, "ppl.suite_longppl.docs_unpaired": 0.0,
                                 "ppl.suite_longppl.docs_worse": 28.0}},
                     tasks=("suite_longppl",), gates={"max_perplexity_increase": 0.2}, run_dir=str(tmp_path))
    for v, word_ppl in zip(s.variants, (80.1, 82.0)):
        v.metrics["acc.suite_longppl"] = word_ppl
        v.stages[EVALUATE] = EvaluateResult(scores=[TaskScore(task="suite_longppl", metric="word_perplexity,none",
                                                      value=word_ppl, n=30)], results_file="r", wall_s=1, engine_load_s=1)
    fp8 = s.variants[1]
    fp8.perplexity = [{"task": "suite_longppl", "unit": "document", "n": 30, "delta": 0.9394, "ci_low": 0.7448,
                       "ci_high": 1.1191, "ppl": 54.7445, "baseline_ppl": 53.5441, "tokens": 351716, "worse": 28,
                       "unpaired": 0, "unpaired_ids": [], "confidence": 0.95, "ci_method": "BCa"}]
    rows = []
    for layer in range(6):
        for option, err in (("calibrated", 0.03), ("unit", 0.025), ("dynamic", 0.02)):
            bad = layer == 0 and option == "calibrated"
            for tensor in ("k", "v", "attn"):
                flags = ["attention error 1.62x the ideal scale's"] if bad and tensor == "attn" else []
                rows.append({"layer": layer, "option": option, "tensor": tensor, "absmax": 10.0, "scale": 0.3,
                             "clipped_frac": 2e-4 if bad and tensor == "k" else 0.0, "underflow_frac": 0.0,
                             "rel_err": err * (1.62 if bad and tensor == "attn" else 1 + layer / 10 * (option != "dynamic")),
                             "flags": flags})
    fp8.kv_cache_dtype = "fp8"
    fp8.stages[KVCHECK] = KVCheckResult(kv_scales="calibrated", option="calibrated", options=["calibrated", "unit", "dynamic"],
                                num_layers=6, num_texts=2, tokens=1024, rows=rows,
                                flagged=[r for r in rows if r["flags"]], flagged_layers=[0],
                                kl={"calibrated": {"kl": 0.0412, "ppl": 23.1, "ppl_bf16": 22.0, "top1_agree": 0.93},
                                    "unit": {"kl": 0.0031, "ppl": 22.1, "ppl_bf16": 22.0, "top1_agree": 0.98}},
                                recommended="unit", recommended_reason="lowest KL(BF16 || FP8 KV)", wall_s=30.0)
    return in_run_folder(s)


def test_report_shows_the_kv_check_and_the_perplexity_gate(tmp_path):
    s = summary_with_kv_check_and_perplexity(tmp_path)
    gate = report.recipe_verdict(s)
    assert not gate.problems and [c.passed for c in gate.checks] == [False]
    page = report.run(report.ReportConfig(s, tmp_path / "report.html", gate=gate)).html.read_text()
    p = Collect()
    p.feed(page)
    text = " ".join(" ".join(p.text).split())
    for needle in ("Perplexity", "53.5441", "54.7445", "+0.9394", "[+0.7448, +1.1191]", "max perplexity increase suite_longppl",
                   "token-perplexity delta +0.9394 [95% CI +0.7448, +1.1191] over 30 documents",  # the gate's detail
                   "KV-scale check", "fp8-kv: FP8 KV scales (calibrated) on 1024 held-out tokens, 6 layers",
                   "Flagged under calibrated: layer(s) 0", "attn: attention error 1.62x the ideal scale's",
                   "unit (recommended)", "calibrated (in use)", "0.04120", "Recommended kv_scales: unit",
                   "lowest KL(BF16 || FP8 KV)", "2.0e-04", "1.62", "every layer (18 rows)"):
        assert needle in text, needle
    ppl_table = page[page.index("<h2>Perplexity</h2>"):page.index("<h2>KV-scale check</h2>")]
    fp8_row = next(r for r in ppl_table.split("<tr>") if r.startswith('<td class="l">fp8-kv'))
    assert ">30<" in fp8_row and ">28<" in fp8_row and ">0.2<" in fp8_row and "FAIL" in fp8_row
    kv = page[page.index("<h2>KV-scale check</h2>"):]
    shown = kv[:kv.index("<details>")]
    # flagged layer 0 and the 3 worst others by attention error under calibrated (5, 4, 3), under every option
    assert [int(x) for x in re.findall(r'<tr><td class="l">(\d+)</td><td class="l">calibrated', shown)] == [0, 3, 4, 5]
    assert shown.count('<td class="l">unit</td>') == 4 and shown.count('<td class="l">dynamic</td>') == 4
    assert "script" not in p.tags


def test_report_without_kv_check_or_perplexity_has_neither_section(tmp_path):
    page = report.run(report.ReportConfig(summary_with_everything(tmp_path), tmp_path / "r.html")).html.read_text()
    assert "KV-scale check" not in page and "<h2>Perplexity</h2>" not in page


def test_report_shows_cost_with_its_price_and_source(tmp_path):
    """With throughput.gpu_hour_cost: the price, currency and source as the recipe's assumption, a cost table
    (headline point and SLO rate, against the baseline) and accuracy against cost; without: none of it."""
    from suite.analysis.summary import cost_metrics
    from suite.recipe.throughput import GpuHourCost

    s = summary_with_everything(tmp_path)
    for v in s.variants:
        v.metrics["tput.sustainable_output_tok_s"] = 6900.0
    s.cost, costs = cost_metrics(s.variants, GpuHourCost(amount=3.6, currency="EUR", source="quote <b>Q-17</b> & co, 2025-03"))
    s.variants = with_metrics(s.variants, costs)
    page = report.run(report.ReportConfig(s, tmp_path / "report.html")).html.read_text()
    p = Collect()
    p.feed(page)
    text = " ".join(" ".join(p.text).split())
    for needle in ("Cost per 1M output tokens", "Assumed price: 3.6 EUR per GPU hour",
                   "source: quote <b>Q-17</b> & co, 2025-03", "an assumption, not a measurement", "GPU time only",
                   "no idle", "EUR / 1M out", "0.1111", "0.0833", "0.75", "0.1449",  # 3.6e6 / (9,000 | 12,000 | 6,900 x 3,600)
                   "EUR per 1M output tokens (headline point; lower is better)", "fp8: 0.0833 EUR/1M output tokens"):
        assert needle in text, needle
    assert "b" not in p.tags  # the source is text, escaped
    plain = report.run(report.ReportConfig(summary_with_everything(tmp_path), tmp_path / "r.html")).html.read_text()
    assert "Cost per 1M" not in plain and "per GPU hour" not in plain and "/1M output tokens" not in plain


def test_report_marks_an_unstable_point_its_interval_and_an_offline_figure_that_is_no_ceiling(tmp_path):
    s = summary_with_everything(tmp_path)
    bf16 = s.variants[0].result(BenchmarkResult)
    bf16.points[0] = bf16.points[0].model_copy(update={  # the 13x pair of repetitions
        "output_tok_s": 194.0, "repetitions": [{"output_tok_s": 27.0}, {"output_tok_s": 361.0}]})
    bf16.points[1] = bf16.points[1].model_copy(update={  # three tight repetitions, 111% of the offline figure
        "repetitions": [{"output_tok_s": 9000.0}, {"output_tok_s": 9050.0}, {"output_tok_s": 8950.0}],
        "ceiling_fraction": 1.11})
    bf16.offline_tok_s, bf16.offline_preemptions = 8100.0, 412.0
    page = report.run(report.ReportConfig(s, tmp_path / "report.html")).html.read_text()
    assert "27–361 (range)" in page and '<span class="fail">unstable</span>' in page
    assert re.search(r"8,8\d\d–9,\d\d\d \(t\)", page)
    assert "not a ceiling: preempted 412 times; below served point(s) rate-100" in page
    assert "KV capacity (requests)" in page and "peak running (measured)" in page


def _one_task_run(tmp_path, with_intervals: bool):
    """bf16 and fp8 on one task (the C-Eval case of issue 41: 52 items, scores 0.115 / 0.1154), fp8's paired CI and
    both variants' throughput intervals recorded, or none of them."""
    fp8 = {"acc.suite_gsm8k": 0.1154, "acc.mean": 0.1154, "tput.output_tok_s": 330.0}
    base = {"acc.suite_gsm8k": 0.115, "acc.mean": 0.115, "tput.output_tok_s": 194.0}
    if with_intervals:
        fp8.update({"acc.suite_gsm8k.delta_ci_low": -0.04, "acc.suite_gsm8k.delta_ci_high": 0.04,
                    "tput.output_tok_s.ci_low": 300.0, "tput.output_tok_s.ci_high": 360.0})
        base.update({"tput.output_tok_s.ci_low": 27.0, "tput.output_tok_s.ci_high": 361.0})
    s = make_summary({"bf16": base, "fp8": fp8}, tasks=("suite_gsm8k",), run_dir=str(tmp_path))
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    return s


def test_the_frontier_chart_draws_error_bars_labels_and_a_y_axis_of_at_least_two_points(tmp_path):
    svg = str(report.frontier_chart(_one_task_run(tmp_path, True)))
    assert len(re.findall(r'<g id="pt[0-9a-f]{8}-errbar-\d+-\d+">', svg)) >= 3  # x bars of both, fp8's y bar
    assert "output tokens per second (headline load point)" in svg and "mean accuracy (share correct)" in svg
    assert re.search(r'fill: #d62728"[^>]*>fp8</text>', svg) and re.search(r'fill: #1f77b4"[^>]*>bf16 \(baseline\)<', svg)
    low, high = map(float, re.search(r"y axis (\d\.\d+) to (\d\.\d+)", svg).groups())
    assert high - low >= 0.0799  # fp8's CI (+-0.04) fits; at least 0.02 wide in any case
    assert "errbar" not in str(report.frontier_chart(_one_task_run(tmp_path, False)))


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_frontier_error_bars_are_drawn_in_headless_chromium(tmp_path):
    from PIL import Image

    browser = shutil.which("chromium") or shutil.which("chromium-browser")

    def painted(with_intervals: bool) -> int:
        page = tmp_path / f"chart-{with_intervals}.html"
        page.write_text(f"<html><body>{report.frontier_chart(_one_task_run(tmp_path, with_intervals))}</body></html>")
        shot = tmp_path / f"shot-{with_intervals}.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                        "--window-size=700,500", page.as_uri()], check=True, capture_output=True, timeout=120)
        colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
        return sum(n for n, c in colors if all(abs(a - b) <= 40 for a, b in zip(c, (214, 39, 40))))  # fp8's red

    assert painted(True) > painted(False) + 40  # the red error bars add pixels beyond fp8's dot and label


def test_the_frontier_is_drawn_once_and_its_axes_stay_meaningful(tmp_path):
    """The report draws the frontier once (the chart with error bars; frontier.png stays a file, not a second
    picture on the page); an accuracy of 0 draws no negative accuracy axis; the x axis spans the points, not 0."""
    s = summary_with_everything(tmp_path)
    png = tmp_path / "frontier.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")  # the file the frontier sink writes: present, yet not drawn again
    s.artifacts["frontier_png"] = str(png)
    (tmp_path / "summary.json").write_text(s.model_dump_json())
    assert run_cli("report", str(tmp_path)).returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert 'alt="frontier"' not in page and "output tokens per second (headline load point)" in page
    zero = make_summary({"bf16": {"acc.suite_gsm8k": 0.0, "acc.suite_mmlu": 0.0, "acc.mean": 0.0,
                                  "tput.output_tok_s": 9000.0},
                         "fp8": {"acc.suite_gsm8k": 0.0, "acc.suite_mmlu": 0.0, "acc.mean": 0.0,
                                 "tput.output_tok_s": 12000.0}}, run_dir=str(tmp_path))
    low, high = map(float, re.search(r"y axis (-?\d\.\d+) to (\d\.\d+)", str(report.frontier_chart(zero))).groups())
    assert low == 0.0 and high >= 0.02


def test_labels_of_points_on_one_spot_do_not_overlap():
    """Two variants of nearly equal throughput and accuracy: their labels are moved apart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from suite.outputs.plots import _spread_labels

    fig, ax = plt.subplots(figsize=(6, 3), dpi=96)
    for name in ("fp8-static", "fp8-dynamic", "fp8-static-kv"):
        ax.annotate(name, (10000.0, 0.5), textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax.set_xlim(0, 20000)
    ax.set_ylim(0, 1)
    _spread_labels(fig, ax)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    plt.close(fig)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_report_states_the_looks_items_used_and_saved_of_a_sequential_evaluation(tmp_path):
    from suite.records.evaluate import EvaluateResult, SequentialTask

    s = summary_with_everything(tmp_path)
    assert "eval.sequential looks" not in report.run(report.ReportConfig(s, tmp_path / "a.html")).html.read_text()
    rec = SequentialTask(metric="acc,none", margin=0.02, n_items=14042, seed=0, looks_planned=4, looks_scored=2,
                         items_used=7021, items_saved=7021, decision="pass")
    s.variants[1].stages[EVALUATE] = EvaluateResult(scores=[], results_file="r", wall_s=1, engine_load_s=1,
                                            sequential={"suite_mmlu": rec})
    p = Collect()
    p.feed(report.run(report.ReportConfig(s, tmp_path / "b.html")).html.read_text())
    text = " ".join(p.text)
    for needle in ("eval.sequential looks", "2 of 4", "7021 of 14042", "7021", "pass"):
        assert needle in text, needle


def test_the_page_written_during_a_tracked_run_says_it_is_being_logged(tmp_path):
    """The report sink writes its page before MLflow logs the run: a tracked run's page says it is being logged,
    not "tracking off"; an untracked run's says tracking is off."""
    from suite.outputs.sinks import TRACKING_NEXT, PublishContext, write_report

    s = summary_with_everything(tmp_path)
    for track, said in ((True, TRACKING_NEXT), (False, "not logged to MLflow (tracking off)")):
        ctx = PublishContext(out_root=tmp_path, track=track, resumed=False, report=lambda *a: None)
        page = Path(write_report(s, tmp_path, ctx)["report_html"]).read_text()
        text = " ".join(page.split())
        assert said.replace("`", "") in text.replace("<code>", "").replace("</code>", "").replace("`", ""), track
        assert ("tracking off" in text) is (not track)


def test_the_throughput_table_shows_a_gated_points_repetitions_of_its_maximum_and_why_it_stopped(tmp_path):
    """throughput.adaptive_repetitions: "2 of 3" with the reason on hover; a fixed-count point shows its count."""
    s = summary_with_everything(tmp_path)
    rows = [{"output_tok_s": 12000.0}, {"output_tok_s": 12100.0}]
    gated = s.variants[1].result(BenchmarkResult).points[1].model_copy(update={"repetitions": rows, "repetitions_max": 3,
                                                                 "stopped": "decided after 2"})
    s.variants[1].result(BenchmarkResult).points[1] = gated
    html = report.run(report.ReportConfig(s, tmp_path / "r.html")).html.read_text()
    said = r'<span title="decided after 2: repeated until the throughput gates were decided[^"]*">2 of 3</span>'
    assert re.search(said, html)
    assert "repetitions (hover: why)" in html


def test_report_shows_the_served_check_and_its_first_disagreement(tmp_path):
    s = summary_with_everything(tmp_path)
    s.variants[1].served_agreement = [
        {"version": 1, "task": "suite_gsm8k", "metric": "exact_match,strict-match", "exact": False, "ll_atol": None,
         "items": 20, "disagree": 1, "unmatched": 0,
         "differing": [{"subtask": "suite_gsm8k", "doc_id": 7, "what": "score 1.0 served, 0.0 in-process"}]}]
    report.run(report.ReportConfig(s, tmp_path / "report.html"))
    p = Collect()
    p.feed((tmp_path / "report.html").read_text())
    text = " ".join(p.text)
    for needle in ("Served check", "scores only", "suite_gsm8k/7: score 1.0 served, 0.0 in-process"):
        assert needle in text, needle
