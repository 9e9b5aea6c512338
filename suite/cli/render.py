"""Rich tables and console output for the commands (nothing else)."""

from __future__ import annotations




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
    table.add_column("variant")
    for t in summary.tasks:
        table.add_column(t.removeprefix("suite_"), justify="right")
    for _, head, _ in cols:
        table.add_column(head, justify="right")
    for v in summary.variants:
        row = [v.name + (" (base)" if v.is_baseline else "")]
        row += [f"{v.metrics[k]:.4f}" if (k := f"acc.{t}") in v.metrics else "-" for t in summary.tasks]
        row += [fmt.format(v.metrics[k]) if k in v.metrics else "-" for k, _, fmt in cols]
        table.add_row(*row)
    _wide_console().print(table)
    print_load_points(summary)



def print_load_points(summary) -> None:
    """Every load point of every variant: median output tok/s and its spread, p99 latencies, and what
    bounded the point (suite.stages.benchmark.bottleneck)."""
    from rich.table import Table

    table = Table(title="load points (median of repetitions; bound = what limited the point)")
    for head in ("variant", "point", "out tok/s", "min-max", "req/s", "TTFT p99 ms", "TPOT p99 ms", "of offline",
                 "bound"):
        table.add_column(head, justify="left" if head in ("variant", "point", "bound") else "right")
    rows = 0
    for v in summary.variants:
        for p in v.benchmark.points if v.benchmark else []:
            spread = f"{p.output_tok_s_min:.0f}-{p.output_tok_s_max:.0f}" if p.output_tok_s_min is not None else "-"
            ceiling = f"{p.ceiling_fraction:.0%}" if p.ceiling_fraction is not None else "-"
            table.add_row(v.name, p.label, f"{p.output_tok_s:.1f}" if p.ok else "failed", spread, f"{p.req_s:.2f}",
                          f"{p.ttft_p99_ms:.0f}", f"{p.tpot_p99_ms:.1f}", ceiling, p.bottleneck or "-")
            rows += 1
    if rows:
        _wide_console().print(table)



def _wide_console():
    """A terminal's own width; 160 columns when the output is a file or a CI log."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)
