"""Gate min_goodput_gain: the variant/baseline ratio of goodput (requests per second that met every ``--goodput`` SLO)
at the headline point, judged on its interval ``tput.goodput_req_s.ratio.ci_low`` / ``.ci_high`` as
min_throughput_gain is (rules: ``gates.serving``); a side measured without --goodput, or whose goodput cannot be
compared (the baseline's is 0), is bad input naming it: never a pass. A variant whose every repetition had a goodput
of 0 fails (its ratio is 0 without doubt, though a log-scale interval cannot be formed)."""

from __future__ import annotations

from suite.analysis.gates.base import check
from suite.analysis.gates.registry import register_gate
from suite.analysis.gates.serving import judged
from suite.analysis.summary import headline_point
from suite.runtime.spread import rep_values
from suite.records.benchmark import BenchmarkResult

PLAIN = "tput.goodput_req_s"
KEY = PLAIN + ".ratio"
NAME = "min goodput gain"
FIX_SLO = ("run the benchmark with goodput SLOs: throughput.slo (its ttft_p99_ms / tpot_p99_ms are passed as "
           "--goodput when this gate is set) or throughput.bench_args.goodput, then rerun")


def _measured(ctx) -> bool:
    """Both sides have a goodput figure, and the baseline's is above 0 (a ratio to divide by); else bad input."""
    for w in (ctx.base, ctx.v):
        if PLAIN in w.metrics or w.errors:
            continue  # a variant with stage errors: the reader counts what it lacks as part of its failure
        if w is ctx.base and f"{PLAIN}: {w.name}" in ctx.said:  # the baseline's once, not once per variant
            return False
        ctx.said.add(f"{PLAIN}: {w.name}")
        ctx.bad(f"{w.name}: {PLAIN}", f"missing: its headline point was measured without --goodput (needed by {NAME})",
                FIX_SLO)
        return False
    if ctx.base.metrics.get(PLAIN) == 0 and f"{PLAIN}: {ctx.base.name}" not in ctx.said:
        ctx.said.add(f"{PLAIN}: {ctx.base.name}")
        ctx.bad(f"{ctx.base.name}: {PLAIN}", f"is 0: no baseline request met the goodput SLOs, so no ratio can be "
                f"formed (needed by {NAME})", "loosen the goodput SLOs (or lower the headline point's load), then rerun")
    return ctx.base.metrics.get(PLAIN) != 0


@register_gate("min_goodput_gain", reads=(KEY, KEY + ".ci_low", KEY + ".ci_high", PLAIN, "tput.stable"))
def min_goodput_gain(ctx) -> None:
    limit = ctx.policy.min_goodput_gain
    if limit is None or not _measured(ctx):
        return
    if (ratio := ctx.r.ratio(KEY, NAME)) is None:
        return
    c = judged(ctx, KEY, NAME, ratio, limit, False)
    point = headline_point(b, ctx.headline) if (b := ctx.v.result(BenchmarkResult)) else None
    if c.reason.startswith("no interval") and point is not None and not any(rep_values(point, "goodput_req_s")):
        # every repetition at 0 has no log-scale interval, yet nothing is uncertain: the ratio is 0 in each
        c = check(ctx.v.name, NAME, 0.0, limit, False)
        c.detail = "no request of any repetition met the goodput SLOs"
    ctx.add(c)
