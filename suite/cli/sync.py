"""`suite sync`: log a run folder whose tracking was deferred to MLflow.

MLflow sends the job's credentials (``MLFLOW_TRACKING_TOKEN`` ...) to whatever server it is given, so a server that
only the run folder names (its recipe copy's ``tracking.uri``) is used only when the folder is signed with
``SUITE_MANIFEST_KEY`` (the team's runner wrote that recipe); otherwise the caller names it with ``--uri`` (the
recipe's URI comes before ``MLFLOW_TRACKING_URI``, so the environment cannot override it). A local store is not a
server: no credential leaves the machine."""

from __future__ import annotations

import sys
from pathlib import Path

from suite import api
from suite.analysis.load import with_tracking
from suite.outputs import manifest
from suite.outputs.mlflow import track_summary
from suite.outputs.tracking_target import check_uris
from suite.recipe.guards import local_store_paths
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK, Problem, SuiteError
from suite.runtime.secrets import redact


def cmd_sync(args) -> int:
    check_uris(args.uri)  # before the run folder is read: --uri and MLflow's environment hold no credential
    summary = api.load_run(args.run, who="`suite sync`").summary
    if summary.tracking and not summary.tracking_pending and not args.uri:
        print(redact(f"{args.run}: already logged (parent run {summary.tracking.parent_run_id} at "
                     f"{summary.tracking.uri})"))
        return EXIT_OK
    run_dir = Path(summary.run_dir)
    _check_folder_named_server(summary, run_dir, args)
    error = track_summary(summary, run_dir / "summary.json", run_dir.parent, args.uri)
    if error:
        print(redact(f"{args.run}: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    summary = with_tracking(summary, run_dir)  # where track_summary logged it: tracking.json
    print(redact(f"{args.run}: logged to {summary.tracking.uri}, experiment {summary.tracking.experiment!r}, "
                 f"parent run {summary.tracking.parent_run_id}"))
    return EXIT_OK


def _check_folder_named_server(summary, run_dir: Path, args) -> None:
    """Refuse to send MLflow's credentials to a server only an unsigned run folder names (the module says why)."""
    if args.uri:
        return  # the caller named the server
    named = ((summary.recipe or {}).get("tracking") or {}).get("uri")
    if not named or local_store_paths(named) is not None:
        return  # the default local store, or a local store the recipe names: nothing leaves the machine
    try:
        manifest.verify(run_dir, summary.recipe_sha256)
    except SuiteError as unsigned:
        why = unsigned.problems[0].message.splitlines()[0]
        raise SuiteError(Problem(str(run_dir / "recipe.yaml"), "tracking.uri", redact(
            f"names the tracking server {named}, which only this run folder names, and the folder is not signed "
            f"({why}): MLflow would send this job's credentials there"),
            f"name the server yourself: suite sync {args.run} --uri URI; runs signed with {manifest.KEY_ENV} may "
            "name their own")) from None
