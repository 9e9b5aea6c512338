"""What `suite run` says while it works: the start lines, the stages' progress counts, the gate and report at the end.

On a terminal the counts go into the live display (``LiveDisplay``: a bar per job with done/total once the stage
wrote a count, and a table of the running and queued jobs); in a log file (not a terminal)
each job's count is a line of its own, at most one per ``LOG_EVERY_S`` seconds per job (the first count of each
phase at once), e.g. ``12:03:05 evaluate  fp8-kv    lm-eval generate_until 640/1319``. When a job's result scores its
variant, each task's headline score is a line of its own the moment the result lands (``score_line``), on a terminal
too: the first number does not wait for the closing table.
"""

from __future__ import annotations

import time
from pathlib import Path

from suite.cli.render import job_table
from suite.orchestrate.executors import job_use
from suite.outputs.tracking_target import target
from suite.runtime import safeio

LOG_EVERY_S = 30.0


def start_lines(run_dir: Path, recipe, track: bool) -> list[str]:
    """The run folder, each job's log (from plan.json), and where the run is tracked."""
    lines = [f"run folder: {run_dir}"]
    try:
        dag = safeio.read_json(run_dir / "plan.json", "record").get("dag", [])
    except (OSError, ValueError):
        dag = []
    logs = [f"  {run_dir / 'variants' / j['variant'] / (j['stage'] + '.log')}" for j in dag
            if j.get("variant") and j.get("stage") not in (None, "publish")]
    if logs:
        lines += ["logs (tail -f to follow):", *logs]
    if track and recipe is not None:
        # the runs are created next (RUNNING); a ("run", "", "tracking", URL) event then prints the parent run's URL
        lines.append("mlflow: " + target(recipe, run_dir.parent).describe().removeprefix("tracking: "))
    return lines


class Talk:
    """The progress side of the CLI's reporter: keeps each running job's latest count for the display and
    decides which counts become log lines."""

    def __init__(self, every_s: float | None = None):
        self.every_s = LOG_EVERY_S if every_s is None else every_s
        self.latest: dict[tuple[str, str], object] = {}  # (stage, variant) -> StageProgress
        self._logged: dict[tuple[str, str], tuple[float, str]] = {}  # when, and what, was last a log line

    def progress(self, key: tuple[str, str], count) -> str | None:
        """Record ``count`` for a job; the log line to print now, if one is due."""
        self.latest[key] = count
        now = time.monotonic()
        when, what = self._logged.get(key, (float("-inf"), ""))
        last = count.total is not None and count.done >= count.total
        if what != count.what or now - when >= self.every_s or last:
            self._logged[key] = (now, count.what)
            return f"{time.strftime('%H:%M:%S')} {key[0]:<9} {key[1]}  {count}"
        return None

    def ended(self, key: tuple[str, str]) -> None:
        self.latest.pop(key, None)
        self._logged.pop(key, None)


def score_line(stage: str, variant: str, score) -> str:
    """One headline score of a job that just ended, as recorded in its result (``records.evaluate.TaskScore``), e.g.
    ``12:04:10 evaluate  bf16      suite_gsm8k exact_match,strict-match 0.3750 ± 0.1830 (n=8)``."""
    spread = f" ± {score.stderr:.4f}" if score.stderr is not None else ""
    n = f" (n={score.n})" if score.n is not None else ""
    return f"{time.strftime('%H:%M:%S')} {stage:<9} {variant}  {score.task} {score.metric} {score.value:.4f}{spread}{n}"


def gate_line(run) -> str | None:
    """``gate: PASS|FAIL|INCONCLUSIVE|NO VERDICT ...`` (as ``suite gate``'s last line) for a run whose recipe has gates (``suite.api.Run.gate``: nothing is
    recorded in MLflow), else None."""
    try:
        result = run.gate()
    except Exception as e:  # noqa: BLE001 -- the run's own outcome stands; `suite gate` says more
        return f"gate: NO VERDICT ({type(e).__name__}: {e}; suite gate {run.run_dir} for the details)"
    if not result.checks and not result.problems:
        return None
    verdict = "NO VERDICT" if result.problems else result.outcome.upper()  # bad input is not "inconclusive" (exit 3)
    return f"gate: {verdict} (suite gate {run.run_dir} for the details)"


