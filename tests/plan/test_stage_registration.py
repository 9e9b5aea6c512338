"""A new stage touches its subpackage and its registry entry only: a stage registered from here (a StageSpec naming
its config builder and entry, both in this module) is planned, ordered in the DAG after what it waits for and
written to plan.json, with nothing in suite/ edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.plan import dag
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.records.base import Record
from suite.stages import registry
from suite.stages.registry import EVALUATE, QUANTIZE, SERVE_ENV, StageSpec, register_stage, unregister_stage

TOY = "toycheck"


class ToyConfig(Record):
    model: str
    output_dir: str


class ToyResult(Record):
    files: int


def run_toy(cfg: ToyConfig) -> ToyResult:
    """The toy stage: counts the files of the checkpoint it is given."""
    return ToyResult(files=sum(1 for f in Path(cfg.model).iterdir() if f.is_file()))


def build_toy(ctx, spec: StageSpec) -> ToyConfig | None:
    """Its config builder: only a variant with a checkpoint of its own to look at, in its own folder."""
    if ctx.config(QUANTIZE) is None:
        return None
    return ToyConfig(model=ctx.model_path, output_dir=str(ctx.vdir / spec.output_dirs[0]))


def toy(**over) -> StageSpec:
    fields = {"config_builder": f"{__name__}:build_toy", "output_dirs": (TOY,), **over}
    return StageSpec(TOY, ToyConfig, ToyResult, SERVE_ENV, f"{__name__}:run_toy", **fields)


@pytest.fixture
def registered():
    before = registry.run_order()
    yield register_stage
    unregister_stage(TOY)
    assert registry.run_order() == before and TOY not in registry.STAGES


def test_a_registered_stage_is_planned_after_its_dependency(registered, demo_recipe_copy, tmp_path):
    from suite.orchestrate.rundir import plan_json

    registered(toy())
    assert registry.run_order()[-1] == TOY
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    assert plan.jobs()[-1] == (TOY, "fp8-kv") and (TOY, "bf16") not in plan.jobs()  # bf16 builds no checkpoint
    base, fp8 = plan.variants
    assert base.config(TOY) is None
    assert fp8.config(TOY) == ToyConfig(model=fp8.model_path,
                                        output_dir=str(tmp_path / "run" / "variants" / "fp8-kv" / TOY))
    assert fp8.model_path == fp8.quantize.checkpoint_dir
    jobs = [j.id for j in plan.dag]
    dag.check(plan.dag)  # every dependency an earlier job
    toy_job = next(j for j in plan.dag if j.stage == TOY)
    assert toy_job.deps == (f"{QUANTIZE}:fp8-kv",) and jobs.index(toy_job.id) > jobs.index(f"{QUANTIZE}:fp8-kv")
    assert toy_job.id in plan.dag[-1].deps  # the publish job waits for it too
    assert json.loads(plan_json(plan))["variants"]["fp8-kv"][TOY]["model"] == fp8.model_path
    # its entry is this module's function, found as the stage process would find it
    cfg = fp8.config(TOY).model_copy(update={"model": str(Path(load_recipe(demo_recipe_copy()).model_path()))})
    assert registry.stage(TOY).load_entry()(cfg).files > 0


def test_a_stage_registered_before_another_is_waited_for(registered, demo_recipe_copy, tmp_path):
    registered(toy(prerequisite=True), before=EVALUATE)
    order = registry.run_order()
    assert order.index(QUANTIZE) < order.index(TOY) == order.index(EVALUATE) - 1
    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    deps = {j.id: j.deps for j in plan.dag}
    assert deps[f"{TOY}:fp8-kv"] == (f"{QUANTIZE}:fp8-kv",)
    assert deps[f"{EVALUATE}:fp8-kv"] == (f"{QUANTIZE}:fp8-kv", f"{TOY}:fp8-kv")  # a prerequisite: evaluate waits
    assert deps[f"{EVALUATE}:bf16"] == ()  # no toy job for bf16, nothing to wait for


def test_a_builder_that_needs_its_own_config_is_refused(registered, demo_recipe_copy, tmp_path):
    registered(toy(config_builder=f"{__name__}:build_circular"))
    with pytest.raises(RuntimeError, match=f"stage {TOY}'s config builder needs its own config"):
        make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")


def build_circular(ctx, spec: StageSpec):
    return ctx.config(spec.name)


def test_every_stage_of_a_run_names_a_config_builder_that_exists():
    for name in registry.run_order():
        assert callable(registry.stage(name).load_config_builder()), name
    with pytest.raises(LookupError, match="names no config_builder"):
        registry.stage(registry.SENSITIVITY).load_config_builder()  # started by its own command, not planned
