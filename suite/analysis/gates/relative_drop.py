"""Gate max_relative_drop / default_max_relative_drop: (baseline - variant) / baseline at most the limit (rules:
``gates.accuracy``); a baseline accuracy of 0 or less is bad input."""

from __future__ import annotations

from suite.analysis.gates.accuracy import accuracies, drop_check, paired_if_any
from suite.analysis.gates.registry import register_gate
from suite.analysis.summary import metric_name


@register_gate("max_relative_drop", reads=("acc.<task>", "acc.<task>.delta_ci_low", "acc.<task>.delta_ci_high"))
def max_relative_drop(ctx) -> None:
    for task in ctx.accuracy_tasks:
        rel = ctx.setting("max_relative_drop", task)
        why = f"the drop gates on {task}"
        if rel is None or (ab := accuracies(ctx, task, why)) is None:
            continue
        a, b = ab
        if b <= 0:
            ctx.bad(f"{ctx.base.name}: {metric_name('acc', task)}", f"is {b}: a drop relative to it is undefined",
                    f"gate {task} with max_drop (absolute) instead")
            continue
        ctx.add(drop_check(ctx, task, f"max relative drop {task}", (b - a) / b, rel, b, paired_if_any(ctx, task, why)))
