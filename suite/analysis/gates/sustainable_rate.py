"""Gate min_sustainable_rate_gain: the variant/baseline ratio of the sustainable rate under the SLO; a rate whose
deciding probe was a burst (or was never checked for a steady state) is bad input; an unstable point
(``tput.stable`` 0) is inconclusive; with ``.ci_low``/``.ci_high`` it is judged on them, else on the ratio (the SLO
search's own steady-state check stands for its repeatability)."""

from __future__ import annotations

from suite.analysis.gates.base import check
from suite.analysis.gates.registry import register_gate
from suite.analysis.gates.serving import judged
from suite.analysis.summary import rate_unjudged
from suite.records.benchmark import BenchmarkResult

KEY = "tput.sustainable_rate.ratio"
NAME = "min sustainable-rate gain"


def _unjudged(ctx, w) -> None:
    if w is not ctx.v and w.name in ctx.said:  # the baseline's once, not once per variant
        return
    ctx.said.add(w.name)
    slo = w.result(BenchmarkResult).slo
    if slo.steady is False:
        ctx.bad(f"{w.name}: tput.sustainable_rate", "left out of the summary: the SLO search's deciding probe was a "
                f"burst, not a sustained rate ({slo.note}; needed by {NAME})",
                "raise throughput.slo.max_num_prompts (or lower slo.max_rate) so that every probe lasts "
                "slo.steady_windows request lifetimes, and rerun the benchmark")
    else:
        ctx.bad(f"{w.name}: tput.sustainable_rate", "was not checked for a steady state (its SLO result has no "
                "'steady': slo.steady_windows 0, no e2e latency recorded, or a result from before the check), so it "
                f"may be a burst's rate (needed by {NAME})",
                "set throughput.slo.steady_windows (default 3) and rerun the benchmark")


@register_gate("min_sustainable_rate_gain", reads=(KEY, "tput.sustainable_rate", "tput.stable"))
def min_sustainable_rate_gain(ctx) -> None:
    limit = ctx.policy.min_sustainable_rate_gain
    if limit is None:
        return
    if unsure := [w for w in (ctx.v, ctx.base) if rate_unjudged(w)]:  # judged only when its probes were steady
        for w in unsure:
            _unjudged(ctx, w)
        return
    if (ratio := ctx.r.ratio(KEY, NAME)) is None:
        return
    if KEY + ".ci_low" in ctx.v.metrics or any(w.metrics.get("tput.stable") == 0.0 for w in (ctx.v, ctx.base)):
        c = judged(ctx, KEY, NAME, ratio, limit, False)
        if c.reason.startswith("no interval"):  # unstable, no interval: the stability reason is the one that holds
            c = check(ctx.v.name, NAME, ratio, limit, False)
        ctx.add(c)
    else:
        ctx.add(check(ctx.v.name, NAME, ratio, limit, False))
