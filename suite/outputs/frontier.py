"""The frontier chart and page: accuracy against output throughput (and cost), the Pareto front drawn (``suite frontier``).

For one run, or across runs and recipes (``suite frontier RUN...``); the points and the front are
``suite.analysis.frontier``'s.

A point is on the front when no other point is at least as accurate and at least as good on the other
axis, and strictly better in one of the two. Accuracy: ``acc.mean`` or one task's ``acc.<task>``;
throughput: the headline load point (``tput.output_tok_s``, saturation) or the sustainable rate under the
SLO (``tput.sustainable_output_tok_s``). When the runs' recipes price a GPU hour (``throughput.gpu_hour_cost``,
one currency across the runs), a second chart puts accuracy against the cost per 1M output tokens at the
same load point (``cost.per_1m_output_tokens[.slo]``; lower is better there, and the front flips):
``<png stem>-cost.png``. ``FrontierConfig.throughput`` may also name a cost metric itself. Output: PNGs,
and optionally a self-contained HTML page (per accuracy metric a throughput chart and a cost chart, each
point's figures on hover, the tables of points with the front marked, the prices and their sources):
``templates/frontier.html.j2``, its charts drawn by matplotlib (``suite.outputs.plots``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from suite.analysis.frontier import (COST_OF, FrontierConfig, FrontierResult, bar_notes, collect, cost_currency,
                                     left_out, lower_is_better, pareto_front)
from suite.analysis.summary import metric_name
from suite.outputs import plots
from suite.outputs.plots import MIN_ACCURACY_SPAN
from suite.records.summary import RunSummary
from suite.records.evaluate import EvaluateResult


def points_of(runs: list[RunSummary], accuracy: str, x: str):
    """The points on ``x`` and their front (flipped for a cost); no points for a cost whose runs mix currencies."""
    if lower_is_better(x) and cost_currency(runs) is None:
        return [], []
    pts = collect(runs, accuracy, x)
    return pts, pareto_front(pts, lower_is_better(x))


def x_label(x: str, runs: list[RunSummary]) -> str:
    slo = " at the SLO rate" if ("sustainable" in x or x.endswith(".slo")) else ""
    if lower_is_better(x):
        return f"{cost_currency(runs)} per 1M output tokens{slo} (GPU time only; lower is better)"
    return f"output throughput (tok/s){slo}"


def y_label(key: str, runs: list[RunSummary]) -> str:
    """The accuracy axis in words: 'mean accuracy over tasks (share correct)', or a task's name and metric."""
    if key == "acc.mean":
        return "accuracy, mean over tasks (share correct)"
    task = key.removeprefix("acc.")
    metric = next((sc.metric for r in runs for v in r.variants if (ev := v.result(EvaluateResult)) for sc in ev.scores
                   if metric_name("acc", sc.task) == key), None)
    return f"{task} score ({metric.split(',')[0]}, 0 to 1)" if metric else f"{task} score (0 to 1)"


def run(config: FrontierConfig) -> FrontierResult:
    runs = config.runs()
    points, front = points_of(runs, config.accuracy, config.throughput)
    missing = left_out(runs, config.accuracy, config.throughput)
    if not points:
        return FrontierResult(points, [], None, left_out=missing)
    draw(runs, config, points, front, config.throughput, config.out_png)
    cost_png, cost_front = None, []
    if (cost := COST_OF.get(config.throughput)) is not None:
        cpts, cfront = points_of(runs, config.accuracy, cost)
        if cpts:
            cost_png = config.out_png.with_name(f"{config.out_png.stem}-cost{config.out_png.suffix}")
            draw(runs, config, cpts, cfront, cost, cost_png)
            cost_front = [p.name for p in cfront]
    html = write_html(config, runs) if config.out_html else None
    return FrontierResult(points, [p.name for p in front], config.out_png, html, cost_png, cost_front, missing)


