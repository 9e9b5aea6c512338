"""The stage processes' stack sampler (suite.runtime.stacks): the time goes to the functions that spent it, in the
order they ran, and a profile reads back as the timeline a stage's log ends with."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from suite.runtime import stacks


def _sleepy_phase(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.005)


def _busy_phase(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


def _holds_the_lock_phase() -> None:
    sum(range(20_000_000))  # one C call that keeps the interpreter lock (~0.3-1 s): the sampler waits for it
    time.sleep(0.05)


def test_the_time_goes_to_the_functions_that_spent_it_in_the_order_they_ran():
    sampler = stacks.StackSampler(interval_s=0.01).start()
    _sleepy_phase(0.6)
    _busy_phase(0.6)
    sampler.stop()
    data = json.loads(json.dumps(sampler.to_json()))  # as written and read back
    assert len(data["samples"]) > 20
    parts = stacks.weighted(data)
    assert abs(sum(b - a for a, b, _ in parts) - data["samples"][-1][0]) < 1e-6  # the weights add up to the time
    seconds = dict((path.rsplit(":", 1)[1], sec) for path, sec in stacks.top(data))
    assert seconds["_sleepy_phase"] > 0.3 and seconds["_busy_phase"] > 0.3
    rows = [r for r in stacks.timeline(data, window_s=0.2) if r.seconds >= 0.1]  # not stop()'s last sample
    assert rows[0].path.endswith(":_sleepy_phase") and rows[-1].path.endswith(":_busy_phase")
    assert [r.path.rsplit(":", 1)[1] for r in rows].count("_sleepy_phase") == 1  # windows in a row are joined
    assert all(0.6 <= r.share <= 1.0 for r in rows)


def test_a_call_that_keeps_the_interpreter_lock_is_counted_for_its_caller():
    sampler = stacks.StackSampler(interval_s=0.01).start()
    t0 = time.perf_counter()
    _holds_the_lock_phase()
    took = time.perf_counter() - t0
    sampler.stop()
    seconds = dict((path.rsplit(":", 1)[1], sec) for path, sec in stacks.top(sampler.to_json()))
    assert seconds.get("_holds_the_lock_phase", 0.0) > 0.8 * took  # not lost, not given to whatever came after


def _profile(stacks_: list[list[str]], samples: list[tuple[float, int]]) -> dict:
    """A profile with named frames: each stack a list of labels, outermost first."""
    frames = sorted({f for s in stacks_ for f in s})
    return {"interval_s": 0.1, "started_unix": 0.0, "pid": 1, "frames": frames,
            "stacks": [[frames.index(f) for f in s] for s in stacks_], "samples": [list(s) for s in samples]}


MAIN = ["suite/stages/__main__.py:main", "suite/stages/evaluate/stage.py:run"]
LOAD = MAIN + ["suite/stages/evaluate/timing.py:call", "lm_eval/evaluator.py:simple_evaluate",
               "lm_eval/tasks/__init__.py:load", "suite/stages/evaluate/local_data.py:load_csv_splits",
               "<stdlib>/csv.py:__next__"]
BUILD = MAIN + ["suite/stages/evaluate/timing.py:call", "lm_eval/evaluator.py:simple_evaluate",
                "lm_eval/evaluator.py:evaluate", "lm_eval/api/task.py:build_all_requests"]
ENGINE = MAIN + ["suite/stages/evaluate/stage.py:build_lm", "vllm/entrypoints/llm.py:__init__",
                 "zmq/sugar/poll.py:poll"]


def test_each_window_is_named_by_the_call_path_most_of_its_time_went_to():
    data = _profile([ENGINE, LOAD, BUILD], [(1.0 * i, 0) for i in range(1, 11)]
                    + [(10.0 + i, 1 if i % 4 else 2) for i in range(1, 11)]  # 8 of 10 loading the data
                    + [(20.0 + i, 2) for i in range(1, 11)])
    rows = stacks.timeline(data, window_s=10)
    assert [(r.start_s, r.end_s) for r in rows] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)]
    assert rows[0].path == ("suite/stages/evaluate/stage.py:build_lm > vllm/entrypoints/llm.py:__init__ > "
                            "zmq/sugar/poll.py:poll")  # the first package it called, then the innermost
    # the timer's frame is skipped; the suite's innermost frame, then the package's, then the innermost
    assert rows[1].path == ("lm_eval/tasks/__init__.py:load > suite/stages/evaluate/local_data.py:load_csv_splits "
                            "> <stdlib>/csv.py:__next__")  # in call order: lm-eval called the suite's loader
    assert rows[1].share == 0.8
    assert rows[2].path == "suite/stages/evaluate/stage.py:run > lm_eval/api/task.py:build_all_requests"
    # under 60% nowhere deeper than simple_evaluate: the window is named by the path they share
    mixed = stacks.timeline(data, window_s=15, start_s=10.0, end_s=25.0)  # 8 s loading, 7 s building
    assert mixed[0].path == "suite/stages/evaluate/stage.py:run > lm_eval/evaluator.py:simple_evaluate"
    lines = stacks.report(data, window_s=10).splitlines()
    assert lines[2].split()[:3] == [time.strftime("%H:%M:%S", time.localtime(10.0)), "10.0", "10.0"]  # wall clock
    assert [ln.split()[0] for ln in lines[-3:]] == ["12.0", "10.0", "8.0"]  # building, the engine, loading


def test_the_profile_of_a_stage_lies_beside_its_result():
    from suite.stages.__main__ import stacks_path

    assert stacks_path(Path("/r/variants/bf16/evaluate.result.json")) == Path("/r/variants/bf16/evaluate.stacks.json")
    assert stacks_path(Path("/r/out.json")) == Path("/r/out.json.stacks.json")  # never the result itself


def test_a_profile_is_written_on_the_way_so_a_killed_stage_leaves_one(tmp_path):
    path = tmp_path / "evaluate.stacks.json"
    allowed = [True]
    sampler = stacks.StackSampler(interval_s=0.01, path=path, checkpoint_s=0.05, may_write=lambda: allowed[0]).start()
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        _sleepy_phase(0.05)
    assert json.loads(path.read_text())["samples"]  # a whole profile, mid-run
    allowed[0] = False  # the run folder was taken over: nothing more is written there
    path.write_text("the new run's")
    _sleepy_phase(0.3)
    sampler.stop()
    assert path.read_text() == "the new run's"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_sampler_that_fails_stops_and_says_why_instead_of_failing_the_stage():
    sampler = stacks.StackSampler(interval_s=0.01)
    sampler.sample = lambda: 1 / 0
    sampler.start()
    _sleepy_phase(0.2)
    sampler.stop()
    assert sampler.error == "ZeroDivisionError: division by zero"
    assert "(sampling stopped early: ZeroDivisionError" in stacks.report(sampler.to_json())


def test_the_evaluate_stages_timers_are_left_out_of_the_call_paths():
    from suite.stages.evaluate import timing

    wrapper = timing._timer({}, "build", lambda: None)
    assert stacks.label(wrapper.__code__) in stacks.TRANSPARENT


def test_frames_are_named_from_their_package_wherever_it_is_installed(monkeypatch):
    monkeypatch.setattr(sys, "path", [*sys.path, "/tmp/envs/serve"])  # the GPU bundle's PYTHONPATH
    assert stacks._where("/tmp/envs/serve/vllm/v1/engine/core.py") == "vllm/v1/engine/core.py"
    assert stacks._where("/x/lib/python3.12/site-packages/lm_eval/evaluator.py") == "lm_eval/evaluator.py"
    assert stacks._where(stacks.__file__) == "suite/runtime/stacks.py"
    assert stacks._where(json.__file__) == "<stdlib>/json/__init__.py"


def test_the_command_prints_a_profile_and_names_a_file_it_cannot_read(tmp_path):
    path = tmp_path / "evaluate.stacks.json"
    path.write_text(json.dumps(_profile([ENGINE], [(1.0, 0), (2.0, 0)])))
    repo = Path(__file__).resolve().parents[2]
    ok = subprocess.run([sys.executable, "-m", "suite.runtime.stacks", str(path)], capture_output=True, text=True,
                        cwd=repo, timeout=60)
    assert ok.returncode == 0 and "zmq/sugar/poll.py:poll" in ok.stdout
    window = subprocess.run([sys.executable, "-m", "suite.runtime.stacks", str(path), "--window", "0"],
                            capture_output=True, text=True, cwd=repo, timeout=60)
    assert window.returncode == 2 and "must be > 0" in window.stderr
    for broken in ("{not json", '{"samples": [[1.0, 0]]}'):
        path.write_text(broken)
        bad = subprocess.run([sys.executable, "-m", "suite.runtime.stacks", str(path)], capture_output=True,
                             text=True, cwd=repo, timeout=60)
        assert bad.returncode == 2 and str(path) in bad.stderr and "Traceback" not in bad.stderr
