"""compile_templates_once: the four benchmarks' requests are the same strings with lm-eval's templates compiled once
as with lm-eval's compile-per-render, and the templates are compiled once each (the point of it). Built from the
repository's small copies of the data (tasks/data), every request of every subject."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TASKS = ["suite_mmlu", "suite_gsm8k", "suite_humaneval", "suite_ceval"]


def _requests(monkeypatch) -> list[tuple]:
    from lm_eval.tasks import TaskManager

    monkeypatch.chdir(ROOT / "tasks" / "data")  # the local task YAMLs read their data relative to it (as the stage)
    loaded = TaskManager(include_path=str(ROOT / "tasks"), include_defaults=False).load(TASKS)

    def leaves(d):
        for v in d.values():
            yield from (leaves(v) if isinstance(v, dict) else [v])

    out = []
    for task in sorted(leaves(loaded["tasks"] if "tasks" in loaded else loaded), key=lambda t: t.config.task):
        task.set_fewshot_seed(seed=1234)  # as simple_evaluate does (the stage passes the recipe's seed)
        task.build_all_requests(limit=None, rank=0, world_size=1)
        out += [(task.config.task, inst.request_type, inst.args) for inst in task.instances]
    return out


def test_requests_are_identical_and_each_template_is_compiled_once(monkeypatch):
    import lm_eval.utils as lm_utils

    from suite.stages.evaluate.templates import compile_templates_once

    monkeypatch.setattr(lm_utils, "apply_template", lm_utils.apply_template)  # restored after the test
    compiles = []
    from_string = lm_utils.env.from_string
    monkeypatch.setattr(lm_utils.env, "from_string", lambda t, *a, **k: compiles.append(t) or from_string(t, *a, **k))

    plain = _requests(monkeypatch)
    per_render = len(compiles)
    compiles.clear()
    compile_templates_once()
    wrapper = lm_utils.apply_template
    compile_templates_once()  # idempotent: one wrapper, not two
    assert lm_utils.apply_template is wrapper
    once = _requests(monkeypatch)

    assert {t for t, _, _ in plain} >= {"suite_gsm8k", "suite_humaneval"} and len(plain) > 1000
    assert once == plain  # every request's context and continuation, in order
    assert len(compiles) == len(set(compiles))  # each distinct template text compiled once
    assert per_render > 20 * len(compiles)
    assert lm_utils.apply_template("{{ a }}-{{ b }}", {"a": 1, "b": "x"}) == "1-x"


def test_a_missing_field_still_fails_as_in_lm_eval(monkeypatch):
    import jinja2
    import lm_eval.utils as lm_utils

    from suite.stages.evaluate.templates import compile_templates_once

    monkeypatch.setattr(lm_utils, "apply_template", lm_utils.apply_template)
    compile_templates_once()
    with pytest.raises(jinja2.exceptions.UndefinedError):  # lm-eval's StrictUndefined environment, kept
        lm_utils.apply_template("{{ question }}", {"answer": 1})
