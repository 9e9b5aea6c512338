"""Rich tables and console output for the commands (nothing else)."""

from __future__ import annotations

from suite.analysis.summary import point_bounds
from suite.analysis.tput_spread import point_spread
from suite.records.benchmark import BenchmarkResult
from suite.records.kvcheck import KVCheckResult




def _console():
    from rich.console import Console

    return Console(stderr=True)



def print_summary(summary) -> None:
    from rich.table import Table

    table = Table(title=f"{summary.recipe_name} ({summary.platform})")
    cols = [("acc.mean", "acc mean", "{:.4f}"), ("acc.mean.delta", "Δ acc", "{:+.4f}"),
            ("tput.output_tok_s", "out tok/s", "{:.1f}"), ("tput.output_tok_s.ratio", "× base", "{:.2f}"),
            ("tput.ttft_p99_ms", "TTFT p99 ms", "{:.0f}"), ("tput.tpot_p99_ms", "TPOT p99 ms", "{:.1f}"),
            ("tput.kv_cache_tokens", "KV tokens", "{:,.0f}"), ("tput.sustainable_rate", "SLO req/s", "{:g}")]
    if summary.cost is not None and any("cost.per_1m_output_tokens" in v.metrics for v in summary.variants):
        cols.insert(4, ("cost.per_1m_output_tokens", f"{summary.cost.currency}/1M out", "{:,.3f}"))
    if any("tput.goodput_req_s" in v.metrics for v in summary.variants):  # vllm bench serve --goodput's figure
        cols.insert(cols.index(next(c for c in cols if c[0] == "tput.ttft_p99_ms")),
                    ("tput.goodput_req_s", "goodput req/s", "{:.2f}"))
    table.add_column("variant")
    for t in summary.tasks:
        table.add_column(t.removeprefix("suite_"), justify="right")
    for _, head, _ in cols:
        table.add_column(head, justify="right")
    for v in summary.variants:
        row = [v.name + (" (base)" if v.is_baseline else "")]
        row += [f"{v.metrics[k]:.4f}" if (k := f"acc.{t}") in v.metrics else "-" for t in summary.tasks]
        row += [fmt.format(v.metrics[k]) if k in v.metrics else "-" for k, _, fmt in cols]
        ratio = cols.index(next(c for c in cols if c[0] == "tput.output_tok_s.ratio")) + 1 + len(summary.tasks)
        base = next((b for b in summary.variants if b.is_baseline), v)
        row[ratio] += ratio_note(v.metrics, base.metrics) if "tput.output_tok_s.ratio" in v.metrics else ""
        if "tput.goodput_req_s.ratio" in v.metrics:  # the goodput beside its ratio and interval to the baseline
            row[cols.index(next(c for c in cols if c[0] == "tput.goodput_req_s")) + 1 + len(summary.tasks)] += \
                goodput_note(v.metrics)
        table.add_row(*row)
    _wide_console().print(table)
    if summary.cost is not None:
        print(f"cost per 1M output tokens at the headline point: {summary.cost.gpu_hour:g} {summary.cost.currency} "
              f"per GPU hour (assumed; source: {summary.cost.source}), GPU time only")
    print_load_points(summary)
    for v in summary.variants:
        if (kvc := v.result(KVCheckResult)) is not None:
            print_kvcheck(v.name, kvc)



def ratio_note(m: dict, base: dict) -> str:
    """The headline ratio's interval, and 'unstable' where the variant's or the baseline's headline point failed the
    stability rule (suite.runtime.spread): a ratio without them reads as more certain than it is."""
    note = ""
    if "tput.output_tok_s.ratio.ci_low" in m:
        note += f" [{m['tput.output_tok_s.ratio.ci_low']:.2f}-{m['tput.output_tok_s.ratio.ci_high']:.2f}]"
    if m.get("tput.stable") == 0.0 or base.get("tput.stable") == 0.0:
        note += " unstable"
    return note


