"""Shared by the accuracy gates: reading a task's two accuracies and the paired interval, and the rules that make an
accuracy check inconclusive.

Rules (pass, fail, inconclusive):
- drop gates (max_drop, max_relative_drop): with a paired interval of the delta, the drop's interval decides: pass
  when all of it is within the limit, fail when all of it is beyond, inconclusive when it straddles the limit; the
  point estimate (shown) always agrees with a decided interval. Without a paired interval (no per-item records
  paired), the point estimate decides, as before.
- an engine-induced spread (``acc.<task>.engine_spread``: the score range of a variant across engine
  configurations) larger than the room the gate allows turns a pass into inconclusive; a fail stays a fail.
- a served evaluation whose served check disagreed (``acc.<task>.served_check_disagree`` > 0, variant or baseline)
  is inconclusive, pass or fail: its scores are not those the in-process engine gives.
"""

from __future__ import annotations

from suite.analysis import paired as pairing
from suite.analysis.gates.base import GateCheck, check, judge
from suite.analysis.summary import metric_name
from suite.records.evaluate import EvaluateResult


def accuracies(ctx, task: str, why: str) -> tuple[float, float] | None:
    """(variant, baseline) accuracy on ``task``, each checked against its evaluate record, scored on as many items."""
    r = ctx.r
    a, b = r.accuracy(ctx.v, task, why), r.accuracy(ctx.base, task, why)
    if a is None or b is None or not r.same_items(task, why):
        return None
    return a, b


def paired_if_any(ctx, task: str, why: str):
    """(CI low, n, CI high, delta) of the paired delta when the summary has one, else None."""
    if metric_name("acc", task) + ".delta_ci_low" not in ctx.v.metrics:
        return None
    return ctx.r.paired(task, why)


def interval_method(ctx, task: str) -> str:
    """How the variant's paired interval on ``task`` was made, in words, from its paired record's ``ci_method``."""
    rec = next((p for p in ctx.v.paired if isinstance(p, dict) and p.get("task") == task), {})
    return pairing.interval_name(rec.get("ci_method"))


def n_of(ctx, task: str) -> int | None:
    n = ctx.v.metrics.get(f"{metric_name('acc', task)}.items_paired")
    return int(n) if isinstance(n, (int, float)) and n == n and abs(n) < 1e12 else ctx.r.scored_n(task)


def drop_check(ctx, task: str, gate: str, drop: float, limit: float, scale: float, paired) -> GateCheck:
    """A maximum on a drop (baseline minus variant, divided by ``scale``), judged on the paired interval if any."""
    n = n_of(ctx, task)
    if paired is None:
        c = check(ctx.v.name, gate, drop, limit, True, n)
    else:
        low, n, high, _ = paired
        c = judge(ctx.v.name, gate, drop, -high / scale, -low / scale, limit, True, n, measured=drop,
                  method=interval_method(ctx, task))
    return served_check(ctx, engine_spread(ctx, c, task, room=limit * scale), task)


def engine_spread(ctx, c: GateCheck, task: str, room: float) -> GateCheck:
    """A pass becomes inconclusive when the variant's or the baseline's score moves with the engine configuration by
    more than ``room`` (in accuracy units)."""
    key = metric_name("acc", task) + ".engine_spread"
    spreads = [(w.name, w.metrics[key]) for w in (ctx.v, ctx.base) if isinstance(w.metrics.get(key), (int, float))]
    if not c.passed or not spreads:
        return c
    name, spread = max(spreads, key=lambda x: x[1])
    if spread != spread or spread > room:  # NaN counts as too large
        c.make_inconclusive(f"{name}'s {task} score moves by {spread:.4g} between engine configurations, more than "
                            f"the {room:.4g} the gate allows", "pin the engine (eval.deterministic) or widen the margin")
    return c


def served_check(ctx, c: GateCheck, task: str) -> GateCheck:
    """A pass or a fail becomes inconclusive when the variant's or the baseline's served scores of ``task`` disagree
    with the in-process engine's on the served check's items, or when a check that ran has no result for the task
    (``suite.analysis.served_check``)."""
    key = metric_name("acc", task)
    for w in (ctx.v, ctx.base):
        if w.check_result(EvaluateResult) is None:
            continue
        disagree = w.metrics.get(f"{key}.served_check_disagree")
        if not isinstance(disagree, (int, float)) or disagree != disagree:
            return c.make_inconclusive(f"{w.name}'s served check has no comparison for {task}",
                                       "see the run's warnings for why, or score with eval.engine: vllm")
        if disagree > 0:
            items = int(w.metrics.get(f"{key}.served_check_items", 0))
            return c.make_inconclusive(f"{w.name}'s served {task} scores disagree with the in-process engine on "
                                       f"{int(disagree)} of {items} checked items",
                                       "score with eval.engine: vllm (the run's warnings name the items)")
    return c
