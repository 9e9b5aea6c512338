"""Gate max_perplexity_increase: on every perplexity task, the paired 95% CI [low, high] of the mean per-document
token-perplexity delta (``suite.analysis.perplexity``): pass when high <= threshold, fail when low > threshold,
inconclusive when the CI straddles it. The upper bound, not the point estimate, must pass: a point estimate passes a
variant whose few, noisy documents say nothing."""

from __future__ import annotations

from suite.analysis import perplexity
from suite.analysis.gates.base import FIX_SUMMARY, judge
from suite.analysis.gates.registry import register_gate
from suite.analysis.summary import metric_name


@register_gate("max_perplexity_increase", reads=("ppl.<task>", "ppl.<task>.delta", "ppl.<task>.delta_ci_high",
                                                  "ppl.<task>.docs_paired", "ppl.<task>.docs_unpaired"))
def max_perplexity_increase(ctx) -> None:
    limit = ctx.policy.max_perplexity_increase
    if limit is None:
        return
    for task in ctx.ppl_tasks:
        why = f"the max_perplexity_increase gate on {task}"
        got = perplexity.gate_reading(ctx.r, task, metric_name("ppl", task), why, FIX_SUMMARY)
        if got is None or not ctx.r.same_items(task, why):
            continue
        high, n, text = got
        rec = next(p for p in ctx.v.perplexity if isinstance(p, dict) and p.get("task") == task)
        c = judge(ctx.v.name, f"max perplexity increase {task} (CI high of delta)", rec["delta"], rec["ci_low"], high,
                  limit, True, n)
        c.detail = text + (f": its upper bound is above {limit:g}" if not c.passed else "")
        ctx.add(c)
