"""Where an evaluation's wall time goes: lm-eval's calls into the model by request type, and lm-eval's own phases.

On a GPU, minutes of an evaluation can go unexplained by any progress bar, and on a 2-core CPU machine lm-eval's own work for the same four benchmarks (an engine-less run of
``simple_evaluate``) is ~12 s: the split says which phase it is. Each timer wraps one callable that lm-eval looks up at
call time, counts a call made inside another call of the same timer once, and keeps counting when the call raises.
Nothing is changed but the timing; ``lm_eval_phases`` puts every wrapped attribute back on leaving.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from suite.runtime import progress

REQUEST_TYPES = ("loglikelihood", "loglikelihood_rolling", "generate_until")


def _timer(seconds: dict[str, float], kind: str, method: Callable, depth: list[int] | None = None) -> Callable:
    """``method``, adding its wall time to ``seconds[kind]``; a call inside another call that shares ``depth``
    (one timer's own by default) is not counted again."""
    depth = [0] if depth is None else depth

    def call(*args, **kwargs):
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                seconds[kind] = seconds.get(kind, 0.0) + time.perf_counter() - t0
    call.__wrapped__ = method  # type: ignore[attr-defined]
    return call


def time_requests(lm) -> dict[str, float]:
    """Time lm-eval's calls into the model: wraps the instance's ``loglikelihood``, ``loglikelihood_rolling`` and
    ``generate_until`` (lm-eval calls ``getattr(lm, reqtype)(requests)``) and returns the dict it fills, seconds by
    request type. A call made from inside another (a rolling loglikelihood that calls ``loglikelihood``) counts once,
    for the outer type."""
    seconds: dict[str, float] = {}
    depth = [0]  # shared: a nested call of another type is not counted again
    counts: dict[str, list[int]] = {}
    for kind in REQUEST_TYPES:
        method = getattr(lm, kind, None)
        if callable(method):
            setattr(lm, kind, _timer(seconds, kind, _counter(counts, kind, method, depth), depth))
    return seconds


def _counter(counts: dict[str, list[int]], kind: str, method: Callable, depth: list[int]) -> Callable:
    """``method``, saying how many requests of ``kind`` are done of those asked for so far (suite.runtime.progress:
    ``lm-eval generate_until 640/1319``), before and after each outermost call."""
    def call(requests, *args, **kwargs):
        outer = depth[0] <= 1  # the timer around this one has already counted its own call
        done_total = counts.setdefault(kind, [0, 0])
        n = len(requests) if hasattr(requests, "__len__") else 0
        if outer:
            done_total[1] += n
            progress.update(f"lm-eval {kind}", done_total[0], done_total[1])
        try:
            return method(requests, *args, **kwargs)
        finally:
            if outer:
                done_total[0] += n
                progress.update(f"lm-eval {kind}", done_total[0], done_total[1])
    call.__wrapped__ = method  # type: ignore[attr-defined]
    return call


# (owner module or class path, attribute, phase): what lm-eval 0.4.13's simple_evaluate looks up at call time
_PHASES = (
    ("lm_eval.api.task", "Task.build_all_requests", "build"),   # every task's documents -> requests (prompts)
    ("lm_eval.evaluator", "evaluate", "evaluate"),              # build + requests + scoring
    ("lm_eval.evaluator", "add_env_info", "env_info"),          # torch's collect_env: nvidia-smi, pip, lscpu
    ("lm_eval.evaluator", "add_tokenizer_info", "env_info"),
    ("lm_eval.evaluator", "get_git_commit_hash", "env_info"),
)


_ABSENT = object()


@contextmanager
def lm_eval_phases(task_manager) -> Iterator[dict[str, float]]:
    """Time lm-eval's phases while the block runs: ``tasks`` (``task_manager.load``: reading the task configs and
    their data), ``build`` (``Task.build_all_requests``), ``evaluate`` (the whole of lm-eval's ``evaluate``: build,
    requests and scoring), ``env_info`` (what lm-eval adds about the environment after evaluating). Yields the dict it
    fills; ``split_lm_eval`` turns it and the request times into the result's parts."""
    import importlib

    seconds: dict[str, float] = {}
    undo: list[tuple[object, str, object]] = []
    try:
        for module, path, phase in _PHASES:
            owner = importlib.import_module(module)
            *parents, attr = path.split(".")
            for p in parents:
                owner = getattr(owner, p)
            original = owner.__dict__[attr]
            setattr(owner, attr, _timer(seconds, phase, original))
            undo.append((owner, attr, original))
        own = vars(task_manager).get("load", _ABSENT)  # an instance attribute of its own, if any, comes back
        task_manager.load = _timer(seconds, "tasks", task_manager.load)
        undo.append((task_manager, "load", own))
        yield seconds
    finally:
        for owner, attr, original in reversed(undo):
            if original is _ABSENT:
                delattr(owner, attr)  # the class's method shows through again
            else:
                setattr(owner, attr, original)


def instant_lm(generate_delay_s: float = 0.0):
    """An lm-eval model that answers at once (every loglikelihood -1, every generation empty, after
    ``generate_delay_s``), so that lm-eval's own phases are all that takes time: for measuring them on a host without
    an engine (scripts/lm_eval_phases.py) and for testing the split. Its scores mean nothing."""
    from lm_eval.api.model import LM

    class Instant(LM):
        def loglikelihood(self, requests, disable_tqdm=False):
            return [(-1.0, False) for _ in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            return [-1.0 for _ in requests]

        def generate_until(self, requests, disable_tqdm=False):
            time.sleep(generate_delay_s)
            return ["" for _ in requests]

    return Instant()


def split_lm_eval(total: float, phases: dict[str, float], requests: dict[str, float]) -> dict[str, float]:
    """lm-eval's share of an evaluation (``total`` seconds inside ``simple_evaluate``) as parts that add up to it:
    ``lm_eval.tasks``, ``lm_eval.build``, ``requests.<type>``, ``lm_eval.scoring`` (the rest of ``evaluate``: each
    document's metrics, HumanEval's programs, the aggregates, the samples), ``lm_eval.env_info`` and
    ``lm_eval.other`` (seeding, configuring the tasks, what is left)."""
    in_requests = sum(requests.values())
    evaluate = phases.get("evaluate", 0.0)
    parts = {"lm_eval.tasks": phases.get("tasks", 0.0), "lm_eval.build": phases.get("build", 0.0),
             **{f"requests.{kind}": sec for kind, sec in requests.items()},
             "lm_eval.scoring": evaluate - phases.get("build", 0.0) - in_requests,
             "lm_eval.env_info": phases.get("env_info", 0.0)}
    parts["lm_eval.other"] = total - sum(parts.values())
    return parts
