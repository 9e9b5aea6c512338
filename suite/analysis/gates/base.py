"""What a gate produces: one check per (variant, gate), with its outcome (pass, fail or inconclusive), and the run's
result; the interval rule every gate shares (``judge``) and what would decide an inconclusive check."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_OK, Problem

EPS = 1e-9
FIX_SUMMARY = "rerun `suite run` (or `--resume` it); a summary.json is written by the run, not by hand"
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass
class GateCheck:
    variant: str
    gate: str
    measured: float
    threshold: float
    passed: bool  # True only for a pass (an inconclusive check is not passed)
    upper: bool = False  # the threshold is a maximum (drops, latency), else a minimum
    n: int | None = None  # items behind an accuracy figure (the paired n, else the variant's scored n)
    detail: str = ""  # why, when the number alone does not say (a stage error)
    inconclusive: bool = False  # the data cannot decide: ``reason`` says why, ``decide`` what would
    reason: str = ""
    decide: str = ""
    interval: tuple[float, float] | None = None  # the interval the outcome was judged on, when one was
    interval_method: str = ""  # how that interval was made, in words (a paired record's ci_method), when known

    @property
    def margin(self) -> float:
        """How far inside (+) or outside (-) the threshold the measurement is."""
        return self.threshold - self.measured if self.upper else self.measured - self.threshold

    @property
    def outcome(self) -> str:
        return INCONCLUSIVE if self.inconclusive else PASS if self.passed else FAIL

    def make_inconclusive(self, reason: str, decide: str = "") -> GateCheck:
        self.passed, self.inconclusive, self.reason, self.decide = False, True, reason, decide
        return self


def check(variant: str, gate: str, measured: float, threshold: float, upper: bool, n: int | None = None) -> GateCheck:
    """A check judged on one number (a value exactly at its threshold passes)."""
    ok = measured <= threshold + EPS if upper else measured >= threshold - EPS
    return GateCheck(variant, gate, measured, threshold, ok, upper, n)


def items_needed(n: int, low: float, high: float, point: float, threshold: float) -> str:
    """What would decide an interval that straddles ``threshold``: at the observed variance the half-width shrinks as
    1/sqrt(n), so n_needed ~ n x (the interval's reach towards the threshold / the point's distance from it)^2. The
    reach is the half on the threshold's side (a score or log-ratio interval is not symmetric), so a straddled
    threshold always asks for more than ``n`` items; a normal approximation, not a promise."""
    dist = abs(point - threshold)
    if dist <= EPS:
        return "no number of items: the estimate sits on the threshold"
    reach = (point - low) if threshold < point else (high - point)
    needed = max(math.ceil(n * (max(reach, dist) / dist) ** 2), n + 1)
    return f"about {needed:,} items at the observed variance ({needed - n:,} more than the {n:,} scored)"


def judge(variant: str, gate: str, point: float, low: float, high: float, threshold: float, upper: bool,
          n: int | None, measured: float | None = None, method: str = "") -> GateCheck:
    """A check judged on an interval [low, high] of the measurement: a maximum passes when ``high`` is within it and
    fails when ``low`` is beyond it; a minimum passes when ``low`` reaches it and fails when ``high`` falls short;
    an interval that straddles the threshold is inconclusive. ``measured`` (default: the bound that must pass) is the
    number shown; ``method`` names how the interval was made (shown with it)."""
    shown = measured if measured is not None else (high if upper else low)
    c = GateCheck(variant, gate, shown, threshold, False, upper, n, interval=(low, high), interval_method=method)
    decided_pass = high <= threshold + EPS if upper else low >= threshold - EPS
    decided_fail = low > threshold + EPS if upper else high < threshold - EPS
    if decided_pass or decided_fail:
        c.passed = decided_pass
        return c
    decide = items_needed(n, low, high, point, threshold) if n else "a narrower interval (more items)"
    how = f" ({method})" if method else ""
    return c.make_inconclusive(f"its 95% interval [{low:.4g}, {high:.4g}]{how} straddles the threshold "
                               f"{threshold:.4g}", decide)


@dataclass
class GateResult:
    checks: list[GateCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # bad input: no verdict (exit 2)

    @property
    def missing(self) -> list[str]:
        """The problems as text (the name this list had when only missing metrics were reported)."""
        return [str(p) for p in self.problems]

    @property
    def passed(self) -> bool:
        return not self.problems and all(c.passed for c in self.checks)

    @property
    def outcome(self) -> str:
        """bad input > fail > inconclusive > pass (as the exit codes 2 > 1 > 3 > 0)."""
        if self.problems:
            return "bad input"
        outcomes = {c.outcome for c in self.checks}
        return FAIL if FAIL in outcomes else INCONCLUSIVE if INCONCLUSIVE in outcomes else PASS

    @property
    def exit_code(self) -> int:
        return {"bad input": EXIT_BAD_INPUT, FAIL: EXIT_GATE_FAILED, INCONCLUSIVE: EXIT_INCONCLUSIVE,
                PASS: EXIT_OK}[self.outcome]
