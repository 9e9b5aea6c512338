"""Shared by the throughput and latency gates: the stability and interval rules.

A throughput or latency gate is judged on the conservative bound of its interval over repetitions
(``<key>.ci_low`` / ``<key>.ci_high``): a minimum passes when ci_low reaches it and fails when ci_high falls short;
a maximum passes when ci_high is within it and fails when ci_low is beyond; otherwise inconclusive. A point marked
unstable (``tput.stable`` 0.0, the variant's or the baseline's) is inconclusive whatever its numbers; a figure with no
interval (one repetition, or an older run) is inconclusive: "no interval: N repetition(s)". With 2 repetitions (on
either side) the interval is the min-max range, which is no confidence interval (at a true ratio exactly at the limit
it passes ``min_throughput_gain`` about 16% of the time, against at most 2.5% for the t interval of 3): it can fail a
gate, never pass one; such a pass is inconclusive: "2 repetitions: the min-max range is no confidence interval"."""

from __future__ import annotations

from suite.analysis.gates.base import GateCheck, judge
from suite.analysis.summary import headline_point
from suite.records.benchmark import BenchmarkResult


def _recorded_counts(ctx) -> list[int | None]:
    """The variant's and the baseline's repetition rows at the headline point (None: it recorded none)."""
    counts = []
    for w in (ctx.v, ctx.base):
        point = headline_point(b, ctx.headline) if (b := w.result(BenchmarkResult)) else None
        counts.append(len(point.repetitions) if point is not None and point.repetitions else None)
    return counts


def repetitions(ctx) -> int:
    return min(n or 1 for n in _recorded_counts(ctx))


def recorded_repetitions(ctx) -> int | None:
    """The fewer of the variant's and the baseline's recorded repetitions at the headline point; None when either
    recorded no repetition rows (an older run: its recorded interval is judged as it is)."""
    counts = _recorded_counts(ctx)
    return None if None in counts else min(counts)


def judged(ctx, key: str, gate: str, point: float, limit: float, upper: bool, interval_of=None) -> GateCheck:
    """The check of a serving figure ``point`` (its key ``key``) against ``limit``, by the rules above."""
    unstable = [w.name for w in (ctx.v, ctx.base) if w.metrics.get("tput.stable") == 0.0]
    interval = ctx.r.interval(interval_of or ctx.v, key, point, gate)
    low, high = interval if interval is not None else (point, point)
    c = judge(ctx.v.name, gate, point, low, high, limit, upper, None, measured=point)
    if unstable:
        return c.make_inconclusive(f"unstable throughput point ({', '.join(unstable)}: tput.stable = 0, the "
                                   "repetitions disagree beyond the stability rule)",
                                   "rerun the benchmark on a quiet machine, with more repetitions")
    if interval is None:
        n = repetitions(ctx)
        return c.make_inconclusive(f"no interval: {n} repetition(s)",
                                   "measure at least 3 repetitions (throughput.repetitions) so the interval can decide")
    if c.passed and (n := recorded_repetitions(ctx)) is not None and n < 3:
        return c.make_inconclusive(f"{n} repetitions: the min-max range is no confidence interval",
                                   "measure at least 3 repetitions (throughput.repetitions) so the interval can decide")
    if c.inconclusive:
        c.decide = "more repetitions (throughput.repetitions), or a quieter machine, to narrow the interval"
    return c
