"""Reading one variant's numbers (and its baseline's) for the gates from the summary ``derive.summarize`` made of the
run folder's records: a number that is missing, not finite or not what it can be becomes a problem (bad input), except
what a variant with stage errors lacks (part of its failure)."""

from __future__ import annotations

import math

from suite.analysis.gates.base import FIX_SUMMARY
from suite.analysis.summary import metric_name
from suite.records.summary import VariantSummary
from suite.records.evaluate import EvaluateResult


class Reader:
    """Reads the numbers of one variant (and its baseline) for the gates; bad ones become problems,
    except that a variant with errors collects what it lacks in ``lacking`` (part of its failure)."""

    def __init__(self, v: VariantSummary, base: VariantSummary, src: str, bad, headline: str = "max"):
        self.v, self.base, self.src, self.bad = v, base, src, bad
        self.headline = headline  # the recipe's throughput.headline: which load point the tput.* metrics are
        self.lacking: list[str] = []

    def get(self, who: VariantSummary, key: str, why: str, nonneg: bool = False) -> float | None:
        if key not in who.metrics:
            if who is self.v and self.v.errors:
                self.lacking.append(key)
            else:
                self.bad(f"{who.name}: {key}", f"missing (needed by {why})",
                         "run the stage that measures it (the recipe's eval/throughput sections), or drop the gate")
            return None
        value = who.metrics[key]
        if not math.isfinite(value):
            self.bad(f"{who.name}: {key}", f"is {value}, not a finite number (needed by {why})", FIX_SUMMARY)
            return None
        if nonneg and value < 0:
            self.bad(f"{who.name}: {key}", f"is {value}: below 0, which it cannot be (needed by {why})", FIX_SUMMARY)
            return None
        return value

    def accuracy(self, who: VariantSummary, task: str, why: str) -> float | None:
        key = metric_name("acc", task)
        value = self.get(who, key, why)
        scores = [sc for sc in _scores(who) if sc.task == task]
        if value is None:
            return None
        if len(scores) != 1:  # an evaluate result scores a task once
            self.bad(f"{who.name}: {key}", f"has {'no' if not scores else len(scores)} evaluate score record(s) "
                     f"for {task} (needed by {why})", FIX_SUMMARY)
            return None
        return value

    def same_items(self, task: str, why: str) -> bool:
        """The variant and the baseline were scored on as many items of ``task`` (a variant scored on 1
        item against a baseline on 1,319 is no comparison)."""
        ns = []
        for who in (self.v, self.base):
            score = next((sc for sc in _scores(who) if sc.task == task), None)
            ns.append(score.n if score else None)
        if None in ns or ns[0] != ns[1]:
            self.bad(f"{self.v.name}: {metric_name('acc', task)}", f"scored on {ns[0]} item(s) against the "
                     f"baseline's {ns[1]} (needed by {why})",
                     "score both on the same items (the same eval.tasks limits), then rerun")
            return False
        return True

    def scored_n(self, task: str) -> int | None:
        score = next((sc for sc in _scores(self.v) if sc.task == task), None)
        return score.n if score else None

    def paired(self, task: str, why: str) -> tuple[float, int, float, float] | None:
        """(CI low of the delta, n, CI high, delta) for a CI gate on ``task``."""
        key = metric_name("acc", task)
        low = self.get(self.v, key + ".delta_ci_low", why)
        rec = next((p for p in self.v.paired if p.get("task") == task), {})
        n = self.v.metrics.get(key + ".items_paired", rec.get("n"))
        field_n = f"{self.v.name}: {key}.items_paired"
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n)
                              or n != int(n) or n < 0):
            self.bad(field_n, f"the paired item count is {n!r}, not a count", FIX_SUMMARY)
            return None
        if n is not None and n < 2:
            self.bad(field_n, f"paired over {int(n)} common item(s): a confidence interval needs at least 2 "
                              f"(needed by {why})",
                     "check that the variant and the baseline scored the same items (their samples_*.jsonl)")
            return None
        if low is None:
            return None
        if n is None:
            self.bad(field_n, f"missing: the CI of the delta does not state over how many items (needed by {why})",
                     FIX_SUMMARY)
            return None
        high = self.v.metrics.get(key + ".delta_ci_high", rec.get("ci_high"))
        delta = rec.get("delta", self.v.metrics.get(key + ".delta"))
        if not sane_interval(low, delta, high):
            self.bad(f"{self.v.name}: {key}.delta_ci", f"[{low}, {high}] around the delta {delta} is not an interval "
                     f"(it needs finite bounds, low <= delta <= high; needed by {why})", FIX_SUMMARY)
            return None
        return low, int(n), high, delta

    def interval(self, who: VariantSummary, key: str, point: float, why: str) -> tuple[float, float] | None:
        """(``key``.ci_low, ``key``.ci_high) of a throughput or latency figure, or None when the summary has none (one
        repetition, or a run from before the intervals); an interval that is not one (NaN, low > point > high) is a
        problem."""
        low, high = who.metrics.get(key + ".ci_low"), who.metrics.get(key + ".ci_high")
        if low is None and high is None:
            return None
        if not sane_interval(low, point, high):
            self.bad(f"{who.name}: {key}.ci_low/ci_high", f"[{low}, {high}] around {point} is not an interval (it "
                     f"needs finite bounds, low <= value <= high; needed by {why})", FIX_SUMMARY)
            return None
        return low, high

    def ratio(self, key: str, why: str) -> float | None:
        return self.get(self.v, key, why, nonneg=True)


def sane_interval(low, point, high) -> bool:
    """Finite numbers with low <= point <= high (a tolerance of 1e-12 for rounding)."""
    nums = (low, point, high)
    return (all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums)
            and low <= point + 1e-12 and point <= high + 1e-12)


def _scores(v: VariantSummary) -> list:
    """The scores of the variant's evaluation (none without one)."""
    return ev.scores if (ev := v.result(EvaluateResult)) is not None else []
