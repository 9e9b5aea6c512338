"""One stage process: run under procs.supervised, with the interpreter its registry entry names, and its result.
Its own module so that jobs (one job of a plan) and the store both import it one way (no circle)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from suite.runtime import envs, procs
from suite.records.base import JOB_ENV, Record
from suite.plan.results import read_result
from suite.records.paths import run_folder_of
from suite.stages.registry import QUANTIZE_ENV, STAGES


class StageOutcome(NamedTuple):
    result: Record | None
    error: str | None
    wall_s: float
    note: str | None = None  # something the user should hear about a stage that did succeed


def interpreter(stage: str) -> str:
    """The Python that runs ``stage``: its environment's (registry ``environment``)."""
    return envs.quantize_python() if STAGES[stage].environment == QUANTIZE_ENV else envs.serve_python()


def run_stage(stage: str, config: Record, vdir: Path, env: dict[str, str], lock=None,
              python: str | None = None, key: str | None = None) -> StageOutcome:
    """Run one stage process under ``suite.runtime.procs.supervised``: it dies with us (even with a ``kill -9``
    of ``suite run``), and every process it left behind (an engine core, a server) is killed when it ends.

    A stage that wrote its result and then died (on a GPU, vLLM's engine teardown at interpreter exit can
    abort an evaluate process with 'terminate called without an active exception', exit -6, after
    lm-eval had finished and the result was written) succeeded: the result is kept, with a note. The
    result file is removed before the stage starts and written atomically, so one that is there and
    parses is this stage's complete result. ``lock`` (the run's ``lock.RunLock``) records the stage
    process while it runs, and its token lets the stage write its result only while the run owns the
    folder. ``key``: the job's content key; the stage writes it, with its variant (the folder's name) and its
    config's sha256, into its result (``records.base.JobStamp``, named through ``SUITE_JOB``)."""
    python = python or interpreter(stage)  # chosen by the parent when the job runs elsewhere (a Ray worker)
    cfg_path, res_path, log_path = (vdir / f"{stage}.config.json", vdir / f"{stage}.result.json", vdir / f"{stage}.log")
    config.write(cfg_path)
    res_path.unlink(missing_ok=True)
    env = {**env, JOB_ENV: json.dumps({"variant": vdir.name, "key": key})}
    if lock is not None:
        env = {**env, **lock.env()}
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = procs.supervised([python, "-m", "suite.stages", stage, str(cfg_path), str(res_path)], stdout=log,
                                env=env)
        try:
            if lock is not None:
                lock.set_stage(stage, vdir.name, proc.pid)
            rc = proc.wait()
        finally:  # Ctrl-C or an error here: the supervisor takes the stage's whole tree down
            procs.stop(proc, grace_s=10)
            if lock is not None:
                lock.set_stage(stage, vdir.name, None)
    wall = time.perf_counter() - start
    result, unreadable = read_result(vdir, stage)
    if result is not None and (lock is None or lock.owned()):  # the stage wrote absolute names: made relative
        result.write(res_path, root=run_folder_of(vdir))
    if rc == 0 and result is not None:
        return StageOutcome(result, None, wall)
    last = f"{failure_line(log_path)} [log: {log_path}]"  # the log is read only when something went wrong
    if result is None:
        return StageOutcome(None, f"{stage} failed (exit {rc}): {last}"
                            + (f"; {unreadable}" if unreadable else ""), wall)
    return StageOutcome(result, None, wall, f"the {stage} process exited with code {rc} after writing its result "
                                            f"(kept): {last}")


def failure_line(log_path: Path) -> str:
    """The last 'SomeError: message' line of a stage log (the exception that ended it), else its last line."""
    return procs.failure_line(log_path)
