"""`suite sync`: log a run folder whose tracking was deferred to MLflow."""

from __future__ import annotations

import sys
from pathlib import Path

from suite import api
from suite.analysis.load import with_tracking
from suite.outputs.mlflow import track_summary
from suite.outputs.tracking_target import check_uris
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK
from suite.runtime.secrets import redact


def cmd_sync(args) -> int:
    check_uris(args.uri)  # before the run folder is read: --uri and MLflow's environment hold no credential
    summary = api.load_run(args.run, who="`suite sync`").summary
    if summary.tracking and not summary.tracking_pending and not args.uri:
        print(redact(f"{args.run}: already logged (parent run {summary.tracking.parent_run_id} at "
                     f"{summary.tracking.uri})"))
        return EXIT_OK
    run_dir = Path(summary.run_dir)
    error = track_summary(summary, run_dir / "summary.json", run_dir.parent, args.uri)
    if error:
        print(redact(f"{args.run}: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    summary = with_tracking(summary, run_dir)  # where track_summary logged it: tracking.json
    print(redact(f"{args.run}: logged to {summary.tracking.uri}, experiment {summary.tracking.experiment!r}, "
                 f"parent run {summary.tracking.parent_run_id}"))
    return EXIT_OK