def goodput_note(m: dict) -> str:
    """The goodput ratio to the baseline and its interval, as the run table shows them beside the goodput."""
    ci = (f" [{m['tput.goodput_req_s.ratio.ci_low']:.2f}-{m['tput.goodput_req_s.ratio.ci_high']:.2f}]"
          if "tput.goodput_req_s.ratio.ci_low" in m else "")
    return f" ×{m['tput.goodput_req_s.ratio']:.2f}{ci}"


def print_load_points(summary) -> None:
    """Every load point of every variant: median output tok/s and its spread, p99 latencies, and what
    bounded the point (suite.stages.benchmark.bottleneck: by the current rule, the label as run beside it when the
    rule has changed since)."""
    from rich.table import Table

    table = Table(title="load points (median of repetitions; 95% CI: t interval over >= 3 repetitions, none with 2; unstable: "
                        "max/min > 1.25 or CI beyond ±10%; bound = what limited the point)")
    points = {v.name: b.points if (b := v.result(BenchmarkResult)) else [] for v in summary.variants}
    goodput = any(p.goodput_req_s is not None for ps in points.values() for p in ps)
    for head in ("variant", "point", "out tok/s", "min-max", "95% CI", "req/s", *(["goodput req/s"] if goodput else []),
                 "TTFT p99 ms", "TPOT p99 ms", "of offline", "bound"):
        table.add_column(head, justify="left" if head in ("variant", "point", "bound") else "right")
    rows = 0
    for v in summary.variants:
        for p, (bound, _) in zip(points[v.name], point_bounds(v)):
            spread = f"{p.output_tok_s_min:.0f}-{p.output_tok_s_max:.0f}" if p.output_tok_s_min is not None else "-"
            ceiling = f"{p.ceiling_fraction:.0%}" if p.ceiling_fraction is not None else "-"
            sp = point_spread(p)
            ci = f"{sp['output_tok_s_ci_low']:.0f}-{sp['output_tok_s_ci_high']:.0f}" if sp["ci_method"] == "t" else "-"
            if sp["ci_method"] == "range":  # 2 repetitions: their range is all there is (no CI)
                spread = f"{sp['output_tok_s_ci_low']:.0f}-{sp['output_tok_s_ci_high']:.0f}"
            tok = (f"{p.output_tok_s:.1f}" + (" UNSTABLE" if sp["stable"] is False else "")) if p.ok else "failed"
            good = [f"{p.goodput_req_s:.2f}" if p.goodput_req_s is not None else "-"] if goodput else []
            table.add_row(v.name, p.label, tok, spread, ci, f"{p.req_s:.2f}", *good,
                          f"{p.ttft_p99_ms:.0f}", f"{p.tpot_p99_ms:.1f}", ceiling, bound)
            rows += 1
    if rows:
        _wide_console().print(table)



def _wide_console():
    """A terminal's own width; 160 columns when the output is a file or a CI log."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def kv_layer_rows(res, worst: int = 3) -> list[dict]:
    """Per layer of the option in use: K/V clipped fraction and rel err, the attention error against the
    ideal per-tensor scale's; the flagged layers and the ``worst`` others by that ratio (all with worst<0)."""
    by: dict[int, dict] = {}
    ideal = {r["layer"]: r["rel_err"] for r in res.rows if r["tensor"] == "attn" and r["option"] == "dynamic"}
    for r in res.rows:
        if r["option"] != res.option or r["tensor"] not in ("k", "v", "attn"):
            continue
        row = by.setdefault(r["layer"], {"layer": r["layer"], "flags": []})
        row[r["tensor"]] = r
        row["flags"] += [f"{r['tensor']}: {f}" for f in r["flags"]]
    for layer, row in by.items():
        a = row.get("attn", {}).get("rel_err")
        row["attn_ratio"] = a / ideal[layer] if a is not None and ideal.get(layer) else None
    rows = sorted(by.values(), key=lambda x: -(x["attn_ratio"] or 0))
    if worst < 0:
        return sorted(rows, key=lambda x: x["layer"])
    flagged = [x for x in rows if x["flags"]]
    return sorted(flagged + [x for x in rows if not x["flags"]][:worst], key=lambda x: x["layer"])


