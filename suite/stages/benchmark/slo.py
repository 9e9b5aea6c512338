"""Sustainable request rate under a latency SLO: bracket, then bisect.

``search`` probes Poisson request rates with a caller-supplied ``probe(rate) -> LoadPoint``: starting
at ``start_rate`` it doubles while the SLO holds (or halves while it fails) until one rate meets the
SLO and a higher one does not, then bisects that bracket until it is narrower than ``tolerance``
(relative) or ``max_probes`` have run. A point meets the SLO when every request completed, its p99
TTFT and p99 TPOT are within the limits (a queue that grows shows up in TTFT), and, when ``keep_up`` is
set, the server served at least that share of the offered rate.
"""

from __future__ import annotations

from typing import Callable

from suite.stages.benchmark.records import LoadPoint, SloResult
from suite.recipe import SloSpec


def meets(point: LoadPoint, slo: SloSpec) -> tuple[bool, str]:
    if not point.ok:
        return False, point.error or "failed"
    why = []
    if slo.ttft_p99_ms is not None and point.ttft_p99_ms > slo.ttft_p99_ms:
        why.append(f"p99 TTFT {point.ttft_p99_ms:.0f} > {slo.ttft_p99_ms:g} ms")
    if slo.tpot_p99_ms is not None and point.tpot_p99_ms > slo.tpot_p99_ms:
        why.append(f"p99 TPOT {point.tpot_p99_ms:.1f} > {slo.tpot_p99_ms:g} ms")
    if slo.keep_up and isinstance(point.request_rate, (int, float)) and point.req_s < slo.keep_up * float(point.request_rate):
        why.append(f"served {point.req_s:.2f} of {point.request_rate} req/s offered")
    return not why, "; ".join(why) or "meets the SLO"


def search(probe: Callable[[float], LoadPoint], slo: SloSpec) -> SloResult:
    probes: list[dict] = []
    good: float | None = None
    bad: float | None = None
    good_point: LoadPoint | None = None
    rate = slo.start_rate
    while len(probes) < slo.max_probes:
        point = probe(rate)
        ok, why = meets(point, slo)
        probes.append({"rate": rate, "meets": ok, "why": why, "output_tok_s": point.output_tok_s,
                       "req_s": point.req_s, "ttft_p99_ms": point.ttft_p99_ms, "tpot_p99_ms": point.tpot_p99_ms,
                       "bottleneck": point.bottleneck})
        if ok:
            good, good_point = rate, point
        else:
            bad = rate
        if good is not None and bad is not None:
            if (bad - good) / bad <= slo.tolerance:
                break
            rate = (good + bad) / 2
        elif good is not None:  # still climbing
            if rate >= slo.max_rate:
                break
            rate = min(rate * 2, slo.max_rate)
        else:  # still falling
            if rate <= slo.min_rate:
                break
            rate = max(rate / 2, slo.min_rate)
        rate = round(rate, 3)
    return SloResult(
        sustainable_rate=good, bracket_high=bad, probes=probes,
        output_tok_s=good_point.output_tok_s if good_point else None,
        req_s=good_point.req_s if good_point else None,
        ttft_p99_ms=good_point.ttft_p99_ms if good_point else None,
        tpot_p99_ms=good_point.tpot_p99_ms if good_point else None,
        note=unbracketed_note(good, bad, rate, slo),
    )


def unbracketed_note(good: float | None, bad: float | None, last_rate: float, slo: SloSpec) -> str | None:
    """Why the search ended without a bracket: the limit of the rates, or of the probes (then the
    sustainable rate is only a lower bound: the H200 run printed 'held up to max_rate' at 64 of 128)."""
    if good is not None and bad is not None:
        return None
    if good is not None:
        return ("the SLO held up to max_rate" if good >= slo.max_rate else
                f"the SLO held at every probed rate; max_probes ({slo.max_probes}) ran out: at least {good:g} req/s")
    return ("no probed rate met the SLO" if last_rate <= slo.min_rate else
            f"no probed rate met the SLO; max_probes ({slo.max_probes}) ran out above min_rate")

