"""What `suite run` says while it works: the start lines, the stages' progress counts, the gate and report at the end.

On a terminal the counts go into the live display (a bar per job with done/total); in a log file (not a terminal)
each job's count is a line of its own, at most one per ``LOG_EVERY_S`` seconds per job (the first count of each
phase at once), e.g. ``12:03:05 evaluate  fp8-kv    lm-eval generate_until 640/1319``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

LOG_EVERY_S = 30.0


def start_lines(run_dir: Path, recipe, track: bool) -> list[str]:
    """The run folder, each job's log (from plan.json), and where the run is tracked."""
    lines = [f"run folder: {run_dir}"]
    try:
        dag = json.loads((run_dir / "plan.json").read_text()).get("dag", [])
    except (OSError, ValueError):
        dag = []
    logs = [f"  {run_dir / 'variants' / j['variant'] / (j['stage'] + '.log')}" for j in dag
            if j.get("variant") and j.get("stage") not in (None, "publish")]
    if logs:
        lines += ["logs (tail -f to follow):", *logs]
    if track and recipe is not None:
        # the runs are created next (RUNNING); a ("run", "", "tracking", URL) event then prints the parent run's URL
        from suite.outputs.tracking_target import target

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
