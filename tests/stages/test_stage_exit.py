"""A stage with a ``close`` (the evaluate stage) ends right after its result is written and ``close()`` ran, with
exit code 0, whatever the interpreter's teardown would have done (on the H200: vLLM's engine threads aborted every
evaluate process at exit, -6). The stage process here is ``python -m suite.stages``'s own ``main`` with a registry
entry for a small stage that leaves a non-daemon thread running (a normal exit waits for it forever)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from suite.stages.registry import ENGINE_CHECKS, SERVED_CHECK, STAGES

STAGE = textwrap.dedent("""
    import sys, threading, time
    from suite.stages import registry
    from suite.records.base import Record
    from suite.stages.registry import StageSpec

    class Cfg(Record):
        close_fails: bool = False
        close_hangs: bool = False
        run_fails: bool = False

    class Res(Record):
        value: int

    def run(config):
        threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()  # joined at a normal exit
        time.sleep(0.4)  # a few samples of the stack (suite.runtime.stacks: one every 0.1 s)
        if config.run_fails:
            raise RuntimeError("CUDA error: out of memory")
        return Res(value=7)

    def close():
        print("closed", flush=True)
        cfg = Cfg.read(__import__("pathlib").Path(sys.argv[2]))
        if cfg.close_fails:
            raise RuntimeError("engine already gone")
        if cfg.close_hangs:
            time.sleep(3600)

    registry.register_stage(StageSpec("toy", Cfg, Res, "serve", "__main__:run", close="__main__:close"))
    import suite.stages.__main__ as stage_main
    from functools import partial
    stage_main.end_without_teardown = partial(stage_main.end_without_teardown, timeout_s=2)
    from suite.stages.__main__ import main
    sys.exit(main(sys.argv[1:]))
