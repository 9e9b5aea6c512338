"""The HTML pieces the report and the frontier page share: the stylesheet, escaping, tables, an SVG scatter chart."""

from __future__ import annotations

import html

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.pass{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}.muted{color:#777}
code{background:#f6f6f6;padding:0 3px}svg text{font:11px sans-serif}"""
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]


def esc(x) -> str:
    return html.escape(str(x))


def fmt(v, spec: str = "{:.4f}") -> str:
    return "-" if v is None else spec.format(v)


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def scatter_svg(series: dict[str, list[tuple[float, float, str]]], xlabel: str, ylabel: str,
                line: bool = True, w: int = 640, h: int = 320) -> str:
    """A small SVG chart; each point carries a <title> tooltip."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return "<p class=muted>(no data)</p>"
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1 = min(0.0, min(xs)), max(xs) * 1.05 or 1.0
    y0, y1 = min(ys) * 0.95 if min(ys) > 0 else min(ys), max(ys) * 1.05 or 1.0
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    L, B = 60, 40
    X = lambda v: L + (v - x0) / (x1 - x0) * (w - L - 20)  # noqa: E731
    Y = lambda v: h - B - (v - y0) / (y1 - y0) * (h - B - 20)  # noqa: E731
    parts = [f'<svg width="{w}" height="{h + 20 * len(series)}" role="img">',
             f'<line x1="{L}" y1="{h - B}" x2="{w - 10}" y2="{h - B}" stroke="#333"/>',
             f'<line x1="{L}" y1="{h - B}" x2="{L}" y2="10" stroke="#333"/>',
             f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">{esc(xlabel)}</text>',
             f'<text x="12" y="{h / 2}" transform="rotate(-90 12 {h / 2})" text-anchor="middle">{esc(ylabel)}</text>']
    for i in range(5):
        yv, xv = y0 + (y1 - y0) * i / 4, x0 + (x1 - x0) * i / 4
        parts.append(f'<text x="{L - 4}" y="{Y(yv) + 4:.0f}" text-anchor="end">{yv:,.4g}</text>')
        parts.append(f'<text x="{X(xv):.0f}" y="{h - B + 14}" text-anchor="middle">{xv:,.4g}</text>')
    for k, (name, ps) in enumerate(series.items()):
        c = COLORS[k % len(COLORS)]
        ps = sorted(ps)
        if line and len(ps) > 1:
            parts.append('<polyline fill="none" stroke="%s" points="%s"/>' % (c, " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b, _ in ps)))
        for a, b, tip in ps:
            parts.append(f'<circle cx="{X(a):.1f}" cy="{Y(b):.1f}" r="4" fill="{c}"><title>{esc(tip)}</title></circle>')
        parts.append(f'<rect x="{L}" y="{h + 6 + 20 * k}" width="10" height="10" fill="{c}"/>'
                     f'<text x="{L + 16}" y="{h + 15 + 20 * k}">{esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
