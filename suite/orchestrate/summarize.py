"""`suite summarize RUN_DIR`: the run folder's summary (``suite.analysis.derive.summarize``) published again, running
no stage: summary.json, the report and the other untracked outputs written from the folder's records."""

from __future__ import annotations

from pathlib import Path

from suite.analysis.derive import summarize
from suite.outputs import manifest
from suite.outputs.publish import publish
from suite.records.summary import RunSummary


def rebuild(run_dir: Path) -> RunSummary:
    """``summarize`` and write summary.json, the report and the other untracked outputs (tracking is left as it is:
    ``suite sync`` logs a run). Nothing is signed: a signed folder's stage records are first checked against its
    manifest.json (refused, naming each file, when they differ), which stays as the run signed it; a rebuilt
    summary.json that differs from the signed one is then refused by ``suite gate --verify``."""
    manifest.check_records(run_dir)
    summary = summarize(run_dir)
    run_dir = Path(summary.run_dir)
    return publish(summary, run_dir, run_dir.parent, track=False, resumed=True, report=lambda *e: None,
                   finished=summary.finished, keep_tracking=True)
