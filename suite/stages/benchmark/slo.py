"""Sustainable request rate under a latency SLO: bracket, then bisect.

``search`` probes Poisson request rates with a caller-supplied ``probe(rate) -> LoadPoint``: starting
at ``start_rate`` it doubles while the SLO holds (or halves while it fails) until one rate meets the
SLO and a higher one does not, then bisects that bracket until it is narrower than ``tolerance``
(relative) or ``max_probes`` have run. A point meets the SLO when every request completed, its p99
TTFT and p99 TPOT are within the limits (a queue that grows shows up in TTFT), and, when ``keep_up`` is
set, the server served at least that share of the offered rate.

A probe is a sustained rate only if it lasts: with ``n`` prompts at ``rate`` req/s the arrivals span ``n / rate``
seconds, and if that is shorter than a few request lifetimes (``slo.steady_windows`` x the median e2e latency) every
request is in flight at once and the p99 TTFT measures how the server digests one burst, whatever the rate: a
few hundred prompts at a high rate, each living a few seconds, all run at once, and the "sustainable" rate found is
noise around the TTFT limit (it can exceed several times what the same server completes at saturation). Such a probe is run again at the same rate with enough prompts (``steady_prompts``,
from the last run's lifetime, at most ``MAX_RESIZES`` times and ``slo.max_num_prompts`` prompts); the result says
whether the probes that decided the rate were steady (``SloResult.steady``), and the summary keeps the rate only
when they were. Above capacity latency grows with the queue for as long as requests arrive, so an overloaded probe
never looks steady by its own lifetime: a resized probe that got all the prompts it asked for and failed counts as a
real failure (an overload), not a burst.

Nor is a rate the server cannot complete worth probing: a Poisson rate above the requests per second the same server
completed at saturation (``capacity_req_s``: the fastest repetition of its rate-inf point) builds a queue that only
grows, so it cannot be sustainable. A rate above ``ABOVE_CAPACITY`` x that capacity (the margin covers the
spread of tens of percent between repetitions of a GPU point; not with ``slo.steady_windows`` 0) is decided as an overload without running (a row with
``num_prompts`` 0 and ``not_run`` set). Above capacity a resized probe can send up to ``slo.max_num_prompts`` into that
queue, which can double a benchmark stage's time.
"""

from __future__ import annotations

import math
from typing import Callable

from suite.records.benchmark import LoadPoint, SloResult
from suite.records.benchmark import SloSpec


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


RESIZE_MARGIN = 1.25  # a resized probe's arrivals span this much more than steady_windows lifetimes (latency grows)
ABOVE_CAPACITY = 1.5  # a rate above this x the saturated completion rate is an overload by arithmetic (not run)
MAX_NOT_RUN = 20  # rates decided without running (they cost nothing, so they do not count against max_probes)


def capacity(points: list[LoadPoint]) -> float | None:
    """Requests per second the server completed at saturation: the fastest repetition of its ok rate-inf points
    (None without one: a Poisson or concurrency point's req/s is what was offered, not what the server can do)."""
    rates = [p.req_s * ((p.output_tok_s_max or p.output_tok_s) / p.output_tok_s)
             for p in points if p.ok and p.request_rate == "inf" and p.req_s > 0 and p.output_tok_s > 0]
    return max(rates) if rates else None


def over_capacity_row(rate: float, capacity_req_s: float) -> dict:
    return {"rate": rate, "num_prompts": 0, "meets": False, "not_run": True,
            "why": f"not run: above {ABOVE_CAPACITY:g} x the {capacity_req_s:.1f} req/s this server completed at "
                   "saturation, so its queue can only grow",
            "output_tok_s": None, "req_s": None, "ttft_p99_ms": None, "tpot_p99_ms": None, "e2el_p50_ms": None,
            "steady": True, "steady_why": "an overload by arithmetic (arrivals faster than the saturated completions)",
            "bottleneck": None}


def steadiness(point: LoadPoint, rate: float, num_prompts: int, slo: SloSpec) -> tuple[bool | None, str]:
    """(steady?, why): did ``num_prompts`` arrivals at ``rate`` req/s span ``slo.steady_windows`` median request
    lifetimes? None when it cannot be told (no e2e latency recorded, a failed point) or the check is off."""
    life = (point.e2el_p50_ms or 0) / 1000
    if not slo.steady_windows or life <= 0 or not point.ok or rate <= 0:
        return None, "not checked"
    window = num_prompts / rate
    need = slo.steady_windows * life
    if window >= need:
        return True, f"arrivals over {window:.1f} s >= {slo.steady_windows:g} x {life:.2f} s request lifetime"
    burst = (f"; all {point.max_concurrent_requests} in flight at once"
             if point.max_concurrent_requests is not None and point.max_concurrent_requests >= num_prompts else "")
    return False, (f"a burst, not a sustained rate: {num_prompts} arrivals over {window:.1f} s, under "
                   f"{slo.steady_windows:g} x the {life:.2f} s median request lifetime{burst}")


def steady_prompts(rate: float, point: LoadPoint, slo: SloSpec) -> int:
    """Prompts for a probe at ``rate`` whose arrivals span RESIZE_MARGIN x steady_windows of ``point``'s lifetime."""
    return math.ceil(rate * slo.steady_windows * RESIZE_MARGIN * (point.e2el_p50_ms or 0) / 1000)


MAX_RESIZES = 3  # a burst's probe is run again at most this many times, each sized from the last one's lifetime


