"""After a run's last stage: the registered output sinks (suite.outputs.sinks: timeline, frontier, report),
summary.json (once), then the sinks that need it (MLflow, which writes tracking.json)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from suite.analysis.load import TRACKING_FILE, with_tracking
from suite.outputs.sinks import SINKS, PublishContext


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def publish(summary, run_dir: Path, out_root: Path, track: bool, resumed: bool, report,
            end_times: dict[str, int] | None = None, finished: str | None = None, keep_tracking: bool = False,
            signs: bool = False):
    """Write the run's outputs into ``run_dir`` and, with ``track``, log it to MLflow (or keep it pending
    for ``suite sync``); ``report(stage, variant, event)`` hears about the tracking step; ``end_times``: each
    variant's last stage's end (ms), its MLflow run's end_time; ``finished``: when the run ended (default: now;
    ``suite summarize`` keeps the run's own); ``keep_tracking``: leave tracking.json as it is (``suite summarize``:
    the same run, as logged); otherwise a new summary drops the earlier one's tracking state (as summary.json's
    fields did when a resume rewrote it) and the MLflow sink writes it again. ``signs``: this process made the results
    (the runner), so the manifest sink may sign them (suite.outputs.manifest); `suite summarize` never does.
    ``summary`` is not changed: returns the summary published (with when it finished and the sinks' artifacts) with
    tracking.json's state laid over it."""
    ctx = PublishContext(out_root=out_root, track=track, resumed=resumed, report=report, end_times=end_times,
                         signs=signs)
    sinks = [s for s in SINKS.values() if track or not s.tracking]
    published = summary.model_copy(update={"finished": finished or now(), "artifacts": dict(summary.artifacts)})
    if not keep_tracking:
        (run_dir / TRACKING_FILE).unlink(missing_ok=True)
    for sink in sinks:  # each sees the artifacts of the sinks before it (the report shows the frontier)
        if not sink.after_summary:
            made = sink.write(published.model_copy(deep=True), run_dir, ctx)
            published = published.model_copy(update={"artifacts": {**published.artifacts, **(made or {})}})
    ctx.summary_path = published.write(run_dir / "summary.json", root=run_dir)  # names relative to it
    for sink in sinks:  # summary.json is written once: these keep what they add in their own files
        if sink.after_summary:
            sink.write(published.model_copy(deep=True), run_dir, ctx)
    return with_tracking(published, run_dir)
