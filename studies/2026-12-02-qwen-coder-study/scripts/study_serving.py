#!/usr/bin/env python3
"""The serving half of a run that has no summary yet (a stretch ended before its last benchmark): every finished
benchmark's figures against the baseline's, through the summary's own code.

usage: study_serving.py RUN_DIR [--json OUT]

Per variant with a benchmark result in RUN_DIR: the headline point's output tok/s (the recipe's headline rule) and its
ratio to the baseline, each load point's figures, the SLO search's sustainable rate (left out when its deciding probe
was a burst), cost per 1M output tokens at both (the recipe's gpu_hour_cost) -- suite.analysis.summary's
variant_metrics / cost / deltas / slo_warnings, as summary.json would have them. Each point's bottleneck label
is given as the run recorded it and as the current rule reads the same recorded evidence
(suite.stages.benchmark.bottleneck.relabel: classify on the point's server statistics and roofline, with max_num_seqs
and pipeline parallelism from the recipe's engine_args for the variant), so that a label rule
fixed after a run shows where it changes the reading. Nothing here decides anything: `suite gate` reads a finished
run's summary.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from suite.records.summary import RunSummary, VariantSummary  # noqa: E402
from suite.analysis.assemble import with_metrics  # noqa: E402
from suite.analysis.summary import cost_metrics, delta_metrics, slo_warnings, variant_metrics  # noqa: E402
from suite.recipe import Recipe  # noqa: E402
from suite.stages.benchmark.labels import relabel  # noqa: E402
from suite.records.benchmark import BenchmarkResult  # noqa: E402
from suite.stages.registry import BENCHMARK  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    import yaml

    recipe = Recipe.model_validate(yaml.safe_load((args.run / "recipe.yaml").read_text()))
    if recipe.throughput is None:
        print(f"error: {args.run}/recipe.yaml: no throughput section", file=sys.stderr)
        return 2
    specs = [recipe.baseline, *recipe.variants]
    variants = []
    for spec in specs:
        f = args.run / "variants" / spec.name / "benchmark.result.json"
        if not f.is_file():
            print(f"{spec.name}: no benchmark result (not run)")
            continue
        variants.append(VariantSummary(name=spec.name, is_baseline=spec is recipe.baseline, model_path="",
                                       engine_args=dict(spec.engine_args or {}),
                                       stages={BENCHMARK: BenchmarkResult.model_validate_json(f.read_text())}))
    if not any(v.is_baseline for v in variants):
        print(f"error: {args.run}: no benchmark result for the baseline {recipe.baseline.name}", file=sys.stderr)
        return 2
    for v in variants:
        v.metrics = variant_metrics(v, recipe.throughput.headline)
    summary = RunSummary(suite_version="", recipe_name=recipe.name, recipe_path="", recipe_sha256="", recipe={},
                         run_dir=str(args.run), started="", platform="", variants=variants)
    summary.cost, costs = cost_metrics(variants, recipe.throughput.gpu_hour_cost)
    variants = with_metrics(variants, costs)
    variants = with_metrics(variants, delta_metrics(variants))
    warnings = [w for v in variants for w in slo_warnings(v)]
    out = {"run": str(args.run), "baseline": recipe.baseline.name, "metrics": {}, "points": {}, "slo": {},
           "warnings": warnings,
           "cost_basis": summary.cost.model_dump() if summary.cost else None}
    cur = summary.cost.currency if summary.cost else ""
    print("| variant | out tok/s (× base) | SLO rate req/s (tok/s) | cost per 1M out tokens, saturated / at SLO | "
          "start s | bench wall s |")
    print("|---|---|---|---|---|---|")
    for v in variants:
        m, b = v.metrics, v.result(BenchmarkResult)
        out["metrics"][v.name] = m
        out["slo"][v.name] = b.slo.model_dump() if b.slo else None
        ratio = m.get("tput.output_tok_s.ratio", 1.0)
        slo = (f"{m['tput.sustainable_rate']:g} ({m['tput.sustainable_output_tok_s']:,.0f})"
               if "tput.sustainable_rate" in m else "—")
        if b.slo is not None and b.slo.probes:  # the summary's slo_warnings, in the table too
            slo += {True: "", False: " (a burst: left out)"}.get(b.slo.steady, ", steadiness not checked")
        cost = " / ".join(f"{m[k]:.4f} {cur}" if k in m else "—"
                          for k in ("cost.per_1m_output_tokens", "cost.per_1m_output_tokens.slo"))
        print(f"| {v.name} | {m['tput.output_tok_s']:,.0f} ({ratio:.3f}) | {slo} | {cost} | "
              f"{b.server_start_s:.0f} | {b.wall_s:.0f} |")
        rows = []
        for p in b.points:
            label, reason = relabel(p, v.engine_args)
            rows.append({"label": p.label, "output_tok_s": p.output_tok_s,
                         "repetitions": [r.get("output_tok_s") for r in p.repetitions],
                         "ttft_p50_ms": p.ttft_p50_ms, "ttft_p99_ms": p.ttft_p99_ms, "tpot_p50_ms": p.tpot_p50_ms,
                         "tpot_p99_ms": p.tpot_p99_ms, "bottleneck_as_run": p.bottleneck, "bottleneck_now": label,
                         "reason_now": reason, "roofline": p.roofline,
                         "gpu_util_mean": p.server.gpu_util_mean if p.server else None,
                         "engine_core_cpu_pct": p.server.loaded_engine_core_cpu_pct if p.server else None})
        out["points"][v.name] = rows
    print("\n| variant | point | out tok/s (reps) | TTFT p50 / p99 ms | TPOT p50 / p99 ms | decode steps/s | "
          "GPU busy % | engine core % | label as run → now |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rows in out["points"].items():
        for r in rows:
            reps = " / ".join(f"{x:,.0f}" for x in r["repetitions"] if x is not None)
            steps = r["roofline"].get("decode_steps_s")
            fmt = lambda x, f: format(x, f) if x is not None else "—"  # noqa: E731
            print(f"| {name} | {r['label']} | {r['output_tok_s']:,.0f} ({reps}) | {r['ttft_p50_ms']:,.0f} / "
                  f"{r['ttft_p99_ms']:,.0f} | {r['tpot_p50_ms']:.1f} / {r['tpot_p99_ms']:.1f} | {fmt(steps, '.1f')} | "
                  f"{fmt(r['gpu_util_mean'], '.0f')} | {fmt(r['engine_core_cpu_pct'], '.0f')} | "
                  f"{r['bottleneck_as_run']} → {r['bottleneck_now']} |")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
