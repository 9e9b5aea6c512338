"""Which load points the throughput gates judge, and when one has been repeated enough (adaptive_repetitions).

A variant's config carries ``adaptive`` (records.benchmark.AdaptiveRepetitions) where the recipe sets a throughput
gate and asks for at least 3 repetitions: the gates judge the headline point against the baseline's headline point,
so every point that can be the headline (each of the first workload's points under ``headline: max``, its last under
``last``) is repeated until suite.runtime.repeats decides every gate, at least 2 and at most ``repetitions`` times;
the other points (another workload's) keep the fixed count. The baseline's repetitions are read once, before any
server starts, from the result its benchmark job wrote (the variant's job waits for it: suite.plan.dag).
"""

from __future__ import annotations

from pathlib import Path

from suite.records.benchmark import BenchmarkConfig, BenchmarkResult, LoadPoint
from suite.runtime import repeats
from suite.runtime.errors import SuiteError
from suite.runtime.spread import rep_values

class Until:
    """One gated point's stopping rule: ``after(points)`` looks at its repetitions so far and says whether to stop;
    ``fields()`` is what the point records of it."""

    def __init__(self, base: dict[str, list[float]], limits: dict[str, float], most: int, against: str = ""):
        self.base, self.limits, self.most, self.against = base, limits, most, against
        self.looks: list[repeats.Look] = []

    def after(self, points: list[LoadPoint]) -> bool:
        if len(points) < repeats.MIN_REPETITIONS:
            return False
        figures = {k: [getattr(p, k) for p in points if getattr(p, k) is not None] for k in self.limits}
        self.looks.append(repeats.look(figures, self.base, self.limits, self.most))
        return self.looks[-1].stop

    def fields(self) -> dict:
        """LoadPoint.repetitions_max, .stopped and .repetition_looks."""
        return {"repetitions_max": self.most, "stopped": self.looks[-1].stopped if self.looks else None,
                "repetition_looks": [{**lk.as_dict(), "baseline_point": self.against, "baseline": self.base}
                                     for lk in self.looks]}


class GatedPoints:
    """The benchmark's gated points and the baseline's repetitions they are judged against (none: every point runs
    the fixed count)."""

    def __init__(self, config: BenchmarkConfig):
        self.config, self.base, self.against = config, {}, None
        a = config.adaptive
        if a is None or config.repetitions <= repeats.MIN_REPETITIONS or not a.limits:
            self.active = False
            return
        self.active = True
        path = Path(a.baseline_result)
        try:
            result = BenchmarkResult.read(path)
        except (OSError, ValueError, SuiteError) as e:
            raise ValueError(f"{path}: the baseline's benchmark result cannot be read ({e}) (fix: rerun the "
                             "baseline's benchmark, or set throughput.adaptive_repetitions: false)") from None
        point = result.headline_point(a.headline)
        if point is None:
            raise ValueError(f"{path}: the baseline's benchmark has no load point that ran (fix: rerun the baseline's "
                             "benchmark, or set throughput.adaptive_repetitions: false)")
        self.against = point.label
        self.base = {k: rep_values(point, k) for k in a.limits}

    def until(self, workload: str, index: int, count: int) -> Until | None:
        """The stopping rule of the ``index``-th of ``count`` load points of ``workload``; None: a fixed count."""
        if not self.active or workload != self.config.workloads[0]:
            return None
        if self.config.adaptive.headline == "last" and index != count - 1:
            return None
        return Until(self.base, self.config.adaptive.limits, self.config.repetitions, self.against)