def probe_steadily(probe: Callable[[float, int], LoadPoint], rate: float, num_prompts: int, cap: int, slo: SloSpec,
                   rows: list[dict]) -> tuple[LoadPoint, int, bool | None, str]:
    """One probe at ``rate``, run again with more prompts while it is a burst (``steadiness``): each re-run sized by
    ``steady_prompts`` from the last one's lifetime (lifetimes grow with load near capacity), at most MAX_RESIZES
    times and ``cap`` prompts. Superseded runs go to ``rows``. Returns (point, prompts, steady, why):
    - a point whose requests failed (ok=False) is a decisive failure (steady True): it failed however long it ran;
    - above capacity the queue grows for as long as requests arrive, and every lifetime with it, so there is no
      steady state to reach: a re-run that fails the SLO with the prompts its burst asked for is an overload (steady);
    - a burst still, with the cap or the re-runs used up: steady False, and ``why`` says which."""
    n = num_prompts
    point = probe(rate, n)
    is_steady, how = steadiness(point, rate, n, slo)
    for _ in range(MAX_RESIZES):
        if is_steady is not False:
            break
        want = steady_prompts(rate, point, slo)
        if min(want, cap) <= n:
            how += f" (slo.max_num_prompts {cap} reached)" if want > n else ""
            break
        rows.append(probe_row(rate, n, point, slo, is_steady, how) | {"superseded": True})
        n = min(want, cap)
        point = probe(rate, n)
        is_steady, how = steadiness(point, rate, n, slo)
        if is_steady is False and n >= want and not meets(point, slo)[0]:
            is_steady, how = True, f"overloaded ({how}): failed with the {n} prompts a steady probe needs"
    else:
        if is_steady is False:
            how += f" ({MAX_RESIZES} re-runs)"
    if not point.ok:
        is_steady, how = True, f"requests failed ({point.error or 'failed'}): a failure however long it ran"
    return point, n, is_steady, how


def search(probe: Callable[[float, int], LoadPoint], slo: SloSpec, num_prompts: int,
           capacity_req_s: float | None = None) -> SloResult:
    """``probe(rate, num_prompts)``; ``num_prompts`` per probe unless one turns out a burst: then ``probe_steadily``
    runs it again with more prompts (at most ``slo.max_num_prompts``, default 20 x num_prompts). Re-runs do not count
    against ``max_probes``; every run is listed (the superseded ones marked). A rate above ``ABOVE_CAPACITY`` x
    ``capacity_req_s`` (``capacity``) is decided an overload without running, and does not count either
    (``slo.steady_windows`` 0 turns this check off with the steadiness check)."""
    cap = max(slo.max_num_prompts or 20 * num_prompts, num_prompts)
    probes: list[dict] = []
    good: float | None = None
    bad: float | None = None
    good_point: LoadPoint | None = None
    rate = slo.start_rate
    decided = not_run = 0
    while decided < slo.max_probes:
        if capacity_req_s and slo.steady_windows and rate > ABOVE_CAPACITY * capacity_req_s and not_run < MAX_NOT_RUN:
            not_run += 1
            probes.append(row := over_capacity_row(rate, capacity_req_s))
        else:
            point, n, is_steady, how = probe_steadily(probe, rate, num_prompts, cap, slo, probes)
            decided += 1
            probes.append(row := probe_row(rate, n, point, slo, is_steady, how))
        if row["meets"]:
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
    final = {p["rate"]: p for p in probes if not p.get("superseded")}  # each probed rate's deciding run
    deciding = [final[r] for r in (good, bad) if r is not None]
    verdict = None if not deciding or any(p["steady"] is None for p in deciding) else all(p["steady"] for p in deciding)
    note = unbracketed_note(good, bad, rate, slo)
    if verdict is False:
        bursts = "; ".join(f"at {p['rate']:g} req/s with {p['num_prompts']} prompts: {p['steady_why']}"
                           for p in deciding if p["steady"] is False)
        note = "; ".join(filter(None, [note, f"a deciding probe never reached a steady state ({bursts})"]))
    return SloResult(
        sustainable_rate=good, bracket_high=bad, probes=probes,
        output_tok_s=good_point.output_tok_s if good_point else None,
        req_s=good_point.req_s if good_point else None,
        ttft_p99_ms=good_point.ttft_p99_ms if good_point else None,
        tpot_p99_ms=good_point.tpot_p99_ms if good_point else None,
        steady=verdict, note=note,
    )


def probe_row(rate: float, n: int, point: LoadPoint, slo: SloSpec, is_steady: bool | None, how: str) -> dict:
    ok, why = meets(point, slo)
    return {"rate": rate, "num_prompts": n, "meets": ok, "why": why, "output_tok_s": point.output_tok_s,
            "req_s": point.req_s, "ttft_p99_ms": point.ttft_p99_ms, "tpot_p99_ms": point.tpot_p99_ms,
            "e2el_p50_ms": point.e2el_p50_ms, "steady": is_steady, "steady_why": how, "bottleneck": point.bottleneck}


def unbracketed_note(good: float | None, bad: float | None, last_rate: float, slo: SloSpec) -> str | None:
    """Why the search ended without a bracket: the limit of the rates, or of the probes (then the
    sustainable rate is only a lower bound, e.g. 'held up to max_rate' at 64 of 128)."""
    if good is not None and bad is not None:
        return None
    if good is not None:
        return ("the SLO held up to max_rate" if good >= slo.max_rate else
                f"the SLO held at every probed rate; max_probes ({slo.max_probes}) ran out: at least {good:g} req/s")
    return ("no probed rate met the SLO" if last_rate <= slo.min_rate else
            f"no probed rate met the SLO; max_probes ({slo.max_probes}) ran out above min_rate")