def print_kvcheck(name: str, res, worst: int = 3) -> None:
    """The kvcheck stage's result: flagged layers (and the worst others), KL per scale option, the kept layers."""
    from rich.table import Table

    table = Table(title=f"{name}: FP8 KV scales ({res.kv_scales}) on {res.tokens} held-out tokens: flagged layers "
                        f"and the {worst} worst others by attention error")
    for head in ("layer", "K clipped", "K rel err", "V clipped", "V rel err", "attn err × ideal", "kept", "flags"):
        table.add_column(head, justify="left" if head == "flags" else "right")
    for row in kv_layer_rows(res, worst):
        k, v = row.get("k", {}), row.get("v", {})
        table.add_row(str(row["layer"]), f"{k.get('clipped_frac', 0):.1e}", f"{k.get('rel_err', 0):.4f}",
                      f"{v.get('clipped_frac', 0):.1e}", f"{v.get('rel_err', 0):.4f}",
                      f"{row['attn_ratio']:.2f}" if row["attn_ratio"] is not None else "-",
                      "BF16" if row["layer"] in res.skip_layers else "", "; ".join(row["flags"]))
    _wide_console().print(table)
    kls = ", ".join(f"{o} {d['kl']:.4f} (ppl {d['ppl']:.3f})" for o, d in res.kl.items())
    print(f"KL(BF16 || FP8 KV) per token, every layer in FP8: {kls}; BF16 ppl "
          f"{next(iter(res.kl.values()))['ppl_bf16']:.3f}" if res.kl else "")
    if res.recommended:
        chose = "kv_scales: auto chose" if res.kv_scales_auto else "recommended kv_scales:"
        print(f"{chose} {res.recommended} ({res.recommended_reason})")
    if res.skip_layers:
        how = f"auto, KL target {res.kl_target:.4f}" if res.auto else "given"
        print(f"kept in BF16 ({how}): layers {', '.join(map(str, res.skip_layers))}: KL {res.kl_with_skip:.4f}, "
              f"KV capacity {res.capacity_vs_bf16:.2f}x BF16's")


def print_dag(plan, use=None) -> None:
    """`suite plan --jobs`: each job, what it waits for, the resources it asks for, and (``use``: job -> its line, from
    the executor) what it will use on this machine where that differs (a CPU machine runs every job on the CPU)."""
    from rich.table import Table

    here = {j.id: use(j) for j in plan.dag} if use is not None else {}
    differs = any(here[j.id] != j.resources.describe() for j in plan.dag) if here else False
    table = Table(title=f"jobs ({plan.executor.kind} executor)")
    for col in ("job", "waits for", "asks for", *(("on this machine",) if differs else ())):
        table.add_column(col)
    for j in plan.dag:
        table.add_row(j.id, ", ".join(j.deps) if len(j.deps) <= 3 else f"all {len(j.deps)} jobs",
                      j.resources.describe(), *((here[j.id],) if differs else ()))
    _wide_console().print(table)


def job_table(running: list, queued: list, use=None):
    """The live table of `suite run`: running jobs with where they run, queued ones with what they will use (``use``:
    job -> its line, from the executor; by default what the job asks for)."""
    from rich.table import Table

    table = Table(title="jobs", expand=False)
    for col in ("job", "state", "where / will use"):
        table.add_column(col)
    for job, placement in running:
        table.add_row(job.id, "[green]running[/]", placement)
    for job in queued:
        table.add_row(job.id, "queued", use(job) if use is not None else job.resources.describe())
    return table
