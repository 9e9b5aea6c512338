"""`suite plan`'s engine-start count: each job's config says how many it starts, a stored evaluation none."""

from __future__ import annotations

from suite.plan.planner import make_plan
from suite.plan.starts import planned_starts, starts_line
from suite.recipe import load_recipe
from suite.stages.registry import BENCHMARK, EVALUATE, SERVED_CHECK


def test_the_demo_starts_one_engine_per_evaluation_and_one_server_per_benchmark(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    rows = planned_starts(plan)
    assert [(r["variant"], r["stage"], r["least"], r["most"]) for r in rows] == [
        ("bf16", EVALUATE, 1, 1), ("fp8-kv", EVALUATE, 1, 1), ("bf16", BENCHMARK, 1, 1), ("fp8-kv", BENCHMARK, 1, 1)]
    assert starts_line(rows).startswith("engine starts: 4 (bf16 evaluate 1, ")


def test_an_offline_ceiling_and_api_server_rounds_add_starts(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy(throughput__offline_ceiling=True,
                                                  throughput__max_api_server_count=4)), tmp_path / "run")
    serving = [r for r in planned_starts(plan) if r["stage"] == BENCHMARK]
    assert [(r["least"], r["most"]) for r in serving] == [(2, 4), (2, 4)]  # ceiling + server, + up to 2 (1 -> 2 -> 4)
    assert starts_line(planned_starts(plan)).startswith("engine starts: 6 to 10 ")


def test_a_stored_evaluation_starts_nothing_and_an_unknown_key_is_said(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    held = {"bf16": True, "fp8-kv": None}  # the baseline's in the store; the build's key waits for its checkpoint
    rows = planned_starts(plan, lambda stage, vp: held[vp.variant.name] if stage == EVALUATE else False)
    line = starts_line(rows)
    assert line.startswith("engine starts: 3 (bf16 evaluate reused from the store, fp8-kv evaluate 1, ")
    assert "1 evaluation(s) may still be reused from the store" in line


def test_a_served_evaluation_starts_no_engine_of_its_own_but_its_check_does(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy(eval__engine="served", eval__served_check_items=0)),
                     tmp_path / "run")
    assert all(r["stage"] == BENCHMARK for r in planned_starts(plan))
    plan = make_plan(load_recipe(demo_recipe_copy(eval__engine="served")), tmp_path / "run2")
    rows = planned_starts(plan)  # the served check: one in-process engine per variant, after its benchmark
    assert [(r["variant"], r["stage"], r["least"]) for r in rows] == [
        ("bf16", BENCHMARK, 1), ("fp8-kv", BENCHMARK, 1), ("bf16", SERVED_CHECK, 1), ("fp8-kv", SERVED_CHECK, 1)]
    held = planned_starts(plan, lambda stage, vp: stage == SERVED_CHECK)  # a configuration checked before
    assert starts_line(held).startswith("engine starts: 2 (bf16 benchmark 1, fp8-kv benchmark 1, bf16 "
                                        f"{SERVED_CHECK} reused from the store, fp8-kv {SERVED_CHECK} reused ")
