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
    from pathlib import Path

    from suite.analysis.derive import archive_notes
    from suite.orchestrate.summarize import rebuild
    from suite.runtime.errors import EXIT_OK
    from suite.runtime.lock import refuse_live

    refuse_live(Path(args.run), "`suite summarize`")  # a live run writes its own summary.json and report.html
    summary = rebuild(Path(args.run))
    bad = [v.name for v in summary.variants if v.errors]
    print(f"{summary.run_dir}/summary.json: {len(summary.variants)} variant(s)"
          + (f", with errors: {', '.join(bad)}" if bad else ""))
    for note in archive_notes(summary):
        print(note)
    return EXIT_OK
