"""The Pareto front of accuracy against output throughput or cost, for one run or across runs (the data; outputs.frontier draws it).

A point is on the front when no other point is at least as accurate and at least as good on the other
axis, and strictly better in one of the two. Accuracy: ``acc.mean`` or one task's ``acc.<task>``; the other
axis: the headline load point (``tput.output_tok_s``, saturation) or the sustainable rate under the SLO
(``tput.sustainable_output_tok_s``), where higher is better; or the cost per 1M output tokens at either
(``cost.per_1m_output_tokens``, ``cost.per_1m_output_tokens.slo``: runs whose recipe prices a GPU hour),
where LOWER is better, so the front flips on that axis (``lower_is_better``).

Each point carries what is known of its uncertainty (``intervals``), the same for the report's chart and the
frontier page: on the x axis the interval over the headline point's repetitions (``<x>.ci_low``/``.ci_high``,
suite.runtime.spread; none for a cost or SLO figure, which records none); on the accuracy axis the paired 95% CI
of the variant's delta from the baseline placed on its score (``acc.<task>.delta_ci_low``/``.delta_ci_high``;
the baseline has none). ``acc.mean`` gets that bar only when the run scored one task (the mean then is that task's
score): the paired CIs of several tasks do not add up to one for their mean, so none is drawn (``bar_notes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from suite.records.summary import RunSummary
from suite.analysis.summary import metric_name, rate_unjudged

# each throughput metric's cost counterpart (suite.analysis.summary.cost_metrics)
COST_OF = {"tput.output_tok_s": "cost.per_1m_output_tokens",
           "tput.sustainable_output_tok_s": "cost.per_1m_output_tokens.slo"}


def lower_is_better(metric: str) -> bool:
    """The x axis metrics where less is better: the cost ones."""
    return metric.startswith("cost.")


@dataclass
class FrontierPoint:
    name: str
    throughput: float  # the x axis: the throughput metric's value, or the cost metric's (FrontierConfig.throughput)
    accuracy: float
    is_baseline: bool
    x_interval: tuple[float, float] | None = None  # the throughput's interval over repetitions (``intervals``)
    y_interval: tuple[float, float] | None = None  # the paired CI of the delta, placed on the score


@dataclass
class FrontierConfig:
    summary: RunSummary | None
    out_png: Path
    summaries: list[RunSummary] = field(default_factory=list)
    accuracy: str = "acc.mean"
    throughput: str = "tput.output_tok_s"  # or a cost.* metric (the front flips on it)
    out_html: Path | None = None

    def runs(self) -> list[RunSummary]:
        return [self.summary] if self.summary is not None else list(self.summaries)


@dataclass
class FrontierResult:
    points: list[FrontierPoint]
    pareto: list[str]
    png: Path | None
    html: Path | None = None
    cost_png: Path | None = None  # accuracy against the cost counterpart of the throughput metric, when priced
    cost_pareto: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # on an SLO-rate axis: rates not checked as steady


def at_slo_rate(metric: str) -> bool:
    """The axes read at the SLO search's sustainable rate (its tok/s, its cost)."""
    return metric in ("tput.sustainable_output_tok_s", "cost.per_1m_output_tokens.slo")


def _candidates(runs: list[RunSummary], accuracy: str, throughput: str):
    """(point name, run, variant) for each variant with both metrics: named <recipe>/<variant> across runs, and the
    run's folder beside it when the same recipe is there more than once."""
    names = {r.recipe_name for r in runs}
    for r in runs:
        for v in r.variants:
            if throughput in v.metrics and accuracy in v.metrics:
                name = v.name if len(runs) == 1 else f"{r.recipe_name}/{v.name}"
                if len(runs) > len(names):  # the same recipe more than once: say which run
                    name += f" ({Path(r.run_dir).name[:15]})"
                yield name, r, v


def left_out(runs: list[RunSummary], accuracy: str, throughput: str) -> list[str]:
    """The points ``collect`` leaves off an SLO-rate axis because their rate's steadiness was not checked (a burst's
    rate has no SLO metric in the summary): ``summary.rate_unjudged``, the rates the gate does not judge either."""
    if not at_slo_rate(throughput):
        return []
    return [name for name, _, v in _candidates(runs, accuracy, throughput) if rate_unjudged(v)]


def collect(runs: list[RunSummary], accuracy: str, throughput: str) -> list[FrontierPoint]:
    """One point per variant with both metrics (``_candidates``' names). On an SLO-rate axis a rate not checked as
    steady is left out (``left_out`` names them)."""
    return [FrontierPoint(name, v.metrics[throughput], v.metrics[accuracy], v.is_baseline,
                          *intervals(r, v, accuracy, throughput))
            for name, r, v in _candidates(runs, accuracy, throughput)
            if not (at_slo_rate(throughput) and rate_unjudged(v))]


def accuracy_task(run: RunSummary, accuracy: str) -> str | None:
    """The ``acc.<task>`` key whose paired CI is ``accuracy``'s error bar: itself, or for ``acc.mean`` the run's one
    task (None with several: no bar for a mean over tasks)."""
    if accuracy != "acc.mean":
        return accuracy
    return metric_name("acc", run.tasks[0]) if len(run.tasks) == 1 else None


def intervals(run: RunSummary, v, accuracy: str, x: str):
    """(x interval, accuracy interval) of variant ``v``'s point, absolute bounds, each None where none is recorded
    (the module docstring says which)."""
    m = v.metrics
    xi = (m[f"{x}.ci_low"], m[f"{x}.ci_high"]) if f"{x}.ci_low" in m and f"{x}.ci_high" in m else None
    yi = None
    if (key := accuracy_task(run, accuracy)) and f"{key}.delta_ci_low" in m and f"{key}.delta_ci_high" in m:
        delta = m.get(f"{key}.delta", 0.0)
        yi = (m[accuracy] + m[f"{key}.delta_ci_low"] - delta, m[accuracy] + m[f"{key}.delta_ci_high"] - delta)
    return xi, yi


def bar_notes(runs: list[RunSummary], accuracy: str, x: str) -> list[str]:
    """What the error bars of a chart of ``accuracy`` against ``x`` are, in words (shown under it)."""
    notes = []
    if accuracy == "acc.mean" and any(len(r.tasks) > 1 for r in runs):
        notes.append("no accuracy error bar for the mean over several tasks (their paired CIs do not combine into "
                     "one for the mean): see each task's chart")
    else:
        notes.append("accuracy bars: the paired 95% CI of each variant's delta from its baseline, placed on its "
                     "score (the baseline has none)")
    if x.startswith("tput.") and not at_slo_rate(x):
        notes.append("throughput bars: the interval over the headline point's repetitions")
    return notes


def cost_currency(runs: list[RunSummary]) -> str | None:
    """The one currency of the runs that carry cost figures; None when none does or when they mix currencies
    (figures in different currencies are not put on one axis)."""
    found = {r.cost.currency for r in runs if r.cost is not None}
    return found.pop() if len(found) == 1 else None


def pareto_front(points: list[FrontierPoint], lower_is_better: bool = False) -> list[FrontierPoint]:
    """The points no other point dominates, sorted along the x axis. ``lower_is_better``: the x axis is a
    cost (less is better); accuracy is always higher-is-better."""
    sign = -1.0 if lower_is_better else 1.0

    def dominated(p: FrontierPoint) -> bool:
        return any(sign * q.throughput >= sign * p.throughput and q.accuracy >= p.accuracy
                   and (sign * q.throughput > sign * p.throughput or q.accuracy > p.accuracy) for q in points)

    return sorted((p for p in points if not dominated(p)), key=lambda p: p.throughput)
