"""Gate on a task whose evaluation eval.sequential stopped early: the group-sequential test, not the fixed interval.

A stopped task scored only the first n_k items of the seeded order, so the fixed-size gates (max_drop,
non_inferiority_margin) cannot judge it: its interval would be read at a size the data chose. This gate checks that
the items the variant scored are exactly a look's prefix of the order (``suite.runtime.sequential.stopped_look``;
any other subset could have been picked) and that the baseline scored every item, then recomputes the test from the
two samples files (``suite.runtime.sequential.run``) at the policy's margin: the smallest of the task's max_drop and
non_inferiority_margin. Pass or fail as the test decides at that look; undecided (a policy stricter than the run's
margin) is inconclusive. A stopped task under max_relative_drop or min_recovery_lower_bound, which need every item,
is inconclusive. Tasks scored in full are judged by the fixed-size gates, whose verdict the last look is.
"""

from __future__ import annotations

from pathlib import Path

from suite.analysis.gates.base import GateCheck
from suite.analysis.gates.registry import register_gate
from suite.analysis.paired import item_scores
from suite.runtime import sequential as seq
from suite.records.evaluate import EvaluateResult

RERUN = "rerun the evaluation without eval.sequential (every item), or with the gate's margin in the recipe"


def stopped_tasks(v) -> set[str]:
    """The tasks the variant's evaluation stopped before its last item (eval.sequential)."""
    ev = v.result(EvaluateResult)
    return {t for t, s in (ev.sequential if ev else {}).items() if s.items_used < s.n_items}


@register_gate("max_drop", name="sequential", reads=("acc.<task>",))
def sequential_gate(ctx) -> None:
    for task in sorted(stopped_tasks(ctx.v)):
        margins = [m for m in (ctx.setting("max_drop", task), ctx.setting("non_inferiority_margin", task))
                   if m is not None]
        full_only = [g for g in ("max_relative_drop", "min_recovery_lower_bound") if ctx.setting(g, task) is not None]
        if not margins and not full_only:
            continue
        name = f"sequential {task}"
        if full_only:
            ctx.add(GateCheck(ctx.v.name, name, float("nan"), float("nan"), False, n=None).make_inconclusive(
                f"{task} was stopped early by eval.sequential; {full_only[0]} is judged on every item", RERUN))
            continue
        if (judged := _recompute(ctx, task, min(margins))) is not None:
            ctx.add(judged)


def _recompute(ctx, task: str, margin: float) -> GateCheck | None:
    """The test at ``margin`` on the variant's and the baseline's samples files, after checking the items scored."""
    ev, base_ev = ctx.v.result(EvaluateResult), ctx.base.result(EvaluateResult)
    rec = ev.sequential[task]
    field = f"{ctx.v.name}: evaluate.sequential.{task}"
    base_rec = base_ev.sequential.get(task) if base_ev else None
    if base_rec is None or (base_rec.seed, base_rec.looks_planned) != (rec.seed, rec.looks_planned):
        ctx.bad(field, f"the baseline was not scored in the same looks (seed {rec.seed}, {rec.looks_planned} looks)",
                "rerun the run with eval.sequential set for the baseline and the variant")
        return None
    try:
        mine = item_scores(_in_run(ctx, ev.samples_files[task]), rec.metric)
        theirs = item_scores(_in_run(ctx, base_ev.samples_files[task]), rec.metric)
        if len(theirs) != rec.n_items:
            raise ValueError(f"the baseline scored {len(theirs)} of the task's {rec.n_items} items, not all")
        k = seq.stopped_look(mine, theirs, rec.seed, rec.looks_planned)
    except (KeyError, OSError, ValueError) as e:
        ctx.bad(field, f"its per-item records cannot be judged: {e}", "rerun the evaluation (`suite run --resume`)")
        return None
    order = seq.item_order(theirs, rec.seed)[:len(mine)]
    res = seq.run([mine[key] - theirs[key] for key in order], margin, rec.looks_planned, n_items=rec.n_items)
    last = res.looks[-1] if res.looks else None
    delta = last.delta if last else float("nan")
    c = GateCheck(ctx.v.name, f"sequential {task} (look {k + 1} of {rec.looks_planned}, {len(mine)} of "
                  f"{rec.n_items} items)", delta, -margin, res.decision == seq.PASS, n=len(mine))
    if res.decision not in (seq.PASS, seq.FAIL):
        c.make_inconclusive(f"the sequential test at margin {margin:g} does not decide at look {k + 1} "
                            f"(z {last.z:.3g}, bound ±{last.bound:.3g})" if last else "no look reached", RERUN)
    return c


def _in_run(ctx, name: str) -> Path:
    """A samples file's path: as recorded, or a name relative to the run folder."""
    p = Path(name)
    return p if p.is_absolute() or ctx.summary is None else Path(ctx.summary.run_dir or ".") / p
