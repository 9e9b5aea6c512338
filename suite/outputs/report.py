"""Report: one finished run -> one self-contained HTML page a reviewer reads before approving a release.

``suite report RUN_DIR`` (and every ``suite run``) writes ``report.html``: no script, no external file,
no network — tables, inline SVG charts and the frontier PNG embedded as data. Sections: the gate
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
from suite.outputs.plots import CSS, esc, fmt, scatter_svg, table



@dataclass
class ReportConfig:
    summary: RunSummary
    out_html: Path
    gate: object | None = None  # the analysis.gate.GateResult to show (None: the recipe's gates, recipe_verdict)


@dataclass
class ReportResult:
    html: Path
    wall_s: float


def gate_section(result) -> str:
    """The verdict of the recipe's gates (``result``: the ``analysis.gate.GateResult`` the report was given)."""
    if not result.checks and not result.missing:
        return "<p class=muted>The recipe sets no gates.</p>"
    verdict = ('<p class="fail">NO VERDICT (the run cannot be judged: see below)</p>' if result.problems else
               '<p class="pass">PASS</p>' if result.passed else '<p class="fail">FAIL</p>')
    rows = [[esc(c.variant), esc(c.gate), fmt(c.measured), fmt(c.threshold), fmt(c.margin, "{:+.4f}"),
             '<span class="pass">pass</span>' if c.passed else '<span class="fail">FAIL</span>'] for c in result.checks]
    missing = "".join(f"<li>{esc(m)}</li>" for m in result.missing)
    return verdict + table(["variant", "gate", "measured", "threshold", "margin", "result"], rows, 2) + (
        f"<ul class=fail>{missing}</ul>" if missing else "")


def ci_svg(delta: float, low: float, high: float, span: float) -> str:
    """A 160-px bar: the CI of the delta as a line, the delta as a dot, zero as a vertical rule."""
    w, mid = 160, 80
    x = lambda v: mid + (v / span) * (w / 2 - 6) if span else mid  # noqa: E731
    color = "#b00" if high < 0 else ("#070" if low > 0 else "#555")
    return (f'<svg width="{w}" height="16"><line x1="{mid}" y1="0" x2="{mid}" y2="16" stroke="#aaa"/>'
            f'<line x1="{x(low):.1f}" y1="8" x2="{x(high):.1f}" y2="8" stroke="{color}" stroke-width="3"/>'
            f'<circle cx="{x(delta):.1f}" cy="8" r="3.5" fill="{color}"/></svg>')


def accuracy_section(s: RunSummary) -> str:
    if not s.tasks:
        return "<p class=muted>No accuracy tasks in this recipe (throughput only).</p>"
    rows = []
    for v in s.variants:
        row = [esc(v.name) + (" <span class=muted>(baseline)</span>" if v.is_baseline else "")]
        row += [fmt(v.metrics.get(f"acc.{t}")) for t in s.tasks]
        row += [fmt(v.metrics.get("acc.mean")), fmt(v.metrics.get("acc.mean.delta"), "{:+.4f}")]
        rows.append(row)
    out = table(["variant", *[t.removeprefix("suite_") for t in s.tasks], "mean", "Δ mean"], rows)
    paired = [(v.name, p) for v in s.variants for p in v.paired]
    if paired:
        span = max(max(abs(p["ci_low"]), abs(p["ci_high"])) for _, p in paired) or 1.0
        prow = [[esc(name), esc(p["task"]), str(p["n"]), fmt(p["delta"], "{:+.4f}"),
                 f'[{p["ci_low"]:+.4f}, {p["ci_high"]:+.4f}]', ci_svg(p["delta"], p["ci_low"], p["ci_high"], span),
                 str(p["gained"]), str(p["lost"]), fmt(p.get("mcnemar_p"), "{:.3g}")] for name, p in paired]
        out += ("<h3>Paired against the baseline, item by item</h3><p class=muted>95% paired-bootstrap interval "
                "of the delta (red: entirely below zero; green: entirely above); items flipped each way; "
                "McNemar's exact test.</p>")
        out += table(["variant", "task", "items", "delta", "95% CI", f"CI (±{span:.3f})", "gained", "lost",
                      "McNemar p"], prow, 2)
    return out


def frontier_section(s: RunSummary) -> str:
    png = s.artifacts.get("frontier_png")
    out = ""
    if png and Path(png).is_file():
        data = base64.b64encode(Path(png).read_bytes()).decode()
        out += f'<img alt="frontier" width="640" src="data:image/png;base64,{data}">'
    series = {v.name + (" (baseline)" if v.is_baseline else ""): [(v.metrics["tput.output_tok_s"], v.metrics["acc.mean"],
                                                                     f"{v.name}: {v.metrics['tput.output_tok_s']:.0f} tok/s, acc {v.metrics['acc.mean']:.4f}")]
              for v in s.variants if "tput.output_tok_s" in v.metrics and "acc.mean" in v.metrics}
    if series:
        out += scatter_svg(series, "output tok/s (headline point)", "mean accuracy", line=False)
    return out or "<p class=muted>No variant has both accuracy and throughput.</p>"


