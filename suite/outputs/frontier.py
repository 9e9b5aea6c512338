"""The frontier chart and page: accuracy against output throughput, the Pareto front drawn (``suite frontier``).

For one run, or across runs and recipes (``suite frontier RUN...``); the points and the front are
``suite.analysis.frontier``'s.

A point is on the front when no other point is at least as accurate and at least as fast, and strictly
better in one of the two. Accuracy: ``acc.mean`` or one task's ``acc.<task>``; throughput: the headline
load point (``tput.output_tok_s``, saturation) or the sustainable rate under the SLO
(``tput.sustainable_output_tok_s``). Output: a PNG, and optionally a self-contained HTML page (one
chart per accuracy metric, each point's figures on hover, the table of points with the front marked):
``templates/frontier.html.j2``, its charts drawn by matplotlib (``suite.outputs.plots``).
"""

from __future__ import annotations

from pathlib import Path

from suite.analysis.frontier import FrontierConfig, FrontierResult, collect, pareto_front
from suite.analysis.records import RunSummary


def run(config: FrontierConfig) -> FrontierResult:
    runs = config.runs()
    points = collect(runs, config.accuracy, config.throughput)
    front = pareto_front(points)
    if not points:
        return FrontierResult(points, [], None)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for p in points:
        ax.scatter(p.throughput, p.accuracy, s=80, marker="s" if p.is_baseline else "o",
                   color="tab:gray" if p.is_baseline else "tab:blue", zorder=3)
        ax.annotate(p.name + (" (baseline)" if p.is_baseline else ""), (p.throughput, p.accuracy),
                    textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.plot([p.throughput for p in front], [p.accuracy for p in front], "--o", color="tab:red",
            markerfacecolor="none", markersize=14, label="Pareto front", zorder=2)
    ax.margins(x=0.25, y=0.25)
    ax.set_xlabel("output throughput (tok/s)" + (" at the SLO rate" if "sustainable" in config.throughput else ""))
    ax.set_ylabel("accuracy, mean over tasks" if config.accuracy == "acc.mean" else config.accuracy)
    title = runs[0].recipe_name if len({r.recipe_name for r in runs}) == 1 else f"{len(runs)} runs"
    ax.set_title(f"{title}: accuracy vs throughput ({', '.join(sorted({r.platform for r in runs}))})")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    config.out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(config.out_png)
    plt.close(fig)
    html = write_html(config, runs) if config.out_html else None
    return FrontierResult(points, [p.name for p in front], config.out_png, html)


def write_html(config: FrontierConfig, runs: list[RunSummary]) -> Path:
    """One chart per accuracy metric (mean, then each task), hover for figures; the table of points
    (``templates/frontier.html.j2``)."""
    from suite.outputs.plots import render, scatter_svg

    keys = ["acc.mean"] + sorted({k for r in runs for v in r.variants for k in v.metrics
                                  if k.startswith("acc.") and k.count(".") == 1 and k != "acc.mean"})
    charts = []
    for key in keys:
        pts = collect(runs, key, config.throughput)
        if not pts:
            continue
        front = {p.name for p in pareto_front(pts)}
        series = {"Pareto front": [], "dominated": [], "baseline": []}
        for p in pts:
            tip = f"{p.name}: {p.throughput:,.0f} tok/s, {key} {p.accuracy:.4f}" + (" (on the front)" if p.name in front else "")
            series["baseline" if p.is_baseline else ("Pareto front" if p.name in front else "dominated")].append(
                (p.throughput, p.accuracy, tip))
        chart = scatter_svg({k: v for k, v in series.items() if v}, config.throughput, key, line=False)
        charts.append({"key": key, "chart": chart, "points": pts, "front": front})
    page = render("frontier.html.j2", throughput=config.throughput, charts=charts)
    config.out_html.parent.mkdir(parents=True, exist_ok=True)
    config.out_html.write_text(page, encoding="utf-8")
    return config.out_html
