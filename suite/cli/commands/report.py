"""`suite report RUN_DIR`."""

from __future__ import annotations

NAME = "report"
HELP = ("write one self-contained HTML page for a run (gates, accuracy with "
        "paired CIs, frontier, load points and bottlenecks, provenance)")
DESCRIPTION = ("Writes RUN_DIR/report.html (or --out): no scripts, no external files. A run in progress (its run.lock "
               "held by a live `suite run`) is refused, exit 2.")
EXAMPLES = (
    "suite report runs/20261207-120000-demo-cpu",
    "suite report runs/20261207-120000-demo-cpu --out /tmp/report.html",
)


def add_arguments(rep) -> None:
    rep.add_argument("run", help="run folder made by `suite run` (its summary is what its records give)")
    rep.add_argument("--out", help="where to write the HTML (default: RUN_DIR/report.html)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.report import cmd_report

    return cmd_report(args)
