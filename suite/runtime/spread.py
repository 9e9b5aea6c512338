"""Throughput's uncertainty from a load point's repetitions: intervals, the stability rule, the ratio's interval.

Method (and why). Each repetition of a load point is one whole ``vllm bench serve`` run against the warm server;
what moves a throughput figure between runs (a shared machine, clocks, scheduling, the server's state) moves the
whole run, so the honest unit of noise is the repetition, not the request. A bootstrap over per-request samples
within one repetition would only see within-run noise (the demo's 27 and 361 tok/s repetitions each looked tight
inside themselves), so it is not used. Throughput noise is multiplicative (a run at half speed, not 100 tok/s
less), so the interval is taken on the log scale:

- r >= 3 repetitions: a 95% Student t interval over the repetitions' logs, centred on the reported median (the
  headline figure, so a figure always sits inside its interval) and widened for it:
  ``median x exp(+-t(0.975, r-1) x MEDIAN_SE x sd(log x)/sqrt(r))``. Method ``"t"``. ``MEDIAN_SE`` (sqrt(pi/2), the
  median's standard error over the mean's for normal data, its large-sample limit and above it at small r): the t
  spread is that of a mean, and the median of r logs varies more than their mean, so a median-centred interval
  without it under-covers: a gate reading its lower bound passed 3.5-3.8% of the time at the margin (5 and 8
  repetitions a side, lognormal noise, simulated) instead of 2.5%; with it 0.9-2.2% (3 to 8 a side, equal and
  five-fold unequal spreads; ``tests/stages/benchmark/test_repeats.py`` simulates the gate).
- r = 2: a t interval with one degree of freedom (t = 12.7) is meaningless, so the interval is the min-max range of
  the two, flagged as such (method ``"range"``): it is no confidence interval and under-states the noise.
- r = 1: no interval (method None), and the point's stability cannot be judged (``stable`` None).

Hence the default of 3 repetitions per gated point (``throughput.repetitions``): the fewest that give a t interval.

The ratio variant / baseline at a point: with r >= 3 on both sides, a Welch t interval on the difference of the
log means, centred on the log of the ratio of medians and widened by ``MEDIAN_SE`` as above (method ``"t"``); otherwise the range ratio
``[min_v / max_b, max_v / min_b]`` (method ``"range"``), which brackets every pairing of the repetitions.

Stability rule: a point is ``unstable`` when its repetitions' max / min output tok/s exceeds ``MAX_SPREAD`` (1.25),
or its interval reaches beyond +-``MAX_HALF_WIDTH`` (10%) of the median. Only output tok/s decides stability; the
p99 latencies and the goodput carry their intervals beside it.
"""

from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

MAX_SPREAD = 1.25  # max / min of the repetitions' output tok/s above this: unstable
MAX_HALF_WIDTH = 0.10  # an interval reaching beyond +-10% of the median: unstable
MEDIAN_SE = math.sqrt(math.pi / 2)  # the median's standard error over the mean's (normal data; module docstring)

# t(0.975, df) for df = 1..30; beyond that 1.96 is within 2%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: float) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (interpolated on a non-integer df)."""
    if df >= len(_T975):
        return 1.96
    lo = max(1, int(math.floor(df)))
    hi = min(len(_T975), lo + 1)
    frac = df - lo
    return _T975[lo - 1] + (_T975[hi - 1] - _T975[lo - 1]) * max(0.0, frac)


def interval(values: Sequence[float]) -> tuple[Optional[float], Optional[float], Optional[str]]:
    """(low, high, method) of the figure whose repetitions are ``values`` (see the module docstring)."""
    xs = [float(x) for x in values if x is not None]
    if len(xs) < 2:
        return None, None, None
    if len(xs) == 2 or min(xs) <= 0:
        return min(xs), max(xs), "range"
    logs = [math.log(x) for x in xs]
    half = t975(len(xs) - 1) * MEDIAN_SE * statistics.stdev(logs) / math.sqrt(len(xs))
    mid = statistics.median(xs)
    return mid * math.exp(-half), mid * math.exp(half), "t"


def is_stable(values: Sequence[float]) -> Optional[bool]:
    """The stability rule on a point's repetitions' output tok/s; None with fewer than 2 repetitions."""
    xs = [float(x) for x in values if x is not None]
    if len(xs) < 2:
        return None
    if min(xs) <= 0 or max(xs) / min(xs) > MAX_SPREAD:
        return False
    low, high, method = interval(xs)
    mid = statistics.median(xs)
    return not (method == "t" and (high > mid * (1 + MAX_HALF_WIDTH) or low < mid * (1 - MAX_HALF_WIDTH)))


def ratio_interval(variant: Sequence[float], base: Sequence[float]) -> tuple[Optional[float], Optional[float],
                                                                              Optional[str]]:
    """(low, high, method) of median(variant) / median(base) from both sides' repetitions (module docstring)."""
    v = [float(x) for x in variant if x is not None]
    b = [float(x) for x in base if x is not None]
    if not v or not b or min(v) <= 0 or min(b) <= 0 or (len(v) < 2 and len(b) < 2):
        return None, None, None
    if len(v) < 3 or len(b) < 3:
        return min(v) / max(b), max(v) / min(b), "range"
    mid, se, df = welch_log_ratio(v, b)
    half = t975(df) * MEDIAN_SE * se
    return math.exp(mid - half), math.exp(mid + half), "t"


def welch_log_ratio(v: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(log of the ratio of medians, Welch standard error of the log means' difference, its Welch-Satterthwaite
    degrees of freedom) of two sets of positive figures, 2 or more each: the ratio interval's parts."""
    lv, lb = [math.log(x) for x in v], [math.log(x) for x in b]
    sv, sb = statistics.variance(lv) / len(v), statistics.variance(lb) / len(b)
    se = math.sqrt(sv + sb)
    df = (sv + sb) ** 2 / ((sv ** 2 / (len(v) - 1)) + (sb ** 2 / (len(b) - 1))) if se > 0 else len(v) + len(b) - 2
    return math.log(statistics.median(v) / statistics.median(b)), se, df


def rep_values(point, key: str = "output_tok_s") -> list[float]:
    """A load point's repetitions' figures for ``key`` (a recorded ``LoadPoint``); the point's own figure when it
    recorded no repetition rows (a point run before they were kept)."""
    vals = [r[key] for r in point.repetitions if isinstance(r, dict) and r.get(key) is not None]
    return vals or ([getattr(point, key)] if getattr(point, key, None) is not None else [])


def point_update(point) -> dict:
    """The LoadPoint fields this module derives from the point's repetitions (for the stage and for old results)."""
    tok = rep_values(point)
    up: dict = {"output_tok_s_reps": len(tok), "stable": is_stable(tok)}
    up["output_tok_s_ci_low"], up["output_tok_s_ci_high"], up["ci_method"] = interval(tok)
    for key in ("ttft_p99_ms", "tpot_p99_ms", "goodput_req_s"):
        up[f"{key}_ci_low"], up[f"{key}_ci_high"], _ = interval(rep_values(point, key))
    return up
