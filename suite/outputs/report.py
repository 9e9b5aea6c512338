"""Report: one finished run -> one self-contained HTML page a reviewer reads before approving a release.

``suite report RUN_DIR`` (and every ``suite run``) writes ``report.html``: no script, no external file,
no network — tables, inline SVG charts (matplotlib, see ``plots``) and the frontier PNG embedded as data. The
HTML is ``templates/report.html.j2`` (jinja2, autoescaped); this module gathers what it shows. Sections: the gate
verdicts (the recipe's policy), accuracy per task with the paired delta and its 95% CI drawn against
zero, perplexity per task with the paired per-document delta, its CI and the gate's threshold, the KV-scale
check (per layer and scale option: clipping and relative error; flagged layers; the recommendation), the
accuracy/throughput frontier (and accuracy against cost), every load point with what bounded it,
throughput against offered load, cost per 1M output tokens with the GPU-hour price and its source (the
recipe's assumption, shown as such), and provenance (checkpoints, versions, commands).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path

from suite.analysis.frontier import collect
from suite.analysis.summary import metric_name, point_bounds
from suite.analysis.tput_spread import ceiling_note, point_spread
from suite.outputs.plots import MIN_ACCURACY_SPAN, render, scatter_svg
from suite.recipe import Recipe
from suite.records.summary import RunSummary
from suite.runtime import safeio
from suite.runtime.errors import Problem
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.records.kvcheck import KVCheckResult
from suite.records.quantize import QuantizeResult


@dataclass
class ReportConfig:
    summary: RunSummary
    out_html: Path
    gate: object | None = None  # the analysis.gate.GateResult to show (None: the recipe's gates, recipe_verdict)
    tracking_next: str | None = None  # a page written before MLflow logging (a tracked run's publish): what comes


@dataclass
class ReportResult:
    html: Path
    wall_s: float


def frontier_chart(s: RunSummary):
    """The variants' mean accuracy against their headline throughput (one series each, labelled), or None. Error
    bars: throughput, the headline point's interval over its repetitions (suite.runtime.spread); accuracy, with one
    accuracy task, the paired 95% CI of the variant's delta placed on its score (the baseline's own score has none):
    suite.analysis.frontier.intervals, as the frontier page draws them. The y axis spans at least 0.02 (two points
    of accuracy) and stays within 0 to 1, its range written under the chart; the x axis spans the points (not from
    0: the variants' differences are what it shows). The report draws the frontier once, this chart; frontier.png
    stays a file of the run folder."""
    series, errors = {}, {}
    for p in collect([s], "acc.mean", "tput.output_tok_s"):
        tip = f"{p.name}: {p.throughput:.0f} tok/s, acc {p.accuracy:.4f}"
        series[p.name + (" (baseline)" if p.is_baseline else "")] = [(p.throughput, p.accuracy, tip)]
        errors[tip] = (p.x_interval, p.y_interval)
    return scatter_svg(series, "output tokens per second (headline load point)", "mean accuracy (share correct)",
                       line=False, errors=errors, labels=True, min_y_span=MIN_ACCURACY_SPAN, x_from_zero=False,
                       y_limits=(0.0, 1.0)) if series else None


def cost_rows(s: RunSummary) -> list[dict]:
    """Per variant with a cost figure: its GPUs, cost per 1M output tokens at the headline point and at the SLO
    rate, and each against the baseline's (suite.analysis.summary.cost_metrics); [] when the recipe set no price."""
    if s.cost is None:
        return []
    k = "cost.per_1m_output_tokens"
    return [{"variant": v.name, "baseline": v.is_baseline, "gpus": v.metrics.get("cost.gpus"),
             "tok_s": v.metrics.get("tput.output_tok_s"), "cost": v.metrics.get(k), "ratio": v.metrics.get(k + ".ratio"),
             "slo_tok_s": v.metrics.get("tput.sustainable_output_tok_s"), "slo_cost": v.metrics.get(k + ".slo"),
             "slo_ratio": v.metrics.get(k + ".slo.ratio")}
            for v in s.variants if k in v.metrics or k + ".slo" in v.metrics]


def cost_chart(s: RunSummary):
    """The variants' mean accuracy against their cost per 1M output tokens at the headline point, or None."""
    if s.cost is None:
        return None
    key, cur = "cost.per_1m_output_tokens", s.cost.currency
    series = {v.name + (" (baseline)" if v.is_baseline else ""): [(v.metrics[key], v.metrics["acc.mean"],
                                                                     f"{v.name}: {v.metrics[key]:,.4f} {cur}/1M output tokens, "
                                                                     f"acc {v.metrics['acc.mean']:.4f}")]
              for v in s.variants if key in v.metrics and "acc.mean" in v.metrics}
    return scatter_svg(series, f"{cur} per 1M output tokens (headline point; lower is better)", "mean accuracy",
                       line=False) if series else None


def throughput_chart(s: RunSummary):
    """Output throughput against offered load: each variant's load points and SLO probes, or None."""
    series: dict[str, list[tuple[float, float, str]]] = {}
    for v in s.variants:
        b = v.result(BenchmarkResult)
        if not b:
            continue
        for p in b.points:
            if p.ok and isinstance(p.request_rate, (int, float)):
                series.setdefault(v.name, []).append((float(p.request_rate), p.output_tok_s, f"{v.name} {p.label}"))
        if b.slo:  # a burst re-run longer: its re-run only; a rate decided above capacity without running: no point
            for q in (q for q in b.slo.probes if not q.get("superseded") and not q.get("not_run")):
                series.setdefault(v.name, []).append((q["rate"], q["output_tok_s"], f"{v.name} SLO probe {q['rate']}: {q['why']}"))
    return scatter_svg(series, "offered rate (req/s)", "output tok/s") if series else None


def perplexity_rows(s: RunSummary, gate) -> list[dict]:
    """One row per variant and perplexity task: corpus token perplexity, the paired delta [CI] against the
    baseline, documents, and the max_perplexity_increase gate's threshold and verdict (None: not gated)."""
    records = {(v.name, p["task"]): p for v in s.variants for p in v.perplexity}
    tasks = [t for t in s.tasks if any(metric_name("ppl", t) in v.metrics or (v.name, t) in records for v in s.variants)]
    checks = {(c.variant, c.gate.removeprefix("max perplexity increase ").split(" ")[0]): c
              for c in getattr(gate, "checks", []) if c.gate.startswith("max perplexity increase ")}
    try:
        threshold = Recipe.model_validate(s.recipe).gates.max_perplexity_increase
    except Exception:  # noqa: BLE001 - a recipe copy that does not validate: the gate section says so
        threshold = None
    rows = []
    for t in tasks:
        for v in s.variants:
            p, c = records.get((v.name, t)), checks.get((v.name, t))
            rows.append({"variant": v.name, "baseline": v.is_baseline, "task": t, "ppl": v.metrics.get(metric_name("ppl", t)),
                         "p": p, "n": p["n"] if p else v.metrics.get(metric_name("ppl", t) + ".docs_paired"),
                         "threshold": c.threshold if c else (None if v.is_baseline else threshold),
                         "passed": c.passed if c else None, "outcome": c.outcome if c else None})
    return rows


def kv_sections(s: RunSummary, worst: int = 3) -> list[dict]:
    """Each variant's kvcheck result as the report shows it: per layer and scale option the K/V clipped fraction
    and relative error and the attention error (against the ideal per-tensor scale's), for the flagged layers
    and the ``worst`` others by attention error under the option in use (``all`` holds every layer)."""
    out = []
    for v in s.variants:
        res = v.result(KVCheckResult)
        if res is None:
            continue
        cells: dict[tuple[int, str], dict] = {}
        for r in res.rows:
            if r.get("tensor") in ("k", "v", "attn"):
                c = cells.setdefault((r["layer"], r["option"]), {"layer": r["layer"], "option": r["option"], "flags": []})
                c[r["tensor"]] = r
                c["flags"] += [f"{r['tensor']}: {f}" for f in r.get("flags") or []]
        for c in cells.values():
            ideal = cells.get((c["layer"], "dynamic"), {}).get("attn", {}).get("rel_err")
            a = c.get("attn", {}).get("rel_err")
            c["attn_ratio"] = a / ideal if a is not None and ideal else None
            c["kept"] = c["layer"] in res.skip_layers
        options = [o for o in res.options if any(k[1] == o for k in cells)]
        layers = sorted({k[0] for k in cells})
        in_use = {layer: cells.get((layer, res.option), {}) for layer in layers}
        ranked = sorted(layers, key=lambda x: -(in_use[x].get("attn_ratio") or 0))
        shown = sorted({x for x in layers if in_use[x].get("flags")} | set(res.flagged_layers)
                       | set([x for x in ranked if not in_use[x].get("flags")][:worst]))
        pick = lambda keep: [cells[(x, o)] for x in keep for o in options if (x, o) in cells]  # noqa: E731
        why: dict[int, list[str]] = {}
        for r in res.flagged:
            why.setdefault(r.get("layer"), []).extend(f"{r.get('tensor', '?')}: {f}" for f in r.get("flags") or [])
        out.append({"variant": v.name, "res": res, "rows": pick(shown), "all": pick(layers), "num_shown": len(shown),
                    "kl": [[o, d.get("kl"), d.get("ppl"), d.get("ppl_bf16"), d.get("top1_agree")] for o, d in res.kl.items()],
                    "flagged": [[x, "; ".join(why.get(x, []))] for x in res.flagged_layers]})
    return out


def context(s: RunSummary, gate) -> dict:
    """What ``templates/report.html.j2`` shows, beyond the summary itself: the derived rows and the charts."""
    paired = [(v.name, p) for v in s.variants for p in v.paired]
    span = (max(max(abs(p["ci_low"]), abs(p["ci_high"])) for _, p in paired) or 1.0) if paired else 1.0
    png = s.artifacts.get("frontier_png")
    png_data = base64.b64encode(safeio.read_bytes(png, "image")).decode() if png and Path(png).is_file() else None
    # each variant's stage results the page shows, by variant name (the template reads these, not the summary's stages)
    benchmarks = {v.name: b for v in s.variants if (b := v.result(BenchmarkResult))}
    quantized = {v.name: q for v in s.variants if (q := v.result(QuantizeResult))}
    evaluations = {v.name: ev for v in s.variants if (ev := v.result(EvaluateResult)) is not None}
    has_points = any(b.points for b in benchmarks.values())
    # HumanEval's programs: namespaces (contained) or process (weaker, asked for by the recipe)
    sandboxes = [[name, ev.code_sandbox] for name, ev in evaluations.items() if getattr(ev, "code_sandbox", None)]
    # eval.sequential: per variant and task, the looks scored, the items used and saved, the test's decision
    sequential = [[name, t, f"{q.looks_scored} of {q.looks_planned}", f"{q.items_used} of {q.n_items}", q.items_saved,
                   q.decision] for name, ev in evaluations.items() for t, q in ev.sequential.items()]
    # each load point's bound by the current rule (the label as run beside it when they differ), in the points' order
    bounds = {v.name: point_bounds(v) for v in s.variants if v.name in benchmarks}
    spreads = {name: [point_spread(p) for p in b.points] for name, b in benchmarks.items()}
    ceiling_notes = {name: ceiling_note(b) for name, b in benchmarks.items()}
    slo_searched = [name for name, b in benchmarks.items() if b.slo]
    return {"s": s, "gate": gate, "benchmarks": benchmarks, "quantized": quantized, "slo_searched": slo_searched,
            "bounds": bounds, "spreads": spreads, "ceiling_notes": ceiling_notes, "task_columns": [t.removeprefix("suite_") for t in s.tasks], "paired": paired,
            "span": span, "sandboxes": sandboxes, "sequential": sequential, "stage_wall": [[k, f"{v:.1f}", f"{s.stage_elapsed_s[k]:.1f}" if k in s.stage_elapsed_s else "-"]
                           for k, v in s.stage_wall_s.items()],
            "frontier_png": png_data, "frontier_chart": frontier_chart(s), "has_points": has_points,
            "throughput_chart": throughput_chart(s) if has_points else None,
            "ppl_rows": perplexity_rows(s, gate), "kv_sections": kv_sections(s),
            "cost_rows": cost_rows(s), "cost_chart": cost_chart(s)}


def run(config: ReportConfig) -> ReportResult:
    """Write ``config.out_html`` from ``config.summary`` and ``config.gate`` (``templates/report.html.j2``)."""
    start = time.perf_counter()
    s = config.summary
    gate = config.gate if config.gate is not None else recipe_verdict(s)
    page = render("report.html.j2", **context(s, gate), tracking_next=config.tracking_next)
    config.out_html.parent.mkdir(parents=True, exist_ok=True)
    config.out_html.write_text(page, encoding="utf-8")
    return ReportResult(html=config.out_html, wall_s=time.perf_counter() - start)


def recipe_verdict(summary: RunSummary, run_dir: str | Path | None = None):
    """The verdict the report shows: ``analysis.gate.verdict`` on the run folder (``run_dir``, default the summary's),
    the one trust rule of `suite gate`: the run folder's recipe.yaml under its recorded sha256, never the summary's
    own gates. When no trusted policy can be had the verdict is "no verdict: <why>" (a GateResult whose problems say
    it)."""
    from suite.analysis.gate import verdict  # lazy: scipy, an extra that `suite run` checks for before it starts

    judged = verdict(summary, Path(run_dir) if run_dir is not None else Path(summary.run_dir))
    if judged.label:
        return judged.result
    judged.result.problems = [Problem(p.file, p.field, f"no verdict: {p.message}", p.fix)
                              for p in judged.result.problems]
    return judged.result
