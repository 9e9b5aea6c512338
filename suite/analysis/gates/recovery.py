"""Gate min_recovery_lower_bound: (baseline + CI low of the delta) / baseline at least the bound; fail when even the
CI high gives less, inconclusive when the bound falls inside."""

from __future__ import annotations

from suite.analysis.gates.accuracy import engine_spread, interval_method, served_check
from suite.analysis.gates.base import judge
from suite.analysis.gates.registry import register_gate
from suite.analysis.summary import metric_name


@register_gate("min_recovery_lower_bound", reads=("acc.<task>", "acc.<task>.delta_ci_low", "acc.<task>.delta_ci_high"))
def min_recovery_lower_bound(ctx) -> None:
    for task in ctx.accuracy_tasks:
        bound = ctx.policy.min_recovery_lower_bound.get(task)
        if bound is None:
            continue
        why = f"the recovery gate on {task}"
        got, b = ctx.r.paired(task, why), ctx.r.accuracy(ctx.base, task, why)
        if got is None or b is None:
            continue
        if b <= 0:
            ctx.bad(f"{ctx.base.name}: {metric_name('acc', task)}", f"is {b}: recovery relative to it is undefined",
                    f"gate {task} with non_inferiority_margin instead")
            continue
        low, n, high, delta = got
        c = judge(ctx.v.name, f"recovery lower bound {task}", (b + delta) / b, (b + low) / b, (b + high) / b, bound,
                  False, n, method=interval_method(ctx, task))
        ctx.add(served_check(ctx, engine_spread(ctx, c, task, room=max(0.0, (1 - bound) * b)), task))
