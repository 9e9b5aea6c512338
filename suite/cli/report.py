"""`suite report` and `suite frontier`: a run's HTML report, the Pareto front across runs."""

from __future__ import annotations

import sys
from pathlib import Path

from suite import api
from suite.outputs import frontier
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK


def cmd_report(args) -> int:
    print(f"report: {api.load_run(args.run, who='`suite report`').report(args.out)}")
    return EXIT_OK



UNCHECKED = ("SLO rate's steadiness was not checked (it may be a burst's; set throughput.slo.steady_windows and run "
             "the benchmark again)")


def cmd_frontier(args) -> int:
    runs = [api.load_run(r, who="`suite frontier`").summary for r in args.runs]
    out = Path(args.out)
    key = "tput.output_tok_s" if args.throughput == "saturation" else "tput.sustainable_output_tok_s"
    res = frontier.run(frontier.FrontierConfig(None, out / "frontier.png", summaries=runs, accuracy=args.accuracy,
                                               throughput=key, out_html=out / "frontier.html"))
    if not res.points:
        why = f"; left out: {', '.join(res.left_out)}, whose {UNCHECKED}" if res.left_out else ""
        print(f"no variant in these runs has both {args.accuracy} and {key}{why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for p in res.points:
        print(f"{'*' if p.name in res.pareto else ' '} {p.name:<40} {p.throughput:>12,.1f} tok/s  {p.accuracy:.4f}"
              + ("  (baseline)" if p.is_baseline else ""))
    print(f"* = on the Pareto front; {res.png}, {res.html}")
    if res.left_out:  # the gate does not judge these rates either
        print(f"not shown: {', '.join(res.left_out)}: the {UNCHECKED}")
    if res.cost_png:  # priced runs (throughput.gpu_hour_cost): accuracy against cost per 1M output tokens
        print(f"cost front (lower cost is better): {', '.join(res.cost_pareto)}; {res.cost_png}")
    return EXIT_OK
