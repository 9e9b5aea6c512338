"""time_requests: lm-eval's calls into the model are timed by request type, a nested call once (the outer type)."""

from __future__ import annotations

import time

from suite.stages.evaluate.timing import time_requests


class FakeLM:
    def loglikelihood(self, requests):
        time.sleep(0.2)  # long enough that a late wake-up on a loaded machine stays far from the bounds below
        return [(0.0, True)] * len(requests)

    def loglikelihood_rolling(self, requests):  # as some backends do: through loglikelihood
        return [x for x, _ in self.loglikelihood(requests)]

    def generate_until(self, requests):
        time.sleep(0.1)
        return ["" for _ in requests]


def test_request_types_are_timed_and_a_nested_call_counts_once():
    lm = FakeLM()
    seconds = time_requests(lm)
    assert getattr(lm, "loglikelihood")([1, 2]) == [(0.0, True)] * 2  # what lm-eval calls: getattr(lm, reqtype)
    lm.loglikelihood_rolling([1])
    lm.generate_until([1, 2, 3])
    assert set(seconds) == {"loglikelihood", "loglikelihood_rolling", "generate_until"}
    assert 0.2 <= seconds["loglikelihood"] < 0.4  # its own call only, not the one inside rolling (0.4 with it)
    assert 0.2 <= seconds["loglikelihood_rolling"] < 0.4
    assert 0.1 <= seconds["generate_until"] < 0.3


def test_a_request_that_raises_is_still_timed():
    class Broken:
        def generate_until(self, requests):
            raise RuntimeError("engine died")

    lm = Broken()
    seconds = time_requests(lm)
    try:
        lm.generate_until([1])
    except RuntimeError:
        pass
    assert list(seconds) == ["generate_until"]


def _instant_lm():
    """Answers at once (generation after 0.2 s), so that lm-eval's own phases are what takes the time: the split is
    under test, not a model (tests/test_demo_cpu.py checks the split of a real evaluation)."""
    from suite.stages.evaluate.timing import instant_lm

    return instant_lm(generate_delay_s=0.2)


def test_lm_eval_phases_split_simple_evaluate_and_put_everything_back(monkeypatch):
    """Real lm-eval on the repository's GSM8K copy (4 documents): the phases are timed, the parts add up to the time
    inside simple_evaluate, and every wrapped attribute is lm-eval's own again afterwards."""
    from pathlib import Path

    import lm_eval
    import lm_eval.evaluator as ev
    from lm_eval.api.task import Task
    from lm_eval.tasks import TaskManager

    from suite.stages.evaluate.timing import lm_eval_phases, split_lm_eval

    root = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(root / "tasks" / "data")
    tm = TaskManager(include_path=str(root / "tasks"), include_defaults=False)
    before = (Task.__dict__["build_all_requests"], ev.evaluate, ev.add_env_info, ev.add_tokenizer_info,
              ev.get_git_commit_hash)
    lm = _instant_lm()
    requests = time_requests(lm)
    t0 = time.perf_counter()
    with lm_eval_phases(tm) as phases:
        res = lm_eval.simple_evaluate(model=lm, tasks=["suite_gsm8k"], limit=4, task_manager=tm, log_samples=True)
    total = time.perf_counter() - t0
    assert res["results"]["suite_gsm8k"]["exact_match,strict-match"] == 0.0
    assert set(phases) == {"tasks", "build", "evaluate", "env_info"} and min(phases.values()) > 0
    assert phases["evaluate"] > phases["build"] + requests["generate_until"] >= 0.2
    parts = split_lm_eval(total, phases, requests)
    assert list(parts) == ["lm_eval.tasks", "lm_eval.build", "requests.generate_until", "lm_eval.scoring",
                           "lm_eval.env_info", "lm_eval.other"]
    assert min(parts.values()) >= 0 and abs(sum(parts.values()) - total) < 1e-9
    after = (Task.__dict__["build_all_requests"], ev.evaluate, ev.add_env_info, ev.add_tokenizer_info,
             ev.get_git_commit_hash)
    assert after == before and "load" not in vars(tm)


def test_lm_eval_phases_put_everything_back_when_lm_eval_raises():
    import lm_eval.evaluator as ev

    from suite.stages.evaluate.timing import lm_eval_phases

    class Manager:
        def load(self, tasks):
            raise ValueError("no such task")

    tm = Manager()
    evaluate = ev.evaluate
    try:
        with lm_eval_phases(tm) as phases:
            tm.load(["x"])
    except ValueError:
        pass
    assert ev.evaluate is evaluate and "load" not in vars(tm) and set(phases) == {"tasks"}


def test_nested_phases_give_back_what_was_there():
    import lm_eval.evaluator as ev

    from suite.stages.evaluate.timing import lm_eval_phases

    class Manager:
        def load(self, tasks):
            return {"tasks": tasks}

    tm = Manager()
    evaluate = ev.evaluate
    with lm_eval_phases(tm) as outer:
        outer_load = tm.load
        with lm_eval_phases(tm) as inner:
            assert tm.load(["a"]) == {"tasks": ["a"]}
        assert tm.load is outer_load and ev.evaluate is not evaluate
    assert "load" not in vars(tm) and ev.evaluate is evaluate
    assert set(inner) == {"tasks"} and set(outer) == {"tasks"}


def test_the_phases_script_runs_the_stages_own_setup_and_scoring(tmp_path):
    """tools/lm_eval_phases.py (lm-eval's host cost without an engine) calls the evaluate stage's ``prepare`` and
    ``score_tasks``: it prints every key of the stage's lm-eval split and writes a stack profile."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    res = subprocess.run([sys.executable, "tools/lm_eval_phases.py", "tasks/data", "suite_gsm8k",
                          "--profile", str(tmp_path / "p.stacks.json")], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    split = json.loads(res.stdout.strip().splitlines()[-1])
    assert list(split) == ["import", "lm_eval.tasks", "lm_eval.build", "requests.generate_until", "lm_eval.scoring",
                           "lm_eval.env_info", "lm_eval.other", "total"]
    profile = json.loads((tmp_path / "p.stacks.json").read_text())
    assert profile["samples"] and {"suite/stages/evaluate/stage.py:prepare",
                                   "suite/stages/evaluate/stage.py:score_tasks"} <= set(profile["frames"])
    missing = subprocess.run([sys.executable, "tools/lm_eval_phases.py", str(tmp_path / "nowhere")], cwd=root,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no such folder" in missing.stderr