def throughput_section(s: RunSummary) -> str:
    rows, series = [], {}
    for v in s.variants:
        b = v.benchmark
        if not b:
            continue
        for p in b.points:
            spread = f"{p.output_tok_s_min:.0f}–{p.output_tok_s_max:.0f}" if p.output_tok_s_min is not None else "-"
            roof = p.roofline
            rows.append([esc(v.name), esc(p.label), f"{p.output_tok_s:,.1f}" if p.ok else '<span class=fail>failed</span>',
                         spread, f"{p.req_s:.2f}", f"{p.ttft_p99_ms:,.0f}", f"{p.tpot_p99_ms:.1f}",
                         fmt(p.ceiling_fraction, "{:.0%}"), fmt(roof.get("hbm_frac"), "{:.0%}"),
                         fmt(roof.get("tensor_frac"), "{:.0%}"),
                         f'<span title="{esc(p.bottleneck_reason or "")}">{esc(p.bottleneck or "-")}</span>'])
            if p.ok and isinstance(p.request_rate, (int, float)):
                series.setdefault(v.name, []).append((float(p.request_rate), p.output_tok_s, f"{v.name} {p.label}"))
        if b.slo:
            for q in b.slo.probes:
                series.setdefault(v.name, []).append((q["rate"], q["output_tok_s"], f"{v.name} SLO probe {q['rate']}: {q['why']}"))
    if not rows:
        return "<p class=muted>No throughput results.</p>"
    out = table(["variant", "point", "out tok/s (median)", "min–max", "req/s", "TTFT p99 ms", "TPOT p99 ms",
                 "of offline", "HBM", "tensor", "bound (hover: why)"], rows, 2)
    slo_rows = [[esc(v.name), fmt(v.benchmark.slo.sustainable_rate, "{:g}"), fmt(v.benchmark.slo.bracket_high, "{:g}"),
                 fmt(v.benchmark.slo.output_tok_s, "{:,.0f}"), fmt(v.benchmark.slo.ttft_p99_ms, "{:,.0f}"),
                 esc(v.benchmark.slo.note or "")] for v in s.variants if v.benchmark and v.benchmark.slo]
    if slo_rows:
        out += "<h3>Sustainable rate under the SLO</h3>" + table(
            ["variant", "sustainable req/s", "fails at", "out tok/s there", "TTFT p99 ms there", "note"], slo_rows)
    cap = [[esc(v.name), fmt(v.benchmark.kv_cache_tokens, "{:,}"), fmt(v.benchmark.peak_concurrency, "{:,.0f}"),
            fmt(v.benchmark.offline_tok_s, "{:,.0f}"), fmt(v.benchmark.server_start_s, "{:.0f}"), esc(v.benchmark.gpu or "-")]
           for v in s.variants if v.benchmark]
    out += "<h3>Capacity</h3>" + table(["variant", "KV-cache tokens", "peak concurrency", "offline tok/s",
                                        "server start s", "GPU"], cap)
    if series:
        out += "<h3>Output throughput against offered load</h3>" + scatter_svg(series, "offered rate (req/s)", "output tok/s")
    return out


def provenance_section(s: RunSummary) -> str:
    rows = []
    for v in s.variants:
        q = v.quantize
        rows.append([esc(v.name), esc(v.scheme or "none"), esc(v.kv_cache_dtype), esc(q.key if q else "-"),
                     esc(", ".join(q.ignored_modules) if q else "-"), fmt(q.wall_s if q else None, "{:.0f}"),
                     f"<code>{esc(v.model_path)}</code>", esc("; ".join(v.errors)) or "-"])
    out = table(["variant", "scheme", "KV dtype", "checkpoint key", "kept in BF16", "quantize s", "model", "errors"], rows)
    sandboxes = [[esc(v.name), esc(v.evaluate.code_sandbox)] for v in s.variants
                 if v.evaluate is not None and getattr(v.evaluate, "code_sandbox", None)]
    if sandboxes:  # HumanEval's programs: namespaces (contained) or process (weaker, asked for by the recipe)
        out += table(["variant", "code sandbox"], sandboxes)
    out += table(["package", "version"], [[esc(k), esc(val)] for k, val in sorted(s.versions.items())])
    out += table(["stage", "wall s"], [[esc(k), f"{val:.1f}"] for k, val in s.stage_wall_s.items()])
    return out


def run(config: ReportConfig) -> ReportResult:
    start = time.perf_counter()
    s = config.summary
    track = (f"MLflow {esc(s.tracking.uri)}, parent run <code>{esc(s.tracking.parent_run_id)}</code>" if s.tracking
             else f"not logged to MLflow ({esc(s.tracking_pending or 'tracking off')})")
    body = [f"<h1>{esc(s.recipe_name)}: FP8 accuracy vs throughput</h1>",
            f"<p>{esc(s.recipe.get('description', ''))}</p>",
            f"<p class=muted>run <code>{esc(s.run_dir)}</code> · {esc(s.started)} → {esc(s.finished or '?')} · "
            f"platform {esc(s.platform)} · recipe sha256 {esc(s.recipe_sha256[:12])} · {track}</p>",
            *([f"<ul class=fail>{''.join(f'<li>warning: {esc(w)}</li>' for w in s.warnings)}</ul>"] if s.warnings else []),
            "<h2>Gates</h2>", gate_section(config.gate if config.gate is not None else recipe_verdict(s)),
            "<h2>Accuracy</h2>", accuracy_section(s),
            "<h2>Frontier</h2>", frontier_section(s),
            "<h2>Throughput</h2>", throughput_section(s),
            "<h2>Provenance</h2>", provenance_section(s)]
    page = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(s.recipe_name)} report</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")
    config.out_html.parent.mkdir(parents=True, exist_ok=True)
    config.out_html.write_text(page, encoding="utf-8")
    return ReportResult(html=config.out_html, wall_s=time.perf_counter() - start)


def recipe_verdict(summary: RunSummary):
    """The recipe's own gates on ``summary`` (``analysis.gate.run``): what the report shows as its verdict."""
    from suite.analysis import gate
    from suite.recipe import Recipe

    return gate.run(gate.GateConfig(summary, Recipe.model_validate(summary.recipe).gates))
