"""Gate max_drop / default_max_drop: baseline minus variant accuracy per task at most the limit (rules:
``gates.accuracy``)."""

from __future__ import annotations

from suite.analysis.gates.accuracy import accuracies, drop_check, paired_if_any
from suite.analysis.gates.registry import register_gate


@register_gate("max_drop", reads=("acc.<task>", "acc.<task>.delta_ci_low", "acc.<task>.delta_ci_high"))
def max_drop(ctx) -> None:
    for task in ctx.accuracy_tasks:
        limit = ctx.setting("max_drop", task)
        why = f"the drop gates on {task}"
        if limit is None or (ab := accuracies(ctx, task, why)) is None:
            continue
        a, b = ab
        ctx.add(drop_check(ctx, task, f"max drop {task}", b - a, limit, 1.0, paired_if_any(ctx, task, why)))
