"""Report: one finished run -> one self-contained HTML page a reviewer reads before approving a release.

``suite report RUN_DIR`` (and every ``suite run``) writes ``report.html``: no script, no external file,
no network — tables, inline SVG charts (matplotlib, see ``plots``) and the frontier PNG embedded as data. The
HTML is ``templates/report.html.j2`` (jinja2, autoescaped); this module gathers what it shows. Sections: the gate
verdicts (the recipe's policy), accuracy per task with the paired delta and its 95% CI drawn against
zero, the accuracy/throughput frontier, every load point with what bounded it, throughput against
offered load, and provenance (checkpoints, versions, commands).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path

from suite.analysis.records import RunSummary
from suite.outputs.plots import render, scatter_svg


@dataclass
class ReportConfig:
    summary: RunSummary
    out_html: Path
    gate: object | None = None  # the analysis.gate.GateResult to show (None: the recipe's gates, recipe_verdict)


@dataclass
class ReportResult:
    html: Path
    wall_s: float


def frontier_chart(s: RunSummary):
    """The variants' mean accuracy against their headline throughput (one series each), or None."""
    series = {v.name + (" (baseline)" if v.is_baseline else ""): [(v.metrics["tput.output_tok_s"], v.metrics["acc.mean"],
                                                                     f"{v.name}: {v.metrics['tput.output_tok_s']:.0f} tok/s, acc {v.metrics['acc.mean']:.4f}")]
              for v in s.variants if "tput.output_tok_s" in v.metrics and "acc.mean" in v.metrics}
    return scatter_svg(series, "output tok/s (headline point)", "mean accuracy", line=False) if series else None


def throughput_chart(s: RunSummary):
    """Output throughput against offered load: each variant's load points and SLO probes, or None."""
    series: dict[str, list[tuple[float, float, str]]] = {}
    for v in s.variants:
        b = v.benchmark
        if not b:
            continue
        for p in b.points:
            if p.ok and isinstance(p.request_rate, (int, float)):
                series.setdefault(v.name, []).append((float(p.request_rate), p.output_tok_s, f"{v.name} {p.label}"))
        if b.slo:
            for q in b.slo.probes:
                series.setdefault(v.name, []).append((q["rate"], q["output_tok_s"], f"{v.name} SLO probe {q['rate']}: {q['why']}"))
    return scatter_svg(series, "offered rate (req/s)", "output tok/s") if series else None


def context(s: RunSummary, gate) -> dict:
    """What ``templates/report.html.j2`` shows, beyond the summary itself: the derived rows and the charts."""
    paired = [(v.name, p) for v in s.variants for p in v.paired]
    span = (max(max(abs(p["ci_low"]), abs(p["ci_high"])) for _, p in paired) or 1.0) if paired else 1.0
    png = s.artifacts.get("frontier_png")
    png_data = base64.b64encode(Path(png).read_bytes()).decode() if png and Path(png).is_file() else None
    has_points = any(v.benchmark and v.benchmark.points for v in s.variants)
    # HumanEval's programs: namespaces (contained) or process (weaker, asked for by the recipe)
    sandboxes = [[v.name, v.evaluate.code_sandbox] for v in s.variants
                 if v.evaluate is not None and getattr(v.evaluate, "code_sandbox", None)]
    return {"s": s, "gate": gate, "task_columns": [t.removeprefix("suite_") for t in s.tasks], "paired": paired,
            "span": span, "sandboxes": sandboxes, "stage_wall": [[k, f"{v:.1f}"] for k, v in s.stage_wall_s.items()],
            "frontier_png": png_data, "frontier_chart": frontier_chart(s), "has_points": has_points,
            "throughput_chart": throughput_chart(s) if has_points else None}


def run(config: ReportConfig) -> ReportResult:
    """Write ``config.out_html`` from ``config.summary`` and ``config.gate`` (``templates/report.html.j2``)."""
    start = time.perf_counter()
    s = config.summary
    gate = config.gate if config.gate is not None else recipe_verdict(s)
    page = render("report.html.j2", **context(s, gate))
    config.out_html.parent.mkdir(parents=True, exist_ok=True)
    config.out_html.write_text(page, encoding="utf-8")
    return ReportResult(html=config.out_html, wall_s=time.perf_counter() - start)


def recipe_verdict(summary: RunSummary):
    """The recipe's own gates on ``summary`` (``analysis.gate.run``): what the report shows as its verdict."""
    from suite.analysis import gate
    from suite.recipe import Recipe

    return gate.run(gate.GateConfig(summary, Recipe.model_validate(summary.recipe).gates))
