"""Outputs as sinks, registered like stages: what a finished run writes besides its stage results.

A sink has a ``name`` and ``write(summary, run_dir, ctx)``, which returns the artifacts it wrote ({name: path}, or
None) and never changes the summary; ``publish`` runs the registered sinks in order and records their artifacts in the
summary it writes and returns.
``after_summary`` sinks run once summary.json is written (``ctx.summary_path``; it is written once: such a sink
keeps what it adds in its own file, as the MLflow sink does in tracking.json); ``tracking`` sinks run only when the
run is tracked (``ctx.track``).
Adding an output is one module that calls ``register(Sink(...))`` (or one entry in ``builtin_sinks``) or, from a
package outside ``suite``, an entry point of the group ``suite.outputs`` naming a ``Sink`` (``NAME = module:SINK``).
``SINKS`` is a ``suite.records.registry.Registry``, name -> Sink in publish order. The signed manifest
(``suite.outputs.manifest``, with ``SUITE_MANIFEST_KEY`` set) runs last, after every other writer of the files it
lists: a new sink, registered or found, goes before it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from suite.analysis.load import with_tracking, write_tracking
from suite.outputs import frontier, manifest, mlflow, report as reporting, timeline
from suite.records.registry import Registry


@dataclass
class PublishContext:
    out_root: Path
    track: bool
    resumed: bool
    report: Callable[[str, str, str], None]  # report(stage, variant, event): progress of a tracking sink
    summary_path: Path | None = None
    end_times: dict[str, int] | None = None  # each variant's last stage's end (ms): its MLflow run's end_time
    signs: bool = False  # the publishing process made the results (the runner): the manifest sink signs them
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sink:
    name: str
    write: Callable[[Any, Path, PublishContext], "dict[str, str] | None"]  # -> the artifacts it wrote
    after_summary: bool = False
    tracking: bool = False


def write_timeline(summary, run_dir: Path, ctx: PublishContext) -> dict[str, str]:
    made = timeline.write(run_dir / "jobs.json", run_dir / "timeline.png", summary.engine_starts)
    return {"timeline_png": str(run_dir / "timeline.png")} if made else {}


def write_frontier(summary, run_dir: Path, ctx: PublishContext) -> dict[str, str]:
    front = frontier.run(frontier.FrontierConfig(summary, run_dir / "frontier.png"))
    made = {"frontier_png": front.png, "frontier_cost_png": getattr(front, "cost_png", None)}
    return {name: str(path) for name, path in made.items() if path}


# what a tracked run's report says of MLflow: the page is written before the run is logged (the MLflow sink runs once
# summary.json is written, and logs this page with it)
TRACKING_NEXT = ("logged once this page is written (tracking on); where, or why not yet, is in tracking.json and "
                 "`suite sync` / `suite report` show it")


def write_report(summary, run_dir: Path, ctx: PublishContext) -> dict[str, str]:
    tracked = summary.tracking is None and ctx.track  # this page is written before the MLflow sink logs the run
    page = reporting.run(reporting.ReportConfig(
        summary, run_dir / "report.html", gate=reporting.recipe_verdict(summary, run_dir),
        tracking_next=TRACKING_NEXT if tracked else None))
    return {"report_html": str(page.html)}


def write_mlflow(summary, run_dir: Path, ctx: PublishContext) -> None:
    """MLflow (offline-first: a server that is down leaves the run pending for ``suite sync``): its state, and how long
    logging took, go to tracking.json beside summary.json, never into the summary."""
    ctx.report("track", "mlflow", "start")
    t0 = time.perf_counter()
    error = mlflow.track_summary(summary, ctx.summary_path, ctx.out_root, resumed=ctx.resumed,
                                 end_times=ctx.end_times)
    tracked = with_tracking(summary, run_dir)
    write_tracking(tracked.model_copy(update={"stage_wall_s": {**tracked.stage_wall_s,
                                                               "track": time.perf_counter() - t0}}), run_dir)
    ctx.report("track", "mlflow", "failed" if error else "ok")


def write_manifest(summary, run_dir: Path, ctx: PublishContext) -> None:
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
SINKS: Registry[Sink] = Registry("output", "suite.outputs", base=Sink, name_of=lambda s: s.name, last=MANIFEST)
for _sink in builtin_sinks():
    SINKS.register(_sink.name, _sink)


def register(sink: Sink) -> Sink:
    """Add ``sink`` just before the manifest (or replace the one of the same name, in place)."""
    return SINKS.register(sink.name, sink)


def unregister(name: str) -> None:
    SINKS.unregister(name)
