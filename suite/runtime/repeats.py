"""When a gated load point has been repeated enough: the throughput gates' decision after each repetition.

A load point that a throughput gate judges (min_throughput_gain, min_goodput_gain: the variant/baseline ratio at the
headline point) is repeated until that ratio's interval decides the gate, at least ``MIN_REPETITIONS`` and at most
``throughput.repetitions`` (R) times (``throughput.adaptive_repetitions``). The baseline runs first, its R
repetitions as before; the variant's point looks after each of its repetitions n = 2, ..., R.

Design (why it is this one: docs/06-gate-and-statistics.md, "Repetitions a gated point needs"):

- The last look (n = R) is the gate's own interval on R repetitions (``suite.runtime.spread.ratio_interval``, a 95%
  Welch t interval on the logs, centred on the ratio of medians and widened for it), unchanged: a point that no earlier look decides
  gets exactly the verdict the fixed count gives it.
- An interim look (2 <= n < R) stops the point only when the same Welch construction, at the stricter one-sided
  level ``INTERIM_ALPHA / (R - 2)`` per direction (Bonferroni over the at most R - 2 interim looks), decides the gate
  (pass: its lower bound reaches the limit; fail: its upper bound falls short), and the gate's own interval on those
  n repetitions decides it the same way (at n = 2 the gate reads the min-max range, which can differ). The gate then
  judges the stopped point as it judges any: its interval, centred where the interim one is and narrower, decides it
  as the look did.
- Looking more than once inflates the false pass; by the union bound the interim looks add at most
  ``INTERIM_ALPHA`` (0.005) to the last look's rate, whatever the correlation of the looks (the gate judging the
  baseline repetitions the looks saw: each look records them). At the margin (true ratio = the limit) the fixed
  count's false-pass rate is the gate interval's own (at most 2.5%, below it at small R where Welch's degrees of
  freedom are conservative; tests/stages/benchmark/test_repeats.py simulates it), and the looks add 0.1 to 0.4 points
  to it. A fail stop removes only paths that could have passed, so it raises no
  false pass.

Why Bonferroni and not the evaluation's alpha spending (``suite.runtime.sequential``): a look here is one more whole
``vllm bench serve`` run, the looks are few (R - 2 interim ones) and at unequal, tiny degrees of freedom (a Welch t on
2 to R repetitions), where a spending function's normal-theory bounds do not hold; the union bound needs no model of
how the looks are correlated, and its cost is small: a clear-cut ratio (FP8 50% faster against a limit of 1.2,
repetitions within 1%) clears even the strict interim level at the third repetition. A pass needs 3 repetitions: at
2 the gate reads the min-max range, which can fail a gate and never pass one (``suite.analysis.gates.serving``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from scipy import stats

from suite.runtime.spread import MEDIAN_SE, ratio_interval, welch_log_ratio

INTERIM_ALPHA = 0.005  # one-sided, per direction, over all interim looks of a point (Bonferroni-split)
MIN_REPETITIONS = 2
EPS = 1e-9  # the gate's tolerance on a limit (suite.analysis.gates.base.EPS)
PASS, FAIL = "pass", "fail"
AT_MAXIMUM = "at the maximum"


def decided_after(n: int) -> str:
    return f"decided after {n}"


def interim_alpha(max_repetitions: int) -> float:
    """The one-sided level of each interim look (n = 2 .. R - 1): ``INTERIM_ALPHA`` split over R - 2 looks."""
    return INTERIM_ALPHA / max(1, max_repetitions - 2)


def interim_interval(variant: Sequence[float], base: Sequence[float],
                     alpha: float) -> tuple[Optional[float], Optional[float]]:
    """(low, high) of median(variant) / median(base) as ``spread.ratio_interval`` forms its t interval (Welch on the
    logs, centred on the log of the ratio of medians, widened by ``MEDIAN_SE``), at the one-sided level ``alpha`` on each side; (None, None)
    with fewer than 2 repetitions on a side or a figure <= 0 (no log)."""
    v = [float(x) for x in variant if x is not None]
    b = [float(x) for x in base if x is not None]
    if len(v) < 2 or len(b) < 2 or min(v) <= 0 or min(b) <= 0:
        return None, None
    mid, se, df = welch_log_ratio(v, b)
    half = float(stats.t.ppf(1.0 - alpha, df)) * MEDIAN_SE * se
    return math.exp(mid - half), math.exp(mid + half)


def decision(low: Optional[float], high: Optional[float], limit: float, method: Optional[str] = "t") -> Optional[str]:
    """A minimum ratio's decision on [low, high] as the gate judges it (``suite.analysis.gates.serving``): pass when low
    reaches the limit, fail when high falls short of it, None (undecided) otherwise or without an interval. A min-max
    range (``method`` "range": fewer than 3 repetitions a side) is no confidence interval: it can fail, never pass."""
    if low is None or high is None:
        return None
    if low >= limit - EPS:
        return PASS if method != "range" else None
    return FAIL if high < limit - EPS else None


@dataclass
class Look:
    """One look at a gated point after ``repetitions`` of its repetitions: per gated figure, the gate's interval and
    the interim one with their decisions; ``stop``: every gate is decided (or this is the last look)."""

    repetitions: int
    gates: dict[str, dict] = field(default_factory=dict)
    stop: bool = False
    stopped: Optional[str] = None

    def as_dict(self) -> dict:
        return asdict(self)


def look(variant: dict[str, Sequence[float]], base: dict[str, Sequence[float]], limits: dict[str, float],
         max_repetitions: int) -> Look:
    """The look after ``n`` repetitions of the variant's point (n: the length of its figures' lists): ``variant`` and
    ``base`` map each gated figure (``output_tok_s``, ``goodput_req_s``) to its repetitions' values, ``limits`` to the
    gate's least ratio. Stops at n = R ("at the maximum"), or earlier when every gate is decided by both the interim
    and the gate's own interval, alike (module docstring)."""
    n = max((len(variant.get(k) or ()) for k in limits), default=0)
    out = Look(repetitions=n)
    alpha = interim_alpha(max_repetitions)
    for key, limit in limits.items():
        v, b = list(variant.get(key) or ()), list(base.get(key) or ())
        low, high, method = ratio_interval(v, b) if len(v) >= MIN_REPETITIONS else (None, None, None)
        i_low, i_high = interim_interval(v, b, alpha) if n < max_repetitions else (None, None)  # last: the gate's
        own, interim = decision(low, high, limit, method), decision(i_low, i_high, limit)
        out.gates[key] = {"limit": limit, "ci_low": low, "ci_high": high, "decision": own, "interim_ci_low": i_low,
                          "interim_ci_high": i_high, "interim_alpha": alpha,
                          "decided": interim is not None and interim == own}
    if n >= max_repetitions:
        out.stop, out.stopped = True, AT_MAXIMUM
    elif n >= MIN_REPETITIONS and out.gates and all(g["decided"] for g in out.gates.values()):
        out.stop, out.stopped = True, decided_after(n)
    return out
