"""The Pareto front of accuracy against output throughput, for one run or across runs (the data; outputs.frontier draws it).

A point is on the front when no other point is at least as accurate and at least as fast, and strictly
better in one of the two. Accuracy: ``acc.mean`` or one task's ``acc.<task>``; throughput: the headline
load point (``tput.output_tok_s``, saturation) or the sustainable rate under the SLO
(``tput.sustainable_output_tok_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from suite.analysis.records import RunSummary


@dataclass
class FrontierPoint:
    name: str
    throughput: float
    accuracy: float
    is_baseline: bool


@dataclass
class FrontierConfig:
    summary: RunSummary | None
    out_png: Path
    summaries: list[RunSummary] = field(default_factory=list)
    accuracy: str = "acc.mean"
    throughput: str = "tput.output_tok_s"
    out_html: Path | None = None

    def runs(self) -> list[RunSummary]:
        return [self.summary] if self.summary is not None else list(self.summaries)


@dataclass
class FrontierResult:
    points: list[FrontierPoint]
    pareto: list[str]
    png: Path | None
    html: Path | None = None


def collect(runs: list[RunSummary], accuracy: str, throughput: str) -> list[FrontierPoint]:
    """One point per variant with both metrics; named <recipe>/<variant> (and the run) across runs."""
    names = {r.recipe_name for r in runs}
    points = []
    for r in runs:
        for v in r.variants:
            if throughput in v.metrics and accuracy in v.metrics:
                name = v.name if len(runs) == 1 else f"{r.recipe_name}/{v.name}"
                if len(runs) > len(names):  # the same recipe more than once: say which run
                    name += f" ({Path(r.run_dir).name[:15]})"
                points.append(FrontierPoint(name, v.metrics[throughput], v.metrics[accuracy], v.is_baseline))
    return points


def pareto_front(points: list[FrontierPoint]) -> list[FrontierPoint]:
    def dominated(p: FrontierPoint) -> bool:
        return any(q.throughput >= p.throughput and q.accuracy >= p.accuracy
                   and (q.throughput > p.throughput or q.accuracy > p.accuracy) for q in points)

    return sorted((p for p in points if not dominated(p)), key=lambda p: p.throughput)
