"""The HumanEval executor: canonical solutions pass, wrong ones fail, hostile programs are contained."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from conftest import ROOT
from suite import sandbox


@pytest.fixture(autouse=True)
def allow(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")


def humaneval_rows(n=5):
    with gzip.open(ROOT / "tasks/data/humaneval/HumanEval.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh][:n]


def test_canonical_solutions_pass_and_wrong_ones_fail():
    rows = humaneval_rows()
    refs = [f"{r['test']}\ncheck({r['entry_point']})" for r in rows]
    good = [[r["prompt"] + r["canonical_solution"]] for r in rows]
    bad = [[r["prompt"] + "    return None\n"] for r in rows]
    assert sandbox.pass_at_k(refs, good, [1]) == {"pass@1": 1.0}
    assert sandbox.pass_at_k(refs, bad, [1]) == {"pass@1": 0.0}


def test_infinite_loop_times_out():
    start = time.monotonic()
    out = sandbox.run_program("while True:\n    pass\n", sandbox.Limits(timeout_s=2))
    assert out == sandbox.Outcome(False, "timeout")
    assert time.monotonic() - start < 10


def test_unbounded_allocation_is_stopped():
    out = sandbox.run_program("x = []\nwhile True:\n    x.append(bytearray(10**7))\n",
                              sandbox.Limits(timeout_s=20, memory_bytes=256 << 20))
    assert not out.passed


def test_network_is_refused():
    prog = "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))\n"
    assert not sandbox.run_program(prog).passed
    assert sandbox.run_program("import socket\nprint('ok')\n").passed


def test_fork_bomb_is_contained():
    prog = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    out = sandbox.run_program(prog, sandbox.Limits(timeout_s=2, processes=32))
    assert not out.passed
    from conftest import no_leftover
    assert not no_leftover("suite-sandbox-")


def test_nothing_runs_without_opt_in(monkeypatch):
    monkeypatch.delenv(sandbox.ALLOW_ENV)
    with pytest.raises(PermissionError, match="allow_code_execution"):
        sandbox.run_program("print(1)")


def test_pass_at_k_estimator():
    assert sandbox.estimate_pass_at_k(10, 0, 1) == 0.0
    assert sandbox.estimate_pass_at_k(10, 10, 1) == 1.0
    assert sandbox.estimate_pass_at_k(10, 5, 1) == pytest.approx(0.5)
    assert sandbox.estimate_pass_at_k(5, 1, 2) == pytest.approx(0.4)
