"""The frontier page (`suite frontier`, issue 41 part 4) shows what is known: error bars on both axes, point labels,
axes in words with units, an accuracy axis that does not turn one item into a cliff, a legend that does not colour
the baseline as off the front; and it agrees with the report's chart (same points, same bars)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from test_report import _one_task_run

from suite.analysis.frontier import FrontierConfig
from suite.outputs import frontier, plots, report


def page_of(tmp_path, with_intervals: bool = True) -> str:
    s = _one_task_run(tmp_path, with_intervals)
    res = frontier.run(FrontierConfig(s, tmp_path / "frontier.png", out_html=tmp_path / "frontier.html"))
    assert res.png.is_file()
    return res.html.read_text()


def first_chart(page: str) -> str:
    return page[page.index("<svg"):page.index("</svg>")]


def test_the_page_draws_error_bars_labels_and_named_axes(tmp_path):
    svg = first_chart(page_of(tmp_path))
    # x bars of both points (their repetitions' interval), fp8's accuracy bar (the paired CI of its delta)
    assert len(re.findall(r'<g id="pt[0-9a-f]{8}-errbar-\d+-\d+">', svg)) >= 3
    assert ">fp8</text>" in svg and ">bf16 (baseline)</text>" in svg  # each point labelled with its name
    assert "output throughput (tok/s)" in svg and "accuracy, mean over tasks (share correct)" in svg
    assert "tput.output_tok_s" not in svg and ">acc.mean<" not in svg  # no raw metric key on an axis
    low, high = map(float, re.search(r"y axis (\d\.\d+) to (\d\.\d+)", svg).groups())
    assert high - low >= plots.MIN_ACCURACY_SPAN
    assert "paired 95% CI" in svg and "repetitions" in svg  # what the bars are, under the chart
    assert "errbar" not in first_chart(page_of(tmp_path, with_intervals=False))


def test_a_baseline_on_the_front_is_not_coloured_as_off_it(tmp_path):
    # bf16 (0.115, 194 tok/s) and fp8 (0.1154, 330 tok/s): fp8 dominates, the baseline is off the front
    assert ">baseline, off the front</text>" in first_chart(page_of(tmp_path))
    s = _one_task_run(tmp_path, True)
    s.variants[0].metrics["acc.mean"] = 0.2  # now the baseline is the most accurate: on the front
    html = frontier.run(FrontierConfig(s, tmp_path / "f2.png", out_html=tmp_path / "f2.html")).html.read_text()
    assert ">baseline, on the front</text>" in first_chart(html) and "off the front" not in first_chart(html)


def test_a_mean_over_several_tasks_says_it_has_no_accuracy_bar(tmp_path):
    s = _one_task_run(tmp_path, True)
    s.tasks = ["suite_gsm8k", "suite_mmlu"]
    html = frontier.run(FrontierConfig(s, tmp_path / "f.png", out_html=tmp_path / "f.html")).html.read_text()
    assert "no accuracy error bar for the mean over several tasks" in first_chart(html)


def test_the_report_and_the_frontier_page_draw_the_same_points_and_bars(tmp_path, monkeypatch):
    drawn = []

    def spy(series, xlabel, ylabel, **kw):
        drawn.append(sorted((x, y, kw["errors"][tip]) for ps in series.values() for x, y, tip in ps))
        return real(series, xlabel, ylabel, **kw)

    real = plots.scatter_svg
    monkeypatch.setattr(report, "scatter_svg", spy)
    monkeypatch.setattr(plots, "scatter_svg", spy)  # the page imports it from plots when it writes
    s = _one_task_run(tmp_path, True)
    report.frontier_chart(s)
    frontier.run(FrontierConfig(s, tmp_path / "f.png", out_html=tmp_path / "f.html"))
    report_points, page_points = drawn[0], drawn[1]  # the page's first chart: acc.mean against throughput
    assert report_points == page_points
    assert sum(1 for _, _, (xe, ye) in page_points for e in (xe, ye) if e) == 3


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_frontier_pages_error_bars_are_drawn_in_headless_chromium(tmp_path):
    from PIL import Image

    browser = shutil.which("chromium") or shutil.which("chromium-browser")

    def painted(with_intervals: bool) -> int:
        folder = tmp_path / str(with_intervals)
        folder.mkdir()
        page = folder / "frontier.html"
        page.write_text(f"<html><body>{first_chart(page_of(folder, with_intervals))}</svg></body></html>")
        shot = folder / "shot.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                        "--window-size=700,500", page.as_uri()], check=True, capture_output=True, timeout=120)
        colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
        # the series' colours: 'Pareto front' #1f77b4 (fp8), 'baseline, off the front' #d62728
        return sum(n for n, c in colors if any(all(abs(a - b) <= 40 for a, b in zip(c, ref))
                                               for ref in ((214, 39, 40), (31, 119, 180))))

    assert painted(True) > painted(False) + 40  # the error bars add pixels beyond the dots and labels
