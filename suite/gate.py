"""Gate stage: a finished run + a gate policy -> pass/fail per variant, with measured value and margin.

Exit codes of ``suite gate``: 0 every variant passes, 1 a gate failed, 2 bad input (a metric the
policy needs is missing, an unreadable run). A drop exactly at its threshold passes.
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

    @property
    def margin(self) -> float:
        """How far inside (+) or outside (-) the threshold the measurement is."""
        if self.gate.startswith("max drop"):
            return self.threshold - self.measured
        return self.measured - self.threshold


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
    for v in s.variants:
        if v.is_baseline:
            continue
        for task in s.tasks:
            limit = policy.max_drop.get(task, policy.default_max_drop)
            if limit is None:
                continue
            key = metric_name("acc", task)
            if key not in v.metrics or key not in base.metrics:
                result.missing.append(f"{v.name}: {key} (needed by the max-drop gate on {task})")
                continue
            drop = base.metrics[key] - v.metrics[key]
            result.checks.append(GateCheck(v.name, f"max drop {task}", drop, limit, drop <= limit + EPS))
        if policy.min_throughput_gain is not None:
            ratio = v.metrics.get("tput.output_tok_s.ratio")
            if ratio is None:
                result.missing.append(f"{v.name}: tput.output_tok_s.ratio (needed by min_throughput_gain)")
            else:
                g = policy.min_throughput_gain
                result.checks.append(GateCheck(v.name, "min throughput gain", ratio, g, ratio >= g - EPS))
    return result