""")


def _run(tmp_path: Path, close_fails: bool, close_hangs: bool = False, run_fails: bool = False,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "toy_stage.py"
    script.write_text(STAGE)
    cfg, res = tmp_path / "toy.config.json", tmp_path / "toy.result.json"
    flags = {"close_fails": close_fails, "close_hangs": close_hangs, "run_fails": run_fails}
    cfg.write_text(json.dumps(flags))
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, str(script), "toy", str(cfg), str(res)], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", **(env or {})})


def test_a_stage_with_close_ends_after_its_result_without_waiting_for_teardown(tmp_path):
    done = _run(tmp_path, close_fails=False)  # a normal exit would wait an hour for the thread: the timeout fails it
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "closed"
    assert (tmp_path / "toy.result.json").read_text().count('"value": 7') == 1
    profile = json.loads((tmp_path / "toy.stacks.json").read_text())  # suite.runtime.stacks, beside the result
    assert len(profile["samples"]) >= 2 and any(f.endswith(":run") for f in profile["frames"])
    assert "where the stage's main thread was" in done.stderr  # the log's closing timeline


def test_no_stack_profile_when_sampling_is_switched_off_and_none_left_from_before(tmp_path):
    (tmp_path / "toy.stacks.json").write_text("an earlier attempt's")
    done = _run(tmp_path, close_fails=False, env={"SUITE_STACK_SAMPLING": "0"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "toy.result.json").is_file() and not (tmp_path / "toy.stacks.json").exists()


def test_a_close_that_fails_is_a_warning_after_the_result_not_a_failure(tmp_path):
    done = _run(tmp_path, close_fails=True)
    assert done.returncode == 0
    # through the stage's one handler (suite.stages.__main__ logs as itself though it runs as __main__)
    assert re.search(r"^\d\d:\d\d:\d\d toy WARNING suite\.stages\.__main__: the stage's close\(\) failed after the "
                     r"stage ended: RuntimeError: engine already gone$", done.stderr, re.M), done.stderr
    assert (tmp_path / "toy.result.json").is_file()


def test_a_close_that_hangs_is_given_up_on_after_its_timeout(tmp_path):
    done = _run(tmp_path, close_fails=False, close_hangs=True)  # the timeout here is 2 s, the stage's 60 s
    assert done.returncode == 0
    assert "close() had not returned after 2 s" in done.stderr
    assert (tmp_path / "toy.result.json").is_file()


def test_a_stage_that_fails_prints_its_error_closes_and_exits_1_without_teardown(tmp_path):
    done = _run(tmp_path, close_fails=False, run_fails=True)  # the thread would hold a normal exit an hour
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("RuntimeError: CUDA error: out of memory")  # what run_stage reports
    assert "where the stage's main thread was" in done.stderr  # the timeline, before the traceback
    assert done.stdout.strip() == "closed"
    assert not (tmp_path / "toy.result.json").exists()
    assert (tmp_path / "toy.stacks.json").is_file()  # where a failed stage spent its time is kept too


def test_an_orphan_stage_with_close_writes_nothing_shuts_its_engine_down_and_exits_3(tmp_path):
    """A stage of a run whose folder was taken over: its result is refused, and the engine it started is still shut
    down (close runs) before it ends, without waiting for the teardown (the thread would hold it an hour)."""
    from suite.runtime import lock as runlock

    held = runlock.RunLock(tmp_path).acquire()
    env = held.env()
    runlock.RunLock(tmp_path)._write({**runlock.RunLock.read(held.path), "pid": 1, "token": "someone-else"})
    done = _run(tmp_path, close_fails=False, env=env)
    assert done.returncode == 3
    assert "result not written: the run folder was taken over" in done.stderr
    assert done.stdout.strip() == "closed"
    assert not (tmp_path / "toy.result.json").exists()
    assert not (tmp_path / "toy.stacks.json").exists()  # nor its profile: the folder is the new run's


def test_an_orphan_stage_that_fails_leaves_the_new_runs_profile_alone(tmp_path):
    from suite.runtime import lock as runlock

    held = runlock.RunLock(tmp_path).acquire()
    env = held.env()
    runlock.RunLock(tmp_path)._write({**runlock.RunLock.read(held.path), "pid": 1, "token": "someone-else"})
    (tmp_path / "toy.stacks.json").write_text("the new run's")
    done = _run(tmp_path, close_fails=False, run_fails=True, env=env)
    assert done.returncode == 1
    assert (tmp_path / "toy.stacks.json").read_text() == "the new run's"


def test_the_stage_entry_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "suite.stages"], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m suite.stages {quantize,")


def test_evaluate_close_shuts_down_the_engine_it_started_and_says_when_it_cannot(caplog):
    import logging
    from types import SimpleNamespace

    from suite.stages.evaluate import stage

    calls = []
    with_engine = SimpleNamespace(model=SimpleNamespace(llm_engine=SimpleNamespace(
        engine_core=SimpleNamespace(shutdown=lambda: calls.append("shutdown")))))
    stage._started[:] = [with_engine, SimpleNamespace(model=SimpleNamespace())]
    with caplog.at_level(logging.INFO, logger="suite.stages.evaluate.stage"):
        stage.close()
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert calls == ["shutdown"] and said[0][0] == logging.INFO and said[0][1].startswith("evaluate: engine shut down in")
    assert said[1] == (logging.WARNING, "evaluate: no llm_engine.engine_core.shutdown() on lm-eval's vLLM model; its "
                                        "engine is left to the stage's supervisor")
    assert stage._started == []


def test_only_the_evaluate_stage_skips_the_teardown():
    # quantize saves a checkpoint, benchmark stops a server, kvcheck writes scales: their exits stay normal; the
    # engine-check stages and the served check are evaluate's entry run again (eval.engine_check,
    # eval.served_check_items), so they end as it does
    assert {name for name, spec in STAGES.items() if spec.close} == {"evaluate", *ENGINE_CHECKS, SERVED_CHECK}
    assert all(STAGES[name].close == STAGES["evaluate"].close for name in (*ENGINE_CHECKS, SERVED_CHECK))
    assert STAGES["evaluate"].load_close().__module__ == "suite.stages.evaluate.stage"