STATUS = {"ok": "[green]ok[/]", "failed": "[red]FAILED[/]", "skipped": "[yellow]skipped[/]",
          "cached": "[green]ok (cached)[/]", "resumed": "[green]ok (kept from the run)[/]"}


class LiveDisplay:
    """`suite run`'s reporter and watcher. On a terminal: a bar per job (its latest count beside it, none before the
    stage writes one) over a table of the running jobs and the queued ones with what they will use; in a log file one
    line per event and per count that is due (``Talk``), nothing drawn."""

    def __init__(self, console, recipe, track: bool):
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console, self.recipe, self.track = console, recipe, track
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20),
                            TextColumn("{task.fields[count]}", style="progress.download", justify="right"),
                            TimeElapsedColumn(), console=console)
        self.table = None  # the running and queued jobs, while there are any
        self.talk = Talk()
        self.jobs: dict[tuple[str, str], int] = {}  # (stage, variant) -> its bar
        self._job_use = None  # what a queued job will use here (suite.orchestrate.executors.job_use), once asked

    def __rich__(self):
        from rich.console import Group

        return Group(self.bar.get_renderable(), *([self.table] if self.table is not None else []))

    def live(self):
        """The live view on a terminal; on a log file nothing (a Live's last frame there ran into the next line)."""
        from contextlib import nullcontext

        from rich.live import Live

        return Live(self, console=self.console, refresh_per_second=4, transient=False) \
            if self.console.is_terminal else nullcontext()

    def watch(self, running: list, queued: list) -> None:
        if queued and self._job_use is None:
            self._job_use = job_use(self.recipe.executor)
        self.table = job_table(running, queued, self._job_use) if running or queued else None

    def report(self, stage: str, variant: str, event: str, where="") -> None:
        key, label = (stage, variant), f"{stage:<9} {variant}"
        if stage == "run":  # the run itself: its folder and logs at the start, its tracking URL
            self._run_event(event, where)
        elif event == "progress":  # a count the stage wrote (suite.orchestrate.progress)
            self._count(key, label, where)
        elif event == "scores":  # a job's result landed: its headline scores, a line each, terminal or log alike
            for score in where:
                self.console.print(score_line(stage, variant, score), markup=False, highlight=False, soft_wrap=True)
        else:
            if not self.console.is_terminal:  # a log file: rich draws nothing live there, so one line per event
                self.console.print(f"{time.strftime('%H:%M:%S')} {label} {event}" + (f" on {where}" if where else ""),
                                   markup=False)
            if event == "start":
                self.jobs[key] = self.bar.add_task(label, total=None, count="")
            else:
                self._ended(key, label, event)

    def _run_event(self, event: str, where) -> None:
        lines = start_lines(Path(where), self.recipe, self.track) if event == "started" else \
            [f"mlflow: {where}"] if event == "tracking" else [where] if event == "note" else []
        for line in lines:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _count(self, key: tuple[str, str], label: str, count) -> None:
        """A job's count: a log line when one is due, else on its bar (done/total, or done while the total is not
        known)."""
        line = self.talk.progress(key, count)
        if not self.console.is_terminal and line:
            self.console.print(line, markup=False, highlight=False)
        elif key in self.jobs:
            width = len(str(count.total))  # the done count padded to it: the column keeps its width
            shown = f"{count.done:{width}d}/{count.total}" if count.total is not None else str(count.done)
            self.bar.update(self.jobs[key], description=f"{label}  {count.what}", completed=count.done,
                            total=count.total, count=shown)

    def _ended(self, key: tuple[str, str], label: str, event: str) -> None:
        """A job ended (or was skipped, or kept): its bar full with its outcome; its last count stays beside it."""
        self.talk.ended(key)
        if key in self.jobs:
            self.bar.update(self.jobs[key], description=f"{label}  {STATUS.get(event, event)}", total=1, completed=1)
            self.bar.stop_task(self.jobs[key])
        else:
            self.jobs[key] = self.bar.add_task(f"{label}  {STATUS.get(event, event)}", total=1, completed=1, count="")
