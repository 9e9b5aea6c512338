"""Frontier: accuracy (mean over tasks) against output throughput, the Pareto front drawn.

A variant is on the front when no other variant is at least as accurate and at least as fast, and
strictly better in one of the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from suite.results import RunSummary


@dataclass
class FrontierPoint:
    name: str
    throughput: float
    accuracy: float
    is_baseline: bool


@dataclass
class FrontierConfig:
    summary: RunSummary
    out_png: Path


@dataclass
class FrontierResult:
    points: list[FrontierPoint]
    pareto: list[str]
    png: Path | None


def pareto_front(points: list[FrontierPoint]) -> list[FrontierPoint]:
    def dominated(p: FrontierPoint) -> bool:
        return any(q.throughput >= p.throughput and q.accuracy >= p.accuracy
                   and (q.throughput > p.throughput or q.accuracy > p.accuracy) for q in points)

    return sorted((p for p in points if not dominated(p)), key=lambda p: p.throughput)


def run(config: FrontierConfig) -> FrontierResult:
    points = [FrontierPoint(v.name, v.metrics["tput.output_tok_s"], v.metrics["acc.mean"], v.is_baseline)
              for v in config.summary.variants if "tput.output_tok_s" in v.metrics and "acc.mean" in v.metrics]
    front = pareto_front(points)
    if not points:
        return FrontierResult(points, [], None)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for p in points:
        ax.scatter(p.throughput, p.accuracy, s=80, marker="s" if p.is_baseline else "o",
                   color="tab:gray" if p.is_baseline else "tab:blue", zorder=3)
        ax.annotate(p.name + (" (baseline)" if p.is_baseline else ""), (p.throughput, p.accuracy),
                    textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.plot([p.throughput for p in front], [p.accuracy for p in front], "--o", color="tab:red",
            markerfacecolor="none", markersize=14, label="Pareto front", zorder=2)
    ax.margins(x=0.25, y=0.25)
    ax.set_xlabel("output throughput (tok/s)")
    ax.set_ylabel("accuracy, mean over tasks")
    ax.set_title(f"{config.summary.recipe_name}: accuracy vs throughput ({config.summary.platform})")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    config.out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(config.out_png)
    plt.close(fig)
    return FrontierResult(points, [p.name for p in front], config.out_png)
