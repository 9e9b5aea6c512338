"""Gate min_throughput_gain: the variant/baseline output tok/s ratio at the headline point, judged on its interval
``tput.output_tok_s.ratio.ci_low`` / ``.ci_high`` (rules: ``gates.serving``)."""

from __future__ import annotations

from suite.analysis.gates.registry import register_gate
from suite.analysis.gates.serving import judged

KEY = "tput.output_tok_s.ratio"


@register_gate("min_throughput_gain", reads=(KEY, KEY + ".ci_low", KEY + ".ci_high", "tput.stable"))
def min_throughput_gain(ctx) -> None:
    limit = ctx.policy.min_throughput_gain
    if limit is None:
        return
    name = "min throughput gain"
    if (ratio := ctx.r.ratio(KEY, name)) is not None:
        ctx.add(judged(ctx, KEY, name, ratio, limit, False))
