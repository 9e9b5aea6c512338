"""`suite sync RUN_DIR`."""

from __future__ import annotations

NAME = "sync"
HELP = "log a run to MLflow that was kept offline (server down at the time)"
DESCRIPTION = ("Logs RUN_DIR's summary.json, metrics and artifacts to MLflow (--uri, then the "
               "recipe's tracking.uri, then MLFLOW_TRACKING_URI). A server only the run folder names "
               "is used only when the folder is signed (SUITE_MANIFEST_KEY): MLflow sends this job's "
               "credentials to it. A run folder already logged there is found by its tag suite.run_dir "
               "and not logged twice.")
EXAMPLES = (
    "suite sync runs/20261207-120000-demo-cpu",
    "suite sync runs/20261207-120000-demo-cpu --uri http://mlflow:5000",
)


def add_arguments(sync) -> None:
    sync.add_argument("run", help="run folder (with summary.json)")
    sync.add_argument("--uri", help="tracking URI to use instead of the recipe's")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.sync import cmd_sync

    return cmd_sync(args)
