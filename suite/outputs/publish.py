"""After a run's last stage: frontier.png, report.html (with the gate's verdict), summary.json, then MLflow."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def publish(summary, run_dir: Path, out_root: Path, track: bool, resumed: bool, report,
            end_times: dict[str, int] | None = None) -> None:
    """Write the run's outputs into ``run_dir`` and, with ``track``, log it to MLflow (or keep it pending
    for ``suite sync``); ``report(stage, variant, event)`` hears about the tracking step; ``end_times``: each
    variant's last stage's end (ms), its MLflow run's end_time."""
    from suite.outputs import frontier, mlflow
    from suite.outputs import report as reporting

    from suite.outputs import timeline

    if timeline.write(run_dir / "jobs.json", run_dir / "timeline.png"):
        summary.artifacts["timeline_png"] = str(run_dir / "timeline.png")
    front = frontier.run(frontier.FrontierConfig(summary, run_dir / "frontier.png"))
    if front.png:
        summary.artifacts["frontier_png"] = str(front.png)
    if getattr(front, "cost_png", None):
        summary.artifacts["frontier_cost_png"] = str(front.cost_png)
    summary.finished = now()
    page = reporting.run(reporting.ReportConfig(summary, run_dir / "report.html", gate=reporting.recipe_verdict(summary)))
    summary.artifacts["report_html"] = str(page.html)
    summary_path = summary.write(run_dir / "summary.json")
    if track:
        report("track", "mlflow", "start")
        t0 = time.perf_counter()
        error = mlflow.track_summary(summary, summary_path, out_root, resumed=resumed, end_times=end_times)
        summary.stage_wall_s["track"] = time.perf_counter() - t0
        summary.write(summary_path)
        report("track", "mlflow", "failed" if error else "ok")
