"""Compare two runs of the same recipe (e.g. before and after a vLLM upgrade): what moved beyond noise.

For every variant both runs have:
- accuracy, per task: run B against run A item by item (``suite.analysis.paired`` on the two runs' samples:
  the same items, so the paired 95% CI applies); *moved* when the CI excludes zero. Without samples,
  the two lm-eval stderrs combined (|delta| > 1.96 x sqrt(se_a^2 + se_b^2)).
- throughput, per load point: the median output tok/s of each run with its repetitions' range;
  *moved* when the ranges do not overlap and the change is over ``min_tput_change`` (5%).
- package versions that differ between the runs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from suite.analysis.paired import compare_variant
from suite.records.summary import RunSummary
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult


@dataclass
class CompareConfig:
    a: RunSummary
    b: RunSummary
    min_tput_change: float = 0.05
    seed: int = 0


@dataclass
class Change:
    variant: str
    what: str  # "acc <task>" or "tput <point>"
    a: float
    b: float
    delta: float
    low: float | None  # CI of the delta (accuracy) or None
    high: float | None
    moved: bool
    how: str


@dataclass
class CompareResult:
    changes: list[Change] = field(default_factory=list)
    versions: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    @property
    def moved(self) -> list[Change]:
        return [c for c in self.changes if c.moved]

    def as_dict(self) -> dict:
        return {"changes": [asdict(c) for c in self.changes], "versions": self.versions,
                "only_in_a": self.only_in_a, "only_in_b": self.only_in_b}


def _accuracy(name: str, ea, eb, seed: int) -> list[Change]:
    out = []
    paired = {c.task: c for c in compare_variant(ea, eb, seed=seed)}
    b_scores = {s.task: s for s in eb.scores}
    for sa in ea.scores:
        sb = b_scores.get(sa.task)
        if sb is None:
            continue
        c = paired.get(sa.task)
        if c is not None and c.n:
            moved = c.ci_low > 0 or c.ci_high < 0
            how = f"paired over {c.n} items: {c.gained} gained, {c.lost} lost"
            out.append(Change(name, f"acc {sa.task}", sa.value, sb.value, sb.value - sa.value, c.ci_low, c.ci_high,
                              moved, how))
            continue
        se = math.hypot(sa.stderr or 0.0, sb.stderr or 0.0)
        d = sb.value - sa.value
        out.append(Change(name, f"acc {sa.task}", sa.value, sb.value, d, d - 1.96 * se, d + 1.96 * se,
                          se > 0 and abs(d) > 1.96 * se, "unpaired: lm-eval stderrs combined (no samples)"))
    return out


def _throughput(name: str, ba, bb, min_change: float) -> list[Change]:
    out = []
    b_points = {p.label: p for p in bb.points if p.ok}
    for pa in ba.points:
        pb = b_points.get(pa.label)
        if not pa.ok or pb is None or not pa.output_tok_s:
            continue
        lo_a, hi_a = pa.output_tok_s_min or pa.output_tok_s, pa.output_tok_s_max or pa.output_tok_s
        lo_b, hi_b = pb.output_tok_s_min or pb.output_tok_s, pb.output_tok_s_max or pb.output_tok_s
        rel = pb.output_tok_s / pa.output_tok_s - 1
        separate = hi_b < lo_a or lo_b > hi_a
        single = len(pa.repetitions) < 2 or len(pb.repetitions) < 2
        moved = separate and abs(rel) > min_change and not single
        how = (f"ranges {lo_a:.0f}-{hi_a:.0f} vs {lo_b:.0f}-{hi_b:.0f} tok/s" +
               (" (one repetition: no spread to judge noise by)" if single else ""))
        out.append(Change(name, f"tput {pa.label}", pa.output_tok_s, pb.output_tok_s, rel, None, None, moved, how))
    return out


def run(config: CompareConfig) -> CompareResult:
    a, b = config.a, config.b
    res = CompareResult()
    va, vb = {v.name: v for v in a.variants}, {v.name: v for v in b.variants}
    res.only_in_a = sorted(set(va) - set(vb))
    res.only_in_b = sorted(set(vb) - set(va))
    for name in [v.name for v in a.variants if v.name in vb]:
        x, y = va[name], vb[name]
        if (ex := x.result(EvaluateResult)) and (ey := y.result(EvaluateResult)):
            res.changes += _accuracy(name, ex, ey, config.seed)
        if (bx := x.result(BenchmarkResult)) and (by := y.result(BenchmarkResult)):
            res.changes += _throughput(name, bx, by, config.min_tput_change)
    for k in sorted(set(a.versions) | set(b.versions)):
        if a.versions.get(k) != b.versions.get(k):
            res.versions[k] = (a.versions.get(k), b.versions.get(k))
    return res
