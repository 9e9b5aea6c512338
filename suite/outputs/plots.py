"""What the report and the frontier page share: the jinja2 templates (autoescaped), number formatting, and the
SVG scatter chart drawn by matplotlib.

Pages are rendered from ``suite/outputs/templates/`` with autoescape on: every value a template prints
(variant, task and recipe names, model-written text, error messages) is escaped exactly once, and HTML
that Python makes (the charts) enters as ``markupsafe.Markup`` only.

Charts: matplotlib's SVG backend (``Agg`` for the PNG), inlined into the page, so the page stays one
self-contained file (no script, no external URL). Text is kept as SVG ``<text>`` (``svg.fonttype =
"none"``) rather than glyph paths: the report fixture's two charts take 30 kB so, 58 kB as paths, and
the labels stay searchable and selectable; the browser draws them in its sans-serif. The hand-built SVG
this replaced was smaller (about 2 kB a chart), equally deterministic, but had unrounded ticks (3,150,
1.26e+04), no grid and its own axis code to keep; matplotlib wins on everything but bytes.
Output is deterministic (``svg.hashsalt`` fixed, no date in the metadata): the same summary gives the same
bytes. Each point carries a ``<title>`` tooltip (matplotlib writes a ``gid`` group per point; the title is
inserted into it). The one-line CI bar in the paired table stays hand-built, in the template
(``_macros.html.j2``): about 200 bytes a row against 1.3 kB for the same bar from matplotlib.
"""

from __future__ import annotations

import hashlib
import io
import re
from functools import lru_cache

from markupsafe import Markup, escape

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]
Series = dict[str, list[tuple[float, float, str]]]
MIN_ACCURACY_SPAN = 0.02  # an accuracy axis spans at least two points: one item of a 52-item task is no cliff


def fmt(v, spec: str = "{:.4f}") -> str:
    """``v`` formatted with ``spec`` (a ``str.format`` pattern), ``-`` when it is None."""
    return "-" if v is None else spec.format(v)


@lru_cache(maxsize=1)
def environment():
    """The jinja2 environment over ``suite/outputs/templates`` (autoescape on, undefined names are errors)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("suite.outputs", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = fmt
    return env


def render(template: str, **context) -> str:
    """``template`` (a file name under ``templates/``) rendered with ``context``."""
    return environment().get_template(template).render(**context)


def scatter_svg(series: Series, xlabel: str, ylabel: str, line: bool = True, w: int = 640, h: int = 320,
                errors: dict | None = None, labels: bool | dict = False, min_y_span: float | None = None,
                notes: list[str] | None = None, x_from_zero: bool = True,
                y_limits: tuple[float, float] | None = None) -> Markup:
    """An inline SVG chart of ``series`` (name -> points ``(x, y, tooltip)``), one colour per series, the
    points of a series joined by a line when ``line``; ``w`` x ``h`` CSS pixels, the legend underneath.
    ``errors``: tooltip -> ((x_low, x_high) | None, (y_low, y_high) | None), drawn as error bars (SVG group ids
    ``<prefix>-errbar-<n>``); ``labels``: each point labelled with its series name; ``min_y_span``: the y axis spans
    at least this much (so one item of a small task does not read as a cliff), noted under the chart. ``labels``
    may instead be tooltip -> label (each point its own name); ``notes``: lines written under the chart (what the
    error bars are); ``x_from_zero``: the x axis starts at 0 (else it spans the points and their error bars);
    ``y_limits``: the y axis never leaves this range (an accuracy is a share: 0 to 1)."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return Markup('<p class="muted">(no data)</p>')
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefix = "pt" + hashlib.sha1(repr((xlabel, ylabel, sorted(series.items()))).encode()).hexdigest()[:8]
    rc = {"svg.fonttype": "none", "svg.hashsalt": "suite-report", "font.size": 8, "font.family": "sans-serif"}
    with matplotlib.rc_context(rc):
        fig, ax = plt.subplots(figsize=(w / 96, (h + 18 * len(series)) / 96), dpi=96)
        tips = _draw_points(ax, series, prefix, line, errors or {}, labels)
        _draw_axes(ax, [p[0] for p in pts], xlabel, ylabel, min_y_span, notes, x_from_zero, y_limits)
        if labels:
            _spread_labels(fig, ax)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(len(series), 3), frameon=False)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata=dict.fromkeys(("Date", "Creator", "Format", "Type")))
        plt.close(fig)
    return _inline_svg(buf.getvalue(), prefix, tips)