def draw(runs: list[RunSummary], config: FrontierConfig, points, front, x: str, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for p in points:
        ax.scatter(p.throughput, p.accuracy, s=80, marker="s" if p.is_baseline else "o",
                   color="tab:gray" if p.is_baseline else "tab:blue", zorder=3)
        if p.x_interval or p.y_interval:  # as the page and the report draw them (analysis.frontier.intervals)
            xe = [[max(0.0, p.throughput - p.x_interval[0])], [max(0.0, p.x_interval[1] - p.throughput)]] \
                if p.x_interval else None
            ye = [[max(0.0, p.accuracy - p.y_interval[0])], [max(0.0, p.y_interval[1] - p.accuracy)]] \
                if p.y_interval else None
            ax.errorbar([p.throughput], [p.accuracy], xerr=xe, yerr=ye, fmt="none", capsize=3, elinewidth=1.2,
                        ecolor="tab:gray" if p.is_baseline else "tab:blue", zorder=2)
        ax.annotate(p.name + (" (baseline)" if p.is_baseline else ""), (p.throughput, p.accuracy),
                    textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.plot([p.throughput for p in front], [p.accuracy for p in front], "--o", color="tab:red",
            markerfacecolor="none", markersize=14, label="Pareto front", zorder=2)
    ax.margins(x=0.25, y=0.25)
    low, high = ax.get_ylim()
    if high - low < MIN_ACCURACY_SPAN:  # one item of a small task is no cliff
        ax.set_ylim((low + high) / 2 - MIN_ACCURACY_SPAN / 2, (low + high) / 2 + MIN_ACCURACY_SPAN / 2)
    low, high = ax.get_ylim()
    ax.set_xlabel(x_label(x, runs))
    ax.set_ylabel(y_label(config.accuracy, runs))
    title = runs[0].recipe_name if len({r.recipe_name for r in runs}) == 1 else f"{len(runs)} runs"
    what = "cost" if lower_is_better(x) else "throughput"
    ax.set_title(f"{title}: accuracy vs {what} ({', '.join(sorted({r.platform for r in runs}))})")
    bottom, notes = 0.0, [f"accuracy axis {low:.3f} to {high:.3f}; " + "; ".join(bar_notes(runs, config.accuracy, x))]
    if lower_is_better(x):
        notes.append("price: " + "; ".join(price_notes(runs)))
    if missing := left_out(runs, config.accuracy, x):
        notes.append(f"not shown: {', '.join(missing)} (the SLO rate's steadiness was not checked: it may be a burst's)")
    if notes:
        # under the axes, wrapped to the figure's width: a recipe's price source is often longer than the chart (a
        # URL, a date, alternatives seen), and clipped it would hide the assumption
        note = "\n".join(textwrap.fill(n, width=130) for n in notes)
        fig.text(0.01, 0.01, note, fontsize=6.5, color="tab:gray", va="bottom", ha="left", parse_math=False)
        bottom = 0.03 + 0.025 * (note.count("\n") + 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def price_notes(runs: list[RunSummary]) -> list[str]:
    """Each distinct GPU-hour price of the runs, with its source: the assumption the cost figures rest on."""
    notes = {f"{r.cost.gpu_hour:g} {r.cost.currency}/GPU-hour (assumed; source: {r.cost.source})"
             for r in runs if r.cost is not None}
    return sorted(notes)


def write_html(config: FrontierConfig, runs: list[RunSummary]) -> Path:
    """Per accuracy metric (mean, then each task) a chart against throughput and, with prices, one against
    cost; hover for figures; the tables of points (``templates/frontier.html.j2``)."""
    keys = ["acc.mean"] + sorted({k for r in runs for v in r.variants for k in v.metrics
                                  if k.startswith("acc.") and k.count(".") == 1 and k != "acc.mean"})
    xs = [config.throughput] + [c for c in [COST_OF.get(config.throughput)] if c]
    charts = []
    for key in keys:
        for x in xs:
            pts, front_pts = points_of(runs, key, x)
            if not pts:
                continue
            front = {p.name for p in front_pts}
            cost = lower_is_better(x)
            unit = f"{cost_currency(runs)}/1M output tokens" if cost else "tok/s"
            # the baseline's own colour says whether it is on the front too (a grey 'baseline' beside a red front
            # read as a baseline off it)
            series = {"Pareto front": [], "dominated": [], "baseline, on the front": [], "baseline, off the front": []}
            errors, names = {}, {}
            for p in pts:
                tip = (f"{p.name}: {p.throughput:,.4g} {unit}, {key} {p.accuracy:.4f}"
                       + (" (on the front)" if p.name in front else ""))
                group = "Pareto front" if p.name in front else "dominated"
                series[f"baseline, {'on' if p.name in front else 'off'} the front" if p.is_baseline else group].append(
                    (p.throughput, p.accuracy, tip))
                errors[tip], names[tip] = (p.x_interval, p.y_interval), p.name + (" (baseline)" if p.is_baseline else "")
            chart = plots.scatter_svg({k: v for k, v in series.items() if v}, x_label(x, runs), y_label(key, runs),
                                      line=False, errors=errors, labels=names, min_y_span=MIN_ACCURACY_SPAN,
                                      notes=bar_notes(runs, key, x))
            charts.append({"key": key, "title": f"{key} against {'cost' if cost else 'throughput'}", "chart": chart,
                           "points": pts, "front": front, "x_head": unit, "x_fmt": "{:,.4f}" if cost else "{:,.1f}"})
    page = plots.render("frontier.html.j2", throughput=config.throughput, charts=charts, prices=price_notes(runs),
                        left_out=left_out(runs, config.accuracy, config.throughput),
                        mixed_currencies=any(r.cost for r in runs) and cost_currency(runs) is None)
    config.out_html.parent.mkdir(parents=True, exist_ok=True)
    config.out_html.write_text(page, encoding="utf-8")
    return config.out_html
