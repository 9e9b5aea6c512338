"""`suite report`: one self-contained HTML page from a run (gates, accuracy with paired CIs, frontier,
load points with their bottleneck, provenance), checked as HTML and, where Debian's chromium is
installed, rendered headless to a screenshot that must show the tables and the charts."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import make_summary, run_cli
from suite.outputs import report
from suite.stages.benchmark.records import BenchmarkResult, LoadPoint, ServerStats, SloResult
from suite.analysis.summary import add_deltas


def summary_with_everything(tmp_path):
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.50, "acc.suite_mmlu": 0.60, "acc.mean": 0.55,
                               "tput.output_tok_s": 9000.0},
                      "fp8": {"acc.suite_gsm8k": 0.47, "acc.suite_mmlu": 0.60, "acc.mean": 0.535,
                              "tput.output_tok_s": 12000.0, "acc.suite_gsm8k.delta_ci_low": -0.06,
                              "acc.suite_gsm8k.delta_ci_high": -0.004}},
                     gates={"max_drop": {"suite_gsm8k": 0.02}, "min_throughput_gain": 1.2}, run_dir=str(tmp_path))
    add_deltas(s.variants)
    s.variants[1].paired = [{"task": "suite_gsm8k", "metric": "exact_match,strict-match", "n": 1319, "delta": -0.03,
                             "ci_low": -0.06, "ci_high": -0.004, "gained": 20, "lost": 60, "mcnemar_p": 0.0001,
                             "confidence": 0.95}]
    for v, tok in zip(s.variants, (9000.0, 12000.0)):
        pts = [LoadPoint(label=f"rate-{r}", request_rate=r, output_tok_s=tok * r / 100, req_s=r * 0.9,
                         ttft_p99_ms=120.0, tpot_p99_ms=30.0, output_tok_s_min=tok * r / 110, output_tok_s_max=tok * r / 95,
                         server=ServerStats(samples=10), bottleneck="engine" if r == 100 else "offered-load",
                         bottleneck_reason="the engine had a queue", roofline={"hbm_frac": 0.21, "tensor_frac": 0.44})
               for r in (50, 100)]
        v.benchmark = BenchmarkResult(points=pts, kv_cache_tokens=900_000, peak_concurrency=1171.9, server_start_s=90,
                                      wall_s=300, server_log="/x/server.log", gpu="NVIDIA H200",
                                      slo=SloResult(sustainable_rate=32, bracket_high=48, output_tok_s=6900,
                                                    ttft_p99_ms=124, probes=[{"rate": 32, "meets": True, "why": "ok",
                                                                              "output_tok_s": 6900}]))
    return s


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
    s = summary_with_everything(tmp_path)
    (tmp_path / "summary.json").write_text(s.model_dump_json())
    res = run_cli("report", str(tmp_path))
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "report.html").read_text()
    p = Collect()
    p.feed(page)
    text = " ".join(p.text)
    # nothing external: images are data, the charts' hrefs point inside the page (matplotlib's markers)
    assert "script" not in p.tags and p.srcs and all(src.startswith(("data:", "#")) for src in p.srcs)
    for needle in ("Gates", "FAIL", "max drop suite_gsm8k", "Paired against the baseline", "[-0.0600, -0.0040]",
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
    s.variants[0].benchmark.points[0].bottleneck_reason = 'queue "full" <b>'
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
