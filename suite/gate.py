"""Gate stage: a finished run + a gate policy -> pass/fail per variant, with measured value and margin.

Exit codes of ``suite gate``: 0 every variant passes, 1 a gate failed, 2 bad input (a metric the
policy needs is missing, an unreadable run). A value exactly at its threshold passes.

Gates (``GateSpec``): absolute and relative accuracy drop per task; non-inferiority on the paired 95%
CI of the delta (its lower bound must be above minus the margin) and the lower bound of recovery
(baseline + CI low) / baseline; minimum throughput and sustainable-rate gain; maximum p99 TTFT/TPOT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.recipe import GateSpec
from suite.results import RunSummary
from suite.summary import metric_name

EPS = 1e-9


@dataclass
class GateConfig:
    summary: RunSummary
    policy: GateSpec


@dataclass
class GateCheck:
    variant: str
    gate: str
    measured: float
    threshold: float
    passed: bool
    upper: bool = False  # the threshold is a maximum (drops, latency), else a minimum

    @property
    def margin(self) -> float:
        """How far inside (+) or outside (-) the threshold the measurement is."""
        return self.threshold - self.measured if self.upper else self.measured - self.threshold


def _check(variant: str, gate: str, measured: float, threshold: float, upper: bool) -> GateCheck:
    ok = measured <= threshold + EPS if upper else measured >= threshold - EPS
    return GateCheck(variant, gate, measured, threshold, ok, upper)


@dataclass
class GateResult:
    checks: list[GateCheck] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.missing and all(c.passed for c in self.checks)


def run(config: GateConfig) -> GateResult:
    s, policy = config.summary, config.policy
    result = GateResult()
    base = s.baseline()

    def need(v, key: str, why: str) -> float | None:
        if key not in v.metrics:
            result.missing.append(f"{v.name}: {key} (needed by {why})")
            return None
        return v.metrics[key]

    for v in s.variants:
        if v.is_baseline:
            continue
        for task in s.tasks:
            key = metric_name("acc", task)
            limit = policy.max_drop.get(task, policy.default_max_drop)
            rel = policy.max_relative_drop.get(task, policy.default_max_relative_drop)
            if limit is not None or rel is not None:
                a, b = need(v, key, f"the drop gates on {task}"), need(base, key, f"the drop gates on {task}")
                if a is not None and b is not None:
                    if limit is not None:
                        result.checks.append(_check(v.name, f"max drop {task}", b - a, limit, upper=True))
                    if rel is not None:
                        measured = (b - a) / b if b else 0.0
                        result.checks.append(_check(v.name, f"max relative drop {task}", measured, rel, upper=True))
            margin = policy.non_inferiority_margin.get(task, policy.default_non_inferiority_margin)
            if margin is not None:
                low = need(v, key + ".delta_ci_low", f"the non-inferiority gate on {task}")
                if low is not None:
                    result.checks.append(_check(v.name, f"non-inferiority {task} (CI low of delta)", low, -margin,
                                                upper=False))
            recovery = policy.min_recovery_lower_bound.get(task)
            if recovery is not None:
                low, b = need(v, key + ".delta_ci_low", f"the recovery gate on {task}"), need(base, key, "recovery")
                if low is not None and b is not None:
                    measured = (b + low) / b if b else 1.0
                    result.checks.append(_check(v.name, f"recovery lower bound {task}", measured, recovery, upper=False))
        for key, limit, name, upper in (
            ("tput.output_tok_s.ratio", policy.min_throughput_gain, "min throughput gain", False),
            ("tput.sustainable_rate.ratio", policy.min_sustainable_rate_gain, "min sustainable-rate gain", False),
            ("tput.ttft_p99_ms", policy.max_ttft_p99_ms, "max TTFT p99 ms", True),
            ("tput.tpot_p99_ms", policy.max_tpot_p99_ms, "max TPOT p99 ms", True),
        ):
            if limit is not None:
                measured = need(v, key, name)
                if measured is not None:
                    result.checks.append(_check(v.name, name, measured, limit, upper))
    return result
