"""The throughput figures' uncertainty as summary metrics: the headline point's intervals, stability and repetitions,
the ratio's.

The statistics are suite.runtime.spread's (its docstring says which interval and why); this module reads
them off recorded load points (deriving them from the repetition rows of points recorded before they were kept).
"""

from __future__ import annotations

from suite.records.benchmark import LoadPoint, BenchmarkResult
from suite.records.summary import VariantSummary
from suite.runtime import spread
from suite.runtime.spread import ratio_interval, rep_values


def point_spread(p: LoadPoint) -> dict:
    """A point's interval fields (suite.runtime.spread) as recorded, or derived from its repetition rows for
    a point recorded before intervals were kept."""
    return p.model_dump(include=set(spread.point_update(p))) if p.output_tok_s_reps is not None else spread.point_update(p)


def spread_metrics(p: LoadPoint) -> dict[str, float]:
    """tput.repetitions, tput.stable and the headline point's intervals (none where a figure has none); for a point
    repeated until the throughput gates were decided (throughput.adaptive_repetitions), tput.repetitions.max (the most
    it could run) and tput.repetitions.saved (those it did not need)."""
    s = point_spread(p)
    m = {"tput.repetitions": float(s["output_tok_s_reps"])}
    if p.repetitions_max is not None:
        m["tput.repetitions.max"] = float(p.repetitions_max)
        m["tput.repetitions.saved"] = float(max(0, p.repetitions_max - len(p.repetitions)))
    if s["stable"] is not None:
        m["tput.stable"] = float(s["stable"])
    for key in ("output_tok_s", "ttft_p99_ms", "tpot_p99_ms"):
        if s[f"{key}_ci_low"] is not None:
            m[f"tput.{key}.ci_low"], m[f"tput.{key}.ci_high"] = s[f"{key}_ci_low"], s[f"{key}_ci_high"]
    return m


def goodput_metrics(p: LoadPoint) -> dict[str, float]:
    """tput.goodput_req_s (vllm bench serve --goodput: requests per second that met every SLO) and its interval over
    the repetitions; none where the point ran without --goodput."""
    if p.goodput_req_s is None:
        return {}
    m, s = {"tput.goodput_req_s": p.goodput_req_s}, point_spread(p)
    if s["goodput_req_s_ci_low"] is not None:
        m["tput.goodput_req_s.ci_low"], m["tput.goodput_req_s.ci_high"] = s["goodput_req_s_ci_low"], s["goodput_req_s_ci_high"]
    return m


def goodput_ratio(v: VariantSummary, base: VariantSummary, headline) -> dict[str, float]:
    """tput.goodput_req_s.ratio (variant / baseline at each one's headline point) and its interval over both sides'
    repetitions (suite.runtime.spread.ratio_interval); none where either side has no goodput or the baseline's is 0."""
    bv, bb = v.result(BenchmarkResult), base.result(BenchmarkResult)
    if v is base or bv is None or bb is None:
        return {}
    pv, pb = headline(bv), headline(bb)
    if pv is None or pb is None or pv.goodput_req_s is None or not pb.goodput_req_s:
        return {}
    m = {"tput.goodput_req_s.ratio": pv.goodput_req_s / pb.goodput_req_s}
    low, high, _ = ratio_interval(rep_values(pv, "goodput_req_s"), rep_values(pb, "goodput_req_s"))
    if low is not None:
        m["tput.goodput_req_s.ratio.ci_low"], m["tput.goodput_req_s.ratio.ci_high"] = low, high
    return m


def ratio_spread(v: VariantSummary, base: VariantSummary, headline) -> dict[str, float]:
    """The headline ratio's interval (best against best: each variant's headline point) and the ratio at equal
    rate: the variant's headline point against the baseline's point of the same label (rate/concurrency), if any;
    and the goodput ratio (``goodput_ratio``): the variant's metrics they add."""
    m = goodput_ratio(v, base, headline)
    bv, bb = v.result(BenchmarkResult), base.result(BenchmarkResult)
    if v is base or bv is None or bb is None:
        return m
    pv, pb = headline(bv), headline(bb)  # summary.headline_point under the recipe's rule
    if pv is None or pb is None or not pb.output_tok_s:
        return m
    low, high, _ = ratio_interval(rep_values(pv), rep_values(pb))
    if low is not None:
        m["tput.output_tok_s.ratio.ci_low"], m["tput.output_tok_s.ratio.ci_high"] = low, high
    same = next((q for q in bb.points if q.ok and q.label == pv.label and q.workload == pv.workload), None)
    if same is not None and same.output_tok_s:
        m["tput.output_tok_s.ratio_equal_rate"] = pv.output_tok_s / same.output_tok_s
        low, high, _ = ratio_interval(rep_values(pv), rep_values(same))
        if low is not None:
            m["tput.output_tok_s.ratio_equal_rate.ci_low"] = low
            m["tput.output_tok_s.ratio_equal_rate.ci_high"] = high
    return m


def ceiling_note(b) -> str:
    """What makes a variant's offline figure no ceiling (a ``BenchmarkResult``): the offline engine preempted requests
    (its KV cache overflowed: the all-at-once batch paid for recomputation a served point at a lower rate does not), or
    a served point beat it. '' when neither, or without an offline figure."""
    if b is None or b.offline_tok_s is None:
        return ""
    notes = []
    if b.offline_preemptions:
        notes.append(f"preempted {b.offline_preemptions:,.0f} times")
    above = [p.label for p in b.points if p.ok and p.ceiling_fraction is not None and p.ceiling_fraction > 1]
    if above:
        notes.append(f"below served point(s) {', '.join(above)}")
    return "not a ceiling: " + "; ".join(notes) if notes else ""