def _draw_points(ax, series: Series, prefix: str, line: bool, errors: dict, labels: bool | dict) -> dict[str, str]:
    """Each series' points (joined by a line when ``line``), error bars and labels, and its legend entry; returns
    each point's SVG group id -> its tooltip."""
    tips: dict[str, str] = {}
    for k, (name, ps) in enumerate(series.items()):
        color = COLORS[k % len(COLORS)]
        ps = sorted(ps)
        if line and len(ps) > 1:
            ax.plot([a for a, _, _ in ps], [b for _, b, _ in ps], color=color, linewidth=1, zorder=2)
        ax.scatter([], [], color=color, s=30, label=name)  # the legend's entry
        for a, b, tip in ps:
            gid = f"{prefix}-{len(tips)}"
            tips[gid] = tip
            ax.scatter([a], [b], color=color, s=30, zorder=3, gid=gid)
            _error_bar(ax, a, b, errors.get(tip), color, f"{prefix}-errbar-{len(tips)}")
            if labels:
                ax.annotate(labels.get(tip, name) if isinstance(labels, dict) else name, (a, b),
                            textcoords="offset points", xytext=(5, 5), fontsize=7, color=color)
    return tips


def _draw_axes(ax, xs: list[float], xlabel: str, ylabel: str, min_y_span: float | None,
               notes: list[str] | None, x_from_zero: bool = True, y_limits: tuple[float, float] | None = None) -> None:
    """Axis ranges (x from 0 or around the points, y at least ``min_y_span`` and within ``y_limits``, noted), labels
    with the notes under them, grid, tick format."""
    import matplotlib.ticker

    if x_from_zero:
        ax.set_xlim(left=min(0.0, min(xs)), right=max(xs) * 1.05 or 1.0)
    else:
        ax.margins(x=0.15)  # around the points and their error bars: the differences are what the chart is for
    ax.margins(y=0.1)
    low, high = ax.get_ylim()
    if min_y_span and high - low < min_y_span:
        mid = (low + high) / 2
        low, high = mid - min_y_span / 2, mid + min_y_span / 2
    if y_limits:  # slide the window inside the limits (an accuracy of 0 drew an axis down to -0.01), then cut
        low, high = low + max(0.0, y_limits[0] - low), high + max(0.0, y_limits[0] - low)
        low, high = low - max(0.0, high - y_limits[1]), high - max(0.0, high - y_limits[1])
        low = max(low, y_limits[0])
    ax.set_ylim(low, high)
    if min_y_span:
        low, high = ax.get_ylim()
        xlabel += f"   (y axis {low:.3f} to {high:.3f})"
    for note in notes or ():
        xlabel += f"\n{note}"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    for axis in (ax.xaxis, ax.yaxis):  # 12,000 tok/s, 0.5375 accuracy
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.6g}"))


LABEL_OFFSETS = ((5, 5), (5, -11), (-5, 5), (-5, -11), (5, 16), (5, -22), (-5, 16), (-5, -22))  # points


def _spread_labels(fig, ax) -> None:
    """Move each point's label to the first offset (``LABEL_OFFSETS``) at which it overlaps no label placed before it
    (variants of nearly equal throughput and accuracy sat on one another); the last offset when none is free."""
    renderer = fig.canvas.get_renderer()
    placed = []
    for text in [t for t in ax.texts if getattr(t, "xyann", None) is not None]:
        for dx, dy in LABEL_OFFSETS:
            text.xyann = (dx, dy)
            text.set_horizontalalignment("left" if dx > 0 else "right")
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
        placed.append(text.get_window_extent(renderer))


def _inline_svg(svg: str, prefix: str, tips: dict[str, str]) -> Markup:
    """matplotlib's SVG made fit for inside an HTML page, each point's tooltip a <title> of its group."""
    svg = svg[svg.index("<svg"):]  # no XML declaration or DOCTYPE inside HTML
    svg = re.sub(r">\s+<", "><", re.sub(r"\s*\n\s*", " ", svg))  # matplotlib indents; the page needs none
    svg = re.sub(r'<g id="(%s-\d+)">' % prefix,
                 lambda m: f'{m.group(0)}<title>{escape(tips[m.group(1)])}</title>', svg)
    return Markup(svg.replace('<svg ', '<svg role="img" ', 1))


def _error_bar(ax, x: float, y: float, err, color: str, gid: str) -> None:
    """Error bars of one point: ``err`` = ((x_low, x_high) | None, (y_low, y_high) | None), absolute bounds."""
    if not err or not any(err):
        return
    xe, ye = err
    xerr = [[max(0.0, x - xe[0])], [max(0.0, xe[1] - x)]] if xe else None
    yerr = [[max(0.0, y - ye[0])], [max(0.0, ye[1] - y)]] if ye else None
    bars = ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="none", ecolor=color, elinewidth=1.2, capsize=3, zorder=2)
    for k, artist in enumerate(bars.lines[2]):  # the bar collections: ids the page (and its test) can find
        artist.set_gid(f"{gid}-{k}")
