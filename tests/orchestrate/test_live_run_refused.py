"""`suite summarize`, `suite report` and `suite.load_run` on a run whose run.lock a live `suite run` holds (issue 48.5):
refused with exit 2 / SuiteError naming the PID, the run's files left as they were; once the lock is released (or
its holder is gone) they read the run again."""

from __future__ import annotations

import json
import os

import pytest

import suite
from conftest import build_gated_run
from suite import cli
from suite.runtime.errors import SuiteError
from suite.runtime.lock import RunLock


def files(run):
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in run.rglob("*") if p.is_file()}


@pytest.fixture
def live_run(tmp_path):
    """A run folder with summary.json and report.html, its lock held by this (live) process, as `suite run` holds it."""
    s = build_gated_run(tmp_path, {"max_drop": {"suite_gsm8k": 0.05}})
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(s))
    (run / "report.html").write_text("<p>the live run's own page</p>")
    lock = RunLock(run).acquire()
    yield run, lock
    lock.release()


@pytest.mark.parametrize("command", ["summarize", "report"])
def test_a_live_run_is_refused_and_left_alone(live_run, capsys, command):
    run, _ = live_run
    before = files(run)
    assert cli.main([command, str(run)]) == 2
    err = capsys.readouterr().err
    assert f"in progress, PID {os.getpid()}" in err and f"`suite {command}`" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "(fix: wait until that `suite run` ends" in err
    assert files(run) == before


def test_load_run_refuses_a_live_run_and_reads_it_once_it_ended(live_run, capsys):
    run, lock = live_run
    with pytest.raises(SuiteError, match=f"in progress, PID {os.getpid()}"):
        suite.load_run(run)
    lock.release()
    assert suite.load_run(run).summary.recipe_name == "demo-cpu"
    assert cli.main(["report", str(run)]) == 0 and "report:" in capsys.readouterr().out


def test_a_lock_whose_run_is_gone_is_no_refusal(live_run):
    """A run that crashed leaves its lock: a holder that no longer runs (here PID 1's create time, not this run's)."""
    run, lock = live_run
    lock._write({**RunLock.read(lock.path), "pid": 1, "create_time": 1.0})
    assert suite.load_run(run).summary.recipe_name == "demo-cpu"
