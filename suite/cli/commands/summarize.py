"""`suite summarize RUN_DIR`."""

from __future__ import annotations

NAME = "summarize"
HELP = "rebuild a run's summary.json and report from its stage results (a partial run too), running no stage"
DESCRIPTION = ("Reads RUN_DIR's stage results (variants/<name>/<stage>.result.json), recipe.yaml, plan.json, "
               "run.json and jobs.json (never summary.json but in a folder from before run.json), makes the summary with this version's analysis code and writes summary.json and "
               "report.html again. A planned job without a result is an error of its variant (no gate passes it). "
               "An archived folder whose evaluate folders keep items.jsonl.gz in place of lm-eval's samples files is "
               "compared item by item from those (said in the output and the summary's warnings). "
               "MLflow is left alone: `suite sync` logs a run. A run in progress (its run.lock held by a live `suite run`) is "
               "refused, exit 2.")
EXAMPLES = (
    "suite summarize runs/20261207-120000-demo-cpu",
)


def add_arguments(parser) -> None:
    parser.add_argument("run", help="run folder (with recipe.yaml and plan.json)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.summarize import cmd_summarize

    return cmd_summarize(args)
