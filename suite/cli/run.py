"""`suite run` (and `--resume`): the runner, with progress and the summary printed."""

from __future__ import annotations

from pathlib import Path

import suite.api
from suite.cli import overrides
from suite.cli.recipe import with_executor
from suite.cli.render import _console, print_summary
from suite.cli.talk import LiveDisplay, gate_line
from suite.orchestrate.runner import RunInterrupted
from suite.recipe.load import load_run_recipe
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK, Problem, SuiteError


EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program Ctrl-C ended


def cmd_run(args) -> int:
    """`suite run`; Ctrl-C ends it with one line (the run folder and how to resume it) and exit 130, no traceback:
    the runner has stopped the stage processes and released the run's lock by then."""
    import signal
    import sys
    import threading

    if threading.current_thread() is threading.main_thread():
        # SIGINT means "stop the run" even where this process inherited it ignored (a shell starts a background
        # command, `cmd &`, with SIGINT and SIGQUIT ignored, and Python then keeps it so): a `kill -INT` must still
        # stop the stages, release the lock and say how to resume
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _cmd_run(args)
    except RunInterrupted as e:
        print(f"interrupted: stage processes stopped; the run folder {e.run_dir} keeps what finished; "
              f"resume with suite run --resume {e.run_dir}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted: before a run folder was made; nothing to resume", file=sys.stderr)
    return EXIT_INTERRUPTED


def _cmd_run(args) -> int:
    resume, loaded = _what_to_run(args)
    console = _console()
    display = LiveDisplay(console, loaded.recipe, track=not args.no_track)
    with display.live():
        result = suite.api.run(loaded, output_dir=args.out, track=not args.no_track, force=args.force,
                               resume=resume, report=display.report, watch=display.watch,
                               accept_recipe_change=getattr(args, "accept_recipe_change", False))
        display.table = None
    return _print_outcome(console, result)


def _what_to_run(args):
    """(the run folder to resume or None, the loaded recipe): RECIPE checked, or --resume's recorded recipe; with
    ``--executor`` laid over it."""
    if args.resume:
        resume = Path(args.resume)
        if args.recipe or getattr(args, "set", None):
            raise SuiteError(Problem(args.recipe or "--set", "", "--resume continues a run with the recipe it was "
                                     "made from", "give either RECIPE (with --set) or --resume RUN_DIR"))
        loaded = load_run_recipe(resume)  # serving is checked once it is known what is left to run
    elif args.recipe:
        import sys

        # before the first line of the run: the checks ask the serve environment's vLLM (seconds, once per environment)
        print(f"checking {args.recipe} (files, tasks, what the serve environment's vLLM takes) ...", file=sys.stderr,
              flush=True)
        resume, loaded = None, overrides.load(args.recipe, getattr(args, "set", None))
    else:
        raise SuiteError(Problem("suite run", "RECIPE", "no recipe given", "suite run recipes/demo-cpu.yaml"))
    if args.executor:
        loaded = with_executor(loaded, args.executor)
    return resume, loaded


def _print_outcome(console, result) -> int:
    """The summary table, warnings, each failed variant's cause, where the run's outputs are; the exit code."""
    from rich.markup import escape

    summary = result.summary
    print_summary(summary)
    failed = [v for v in summary.variants if v.errors]
    for w in summary.warnings:
        console.print(f"[yellow]warning[/]: {w}", markup=True)
    for v in failed:  # one line per failed variant, with the cause (a stage's own error line)
        console.print(f"[red]error[/]: {escape(v.name)}: " + escape("; ".join(" ".join(e.split()) for e in v.errors)),
                      markup=True, highlight=False, soft_wrap=True)
    print(f"run folder: {summary.run_dir}")
    if (verdict := gate_line(result)) is not None:  # the exit code stays the run's: the gate's is `suite gate`'s
        print(verdict)
    if summary.artifacts.get("report_html"):
        print(f"report: {summary.artifacts['report_html']}")
    if summary.tracking:
        print(f"mlflow: {summary.tracking.uri} experiment {summary.tracking.experiment!r} "
              f"parent run {summary.tracking.parent_run_id}")
    elif summary.tracking_pending:
        console.print(f"[yellow]not logged to MLflow[/]: {summary.tracking_pending}\n"
                      f"  the results are in the run folder; log them later with: suite sync {summary.run_dir}")
    return EXIT_BAD_INPUT if failed else EXIT_OK
