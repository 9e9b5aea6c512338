"""Outputs as sinks, registered like stages: what a finished run writes besides its stage results.

A sink has a ``name`` and ``write(summary, run_dir, ctx)``; ``publish`` runs the registered sinks in order.
``after_summary`` sinks run once summary.json is written (``ctx.summary_path``; it is written once: such a sink
keeps what it adds in its own file, as the MLflow sink does in tracking.json); ``tracking`` sinks run only when the
run is tracked (``ctx.track``).
Adding an output is one module that calls ``register(Sink(...))`` (or one entry in ``builtin_sinks``).
The signed manifest (``suite.outputs.manifest``, with ``SUITE_MANIFEST_KEY`` set) runs last, after every other writer
of the files it lists: ``register`` puts a new sink before it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class PublishContext:
    out_root: Path
    track: bool
    resumed: bool
    report: Callable[[str, str, str], None]  # report(stage, variant, event): progress of a tracking sink
    summary_path: Path | None = None
    end_times: dict[str, int] | None = None  # each variant's last stage's end (ms): its MLflow run's end_time
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sink:
    name: str
    write: Callable[[Any, Path, PublishContext], None]
    after_summary: bool = False
    tracking: bool = False


def write_timeline(summary, run_dir: Path, ctx: PublishContext) -> None:
    from suite.outputs import timeline

    if timeline.write(run_dir / "jobs.json", run_dir / "timeline.png", summary.engine_starts):
        summary.artifacts["timeline_png"] = str(run_dir / "timeline.png")


def write_frontier(summary, run_dir: Path, ctx: PublishContext) -> None:
    from suite.outputs import frontier

    front = frontier.run(frontier.FrontierConfig(summary, run_dir / "frontier.png"))
    if front.png:
        summary.artifacts["frontier_png"] = str(front.png)
    if getattr(front, "cost_png", None):
        summary.artifacts["frontier_cost_png"] = str(front.cost_png)


def write_report(summary, run_dir: Path, ctx: PublishContext) -> None:
    from suite.outputs import report as reporting

    page = reporting.run(reporting.ReportConfig(summary, run_dir / "report.html",
                                                gate=reporting.recipe_verdict(summary, run_dir)))
    summary.artifacts["report_html"] = str(page.html)


def write_mlflow(summary, run_dir: Path, ctx: PublishContext) -> None:
    """MLflow (offline-first: a server that is down leaves the run pending for ``suite sync``)."""
    from suite.analysis.load import write_tracking
    from suite.outputs import mlflow

    ctx.report("track", "mlflow", "start")
    t0 = time.perf_counter()
    error = mlflow.track_summary(summary, ctx.summary_path, ctx.out_root, resumed=ctx.resumed,
                                 end_times=ctx.end_times)
    summary.stage_wall_s["track"] = time.perf_counter() - t0
    write_tracking(summary, run_dir)  # beside summary.json, which is not written again
    ctx.report("track", "mlflow", "failed" if error else "ok")


def write_manifest(summary, run_dir: Path, ctx: PublishContext) -> None:
    from suite.outputs import manifest

    manifest.write_sink(summary, run_dir, ctx)


def builtin_sinks() -> list[Sink]:
    return [
        Sink("timeline", write_timeline),
        Sink("frontier", write_frontier),
        Sink("report", write_report),
        Sink("mlflow", write_mlflow, after_summary=True, tracking=True),
        Sink(MANIFEST, write_manifest, after_summary=True),  # last: it signs what the others wrote
    ]


MANIFEST = "manifest"
SINKS: list[Sink] = builtin_sinks()


def register(sink: Sink) -> Sink:
    """Add ``sink`` (or replace the one of the same name, in place)."""
    for i, s in enumerate(SINKS):
        if s.name == sink.name:
            SINKS[i] = sink
            return sink
    last = next((i for i, s in enumerate(SINKS) if s.name == MANIFEST), len(SINKS))
    SINKS.insert(last, sink)
    return sink


def unregister(name: str) -> None:
    SINKS[:] = [s for s in SINKS if s.name != name]
