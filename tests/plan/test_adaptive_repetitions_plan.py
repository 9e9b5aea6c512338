"""throughput.adaptive_repetitions in the plan: which benchmark configs carry the design, the wait, the content key."""

from __future__ import annotations

from suite.plan.keys import benchmark_key
from suite.plan.planner import make_plan
from suite.recipe import load_recipe

VERSIONS = {"vllm": "x"}


def test_a_gated_variant_repeats_adaptively_against_the_baselines_result_and_waits_for_it(demo_recipe_copy, tmp_path):
    recipe = demo_recipe_copy(throughput__repetitions=5, gates__min_goodput_gain=1.1,
                              throughput__slo={"ttft_p99_ms": 5000})
    plan = make_plan(load_recipe(recipe), tmp_path / "run")
    base, fp8 = plan.variants
    assert base.benchmark.adaptive is None  # the baseline runs its fixed count, first
    a = fp8.benchmark.adaptive
    assert a.limits == {"output_tok_s": 0.25, "goodput_req_s": 1.1} and a.headline == "max"
    assert a.baseline_result == str(tmp_path / "run" / "variants" / "bf16" / "benchmark.result.json")
    jobs = {j.id: j for j in plan.dag}
    assert "benchmark:bf16" in jobs["benchmark:fp8-kv"].deps
    assert "benchmark:bf16" not in jobs["benchmark:bf16"].deps


def test_switched_off_ungated_or_two_repetitions_is_the_fixed_count_with_no_wait(demo_recipe_copy, tmp_path):
    for change in ({"throughput__repetitions": 3, "throughput__adaptive_repetitions": False},
                   {"throughput__repetitions": 3, "gates__min_throughput_gain": None},
                   {}):  # the demo's 2 repetitions: at least 2 leave nothing to decide
        plan = make_plan(load_recipe(demo_recipe_copy(**change)), tmp_path / "run")
        assert all(vp.benchmark.adaptive is None for vp in plan.variants), change
        assert not any(d.startswith("benchmark:") for j in plan.dag if j.stage == "benchmark" for d in j.deps)


def test_the_key_holds_the_design_not_the_baselines_path(demo_recipe_copy, tmp_path):
    fixed_plan = make_plan(load_recipe(demo_recipe_copy(throughput__repetitions=3,
                                                        throughput__adaptive_repetitions=False)), tmp_path / "a")
    fixed = fixed_plan.variants[1].benchmark
    adaptive = make_plan(load_recipe(demo_recipe_copy(throughput__repetitions=3)), tmp_path / "a").variants[1].benchmark
    moved = make_plan(load_recipe(demo_recipe_copy(throughput__repetitions=3)), tmp_path / "b").variants[1].benchmark
    stricter = make_plan(load_recipe(demo_recipe_copy(throughput__repetitions=3, gates__min_throughput_gain=0.5)),
                         tmp_path / "a").variants[1].benchmark
    key = lambda c: benchmark_key(c, "m", VERSIONS)  # noqa: E731
    assert key(fixed) == key(adaptive.model_copy(update={"adaptive": None}))  # a fixed count's key is as before
    assert key(adaptive) != key(fixed)  # the design is in the key
    assert key(adaptive) == key(moved)  # another run folder (the baseline's path) is the same design
    assert key(stricter) != key(adaptive)  # another limit decides other stops


def test_another_baseline_is_another_key_for_the_adaptive_variant(demo_recipe_copy, tmp_path):
    """The variant's stops depend on the baseline's repetitions: a baseline stated otherwise in the recipe (its engine
    arguments here) changes the variant's key; a fixed-count variant's key does not follow the baseline."""
    key = lambda change: benchmark_key(make_plan(load_recipe(demo_recipe_copy(**change)), tmp_path / "a")  # noqa: E731
                                       .variants[1].benchmark, "m", VERSIONS)
    assert key({"throughput__repetitions": 3}) != key({"throughput__repetitions": 3,
                                                       "baseline__engine_args": {"max_num_seqs": 8}})
    fixed = {"throughput__repetitions": 3, "throughput__adaptive_repetitions": False}
    assert key(fixed) == key({**fixed, "baseline__engine_args": {"max_num_seqs": 8}})
