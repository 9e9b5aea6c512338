"""eval.sequential in the recipe and the plan: the field's refusals, the variants' margins and baseline, the wait."""

from __future__ import annotations

import pytest

from suite.plan.planner import make_plan
from suite.recipe import SuiteError, load_recipe


def test_sequential_evaluations_wait_for_the_baseline_with_the_gates_margins(demo_recipe_copy, tmp_path):
    recipe = demo_recipe_copy(eval__sequential={"looks": 4, "seed": 7},
                              gates={"default_max_drop": 0.10, "non_inferiority_margin": {"suite_gsm8k": 0.04},
                                     "max_relative_drop": {"suite_ceval": 0.2}})
    plan = make_plan(load_recipe(recipe), tmp_path / "run")
    base, fp8 = plan.variants
    assert base.evaluate.sequential.model_dump() == {"looks": 4, "seed": 7, "margins": {}, "baseline_result": None}
    s = fp8.evaluate.sequential
    assert (s.looks, s.seed) == (4, 7)
    # the smallest absolute margin; a task judged on every item (relative drop) gets none and is scored in full
    assert s.margins == {"suite_mmlu": 0.10, "suite_gsm8k": 0.04, "suite_humaneval": 0.10}
    assert s.baseline_result == str(tmp_path / "run" / "variants" / "bf16" / "evaluate.result.json")
    jobs = {j.id: j for j in plan.dag}
    assert "evaluate:bf16" in jobs["evaluate:fp8-kv"].deps
    assert "evaluate:bf16" not in jobs["evaluate:bf16"].deps


def test_without_sequential_nothing_changes(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    assert all(vp.evaluate.sequential is None for vp in plan.variants)
    assert [j.deps for j in plan.dag if j.id == "evaluate:fp8-kv"] == [("quantize:fp8-kv",)]


@pytest.mark.parametrize("change, words", [
    ({"eval__engine": "served"}, "eval.engine: served"),
    ({"eval__engine_check": [{"max_num_seqs": 8}]}, "eval.engine_check"),
    ({"eval__sequential": {"looks": 1}}, "looks"),
    ({"eval__sequential": {"looks": 4, "every": 2}}, "every"),
    ({"eval__tasks": [{"name": "suite_mmlu", "limit": 1}, {"name": "suite_longppl"}]}, "perplexity"),
])
def test_sequential_refusals(demo_recipe_copy, change, words):
    recipe = demo_recipe_copy(**{"eval__sequential": {"looks": 4}, **change})
    with pytest.raises(SuiteError) as e:
        load_recipe(recipe)
    assert words in str(e.value) and "sequential" in str(e.value)


def test_the_looks_and_seed_are_in_the_evaluation_key(demo_recipe_copy, tmp_path):
    from suite.plan.keys import cache_key

    versions = {"vllm": "x", "lm_eval": "y"}
    fixed = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "a").variants[0].evaluate
    keys = {cache_key(fixed, "m", versions)}
    assert cache_key(fixed.model_copy(update={"sequential": None}), "m", versions) in keys
    for looks, seed in ((4, 0), (4, 1), (3, 0)):
        plan = make_plan(load_recipe(demo_recipe_copy(eval__sequential={"looks": looks, "seed": seed})), tmp_path / "b")
        keys.add(cache_key(plan.variants[0].evaluate, "m", versions))
    assert len(keys) == 4
