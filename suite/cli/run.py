"""`suite run` (and `--resume`): the runner, with progress and the summary printed."""

from __future__ import annotations

import time
from pathlib import Path

from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK, Problem, SuiteError
from suite.cli.render import _console, print_summary


EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program Ctrl-C ended


def cmd_run(args) -> int:
    """`suite run`; Ctrl-C ends it with one line (the run folder and how to resume it) and exit 130, no traceback:
    the runner has stopped the stage processes and released the run's lock by then."""
    import signal
    import sys
    import threading

    from suite.orchestrate.runner import RunInterrupted

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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    import suite.api
    from suite.cli.talk import Talk, gate_line, start_lines
    from suite.recipe import load_recipe

    if args.resume:
        from suite.orchestrate.rundir import load_run_recipe

        resume = Path(args.resume)
        if args.recipe:
            raise SuiteError(Problem(args.recipe, "", "--resume continues a run with the recipe it was made from",
                                     "give either RECIPE or --resume RUN_DIR"))
        loaded = load_run_recipe(resume)  # serving is checked once it is known what is left to run
    elif args.recipe:
        import sys

        # before the first line of the run: the checks ask the serve environment's vLLM (seconds, once per environment)
        print(f"checking {args.recipe} (files, tasks, what the serve environment's vLLM takes) ...", file=sys.stderr,
              flush=True)
        resume, loaded = None, load_recipe(args.recipe)
    else:
        raise SuiteError(Problem("suite run", "RECIPE", "no recipe given", "suite run recipes/demo-cpu.yaml"))
    if args.executor:
        from suite.cli.recipe import with_executor

        loaded = with_executor(loaded, args.executor)
    console = _console()
    status = {"ok": "[green]ok[/]", "failed": "[red]FAILED[/]", "skipped": "[yellow]skipped[/]",
              "cached": "[green]ok (cached)[/]", "resumed": "[green]ok (kept from the run)[/]"}
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console)
    table = {"now": None}
    talk = Talk()

    class View:  # the job lines, then the running and queued jobs with their resources
        def __rich__(self):
            from rich.console import Group

            return Group(bar.get_renderable(), *([table["now"]] if table["now"] is not None else []))

    def watch(running: list, queued: list) -> None:
        from suite.cli.render import job_table

        table["now"] = job_table(running, queued) if running or queued else None

    from contextlib import nullcontext

    from rich.live import Live

    # a terminal gets the live job lines and table; a log file one line per event (report below), and nothing
    # drawn at the end (a Live's last frame there ran into the next line printed)
    live = Live(View(), console=console, refresh_per_second=4, transient=False) if console.is_terminal else nullcontext()
    with live:
        jobs: dict[tuple[str, str], int] = {}

        def report(stage: str, variant: str, event: str, where="") -> None:
            key = (stage, variant)
            label = f"{stage:<9} {variant}"
            if stage == "run":  # the run itself: its folder and logs at the start, its tracking URL
                lines = start_lines(Path(where), loaded.recipe, not args.no_track) if event == "started" else \
                    [f"mlflow: {where}"] if event == "tracking" else []
                for line in lines:
                    console.print(line, markup=False, highlight=False, soft_wrap=True)
                return
            if event == "progress":  # a count the stage wrote (suite.orchestrate.progress)
                line = talk.progress(key, where)
                if not console.is_terminal and line:
                    console.print(line, markup=False, highlight=False)
                elif key in jobs:
                    bar.update(jobs[key], description=f"{label}  {where.what}", completed=where.done,
                               total=where.total)
                return
            if not console.is_terminal:  # a log file: rich draws nothing live there, so one line per event
                console.print(f"{time.strftime('%H:%M:%S')} {label} {event}" + (f" on {where}" if where else ""),
                              markup=False)
            if event == "start":
                jobs[key] = bar.add_task(label, total=None)
                return
            talk.ended(key)
            if key in jobs:
                bar.update(jobs[key], description=f"{label}  {status.get(event, event)}", total=1, completed=1)
                bar.stop_task(jobs[key])
            else:
                jobs[key] = bar.add_task(f"{label}  {status.get(event, event)}", total=1, completed=1)

        result = suite.api.run(loaded, output_dir=args.out, track=not args.no_track, force=args.force,
                               resume=resume, report=report, watch=watch,
                               accept_recipe_change=getattr(args, "accept_recipe_change", False))
        summary = result.summary
        table["now"] = None
    print_summary(summary)
    failed = [v for v in summary.variants if v.errors]
    for w in summary.warnings:
        console.print(f"[yellow]warning[/]: {w}", markup=True)
    for v in failed:  # one line per failed variant, with the cause (a stage's own error line)
        from rich.markup import escape

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
