"""eval.engine_check (issue 41, 2b): the baseline and every FP8-KV variant are scored once more per engine
configuration, each as its own evaluate-check-<i> job with its own config, cache key and result file; `suite
validate` refuses a check with nothing to vary or nothing to compare."""

from __future__ import annotations

import pytest

from suite import cli
from suite.plan.keys import cache_key
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.runtime.errors import SuiteError
from suite.stages.registry import ENGINE_CHECKS, EVALUATE, STAGES

CHECK = {"max_num_seqs": [64, 1024]}


def test_plan_adds_one_evaluate_job_per_configuration_for_baseline_and_fp8_kv(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy(eval__engine_check=CHECK)), tmp_path / "run")
    c1, c2 = ENGINE_CHECKS[:2]
    assert plan.jobs() == [("quantize", "fp8-kv"), (EVALUATE, "bf16"), (EVALUATE, "fp8-kv"), (c1, "bf16"),
                           (c1, "fp8-kv"), (c2, "bf16"), (c2, "fp8-kv"), ("benchmark", "bf16"),
                           ("benchmark", "fp8-kv")]
    assert STAGES[c1].entry == STAGES[EVALUATE].entry and STAGES[c1].config is STAGES[EVALUATE].config
    for vp in plan.variants:
        main, first, second = vp.evaluate, vp.config(c1), vp.config(c2)
        assert [vp.check_label(c1), vp.check_label(c2)] == ["max_num_seqs=64", "max_num_seqs=1024"]
        assert first.engine.engine_args == {**main.engine.engine_args, "max_num_seqs": 64}
        assert second.engine.engine_args["max_num_seqs"] == 1024
        assert first.output_dir.endswith(f"variants/{vp.variant.name}/{c1}")
        assert len({cache_key(c, "id") for c in (main, first, second)}) == 3  # its own cache key
        assert first.tasks == main.tasks and first.engine.model == main.engine.model
    # the checks wait for the checkpoint as the evaluation does
    dag = {j.id: j for j in plan.dag}
    assert dag[f"{c1}:fp8-kv"].deps == ("quantize:fp8-kv",)


def test_a_variant_without_an_fp8_kv_cache_gets_no_check(demo_recipe_copy, tmp_path):
    path = demo_recipe_copy(eval__engine_check=[{"max_num_seqs": 8}],
                            variants=[{"name": "fp8-kv", "kv_cache_dtype": "fp8"}, {"name": "bf16-again"}])
    plan = make_plan(load_recipe(path), tmp_path / "run")
    assert [(s, v) for s, v in plan.jobs() if s in ENGINE_CHECKS] == [(ENGINE_CHECKS[0], "bf16"),
                                                                       (ENGINE_CHECKS[0], "fp8-kv")]


def test_suite_plan_lists_the_check_jobs(demo_recipe_copy, capsys):
    assert cli.main(["plan", str(demo_recipe_copy(eval__engine_check=CHECK))]) == 0
    out = capsys.readouterr().out
    assert f"{ENGINE_CHECKS[0]}:fp8-kv" in out or f"{ENGINE_CHECKS[0]} " in out, out
    assert ENGINE_CHECKS[1] in out


@pytest.mark.parametrize("check, words", [
    ({}, "nothing to vary"),
    ([], "nothing to vary"),
    ([{}], "nothing to vary"),
    ({"max_num_seqs": []}, "no values"),
    ([{"max_num_seqs": n} for n in (1, 2, 4, 8, 16)], "at most"),
    ([{"kv_cache_dtype": "auto"}], "decides which model"),
])
def test_validate_refuses_a_check_with_nothing_to_vary(demo_recipe_copy, check, words):
    with pytest.raises(SuiteError, match=words):
        load_recipe(demo_recipe_copy(eval__engine_check=check))


def test_validate_refuses_a_check_with_nothing_to_compare(demo_recipe_copy):
    with pytest.raises(SuiteError, match="no variant has an FP8 KV cache"):
        load_recipe(demo_recipe_copy(eval__engine_check=CHECK, variants=[{"name": "plain"}]))
    with pytest.raises(SuiteError, match="no eval.tasks"):
        load_recipe(demo_recipe_copy(eval__engine_check=CHECK, eval__tasks=[]))
