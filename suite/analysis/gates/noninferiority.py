"""Gate non_inferiority_margin / default_non_inferiority_margin: on the paired 95% CI [low, high] of the delta
(variant minus baseline), pass when low >= -m, fail when high < -m, inconclusive when the CI straddles -m (what
would decide it: the items needed at the observed variance)."""

from __future__ import annotations

from suite.analysis.gates.accuracy import engine_spread, interval_method, served_check
from suite.analysis.gates.base import judge
from suite.analysis.gates.registry import register_gate


@register_gate("non_inferiority_margin", reads=("acc.<task>.delta_ci_low", "acc.<task>.delta_ci_high",
                                                "acc.<task>.items_paired"))
def non_inferiority(ctx) -> None:
    for task in ctx.accuracy_tasks:
        margin = ctx.setting("non_inferiority_margin", task)
        if margin is None or (got := ctx.r.paired(task, f"the non-inferiority gate on {task}")) is None:
            continue
        low, n, high, delta = got
        c = judge(ctx.v.name, f"non-inferiority {task} (CI low of delta)", delta, low, high, -margin, False, n,
                  method=interval_method(ctx, task))
        ctx.add(served_check(ctx, engine_spread(ctx, c, task, room=margin), task))
