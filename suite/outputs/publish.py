"""After a run's last stage: the registered output sinks (suite.outputs.sinks: timeline, frontier, report),
summary.json, then the sinks that need it (MLflow)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from suite.outputs.sinks import SINKS, PublishContext


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def publish(summary, run_dir: Path, out_root: Path, track: bool, resumed: bool, report,
            end_times: dict[str, int] | None = None, finished: str | None = None) -> None:
    """Write the run's outputs into ``run_dir`` and, with ``track``, log it to MLflow (or keep it pending
    for ``suite sync``); ``report(stage, variant, event)`` hears about the tracking step; ``end_times``: each
    variant's last stage's end (ms), its MLflow run's end_time; ``finished``: when the run ended (default: now;
    ``suite summarize`` keeps the run's own)."""
    ctx = PublishContext(out_root=out_root, track=track, resumed=resumed, report=report, end_times=end_times)
    sinks = [s for s in SINKS if track or not s.tracking]
    summary.finished = finished or now()  # the report shows it
    for sink in sinks:
        if not sink.after_summary:
            sink.write(summary, run_dir, ctx)
    ctx.summary_path = summary.write(run_dir / "summary.json")
    for sink in sinks:
        if sink.after_summary:
            sink.write(summary, run_dir, ctx)
            summary.write(ctx.summary_path)
