"""The planner: a validated recipe -> the stage jobs of one run, in order, with their typed configs.

Nothing here runs a model, and nothing here names a stage: ``make_plan`` walks the registry's ``run_order()`` and asks
each stage's config builder (``StageSpec.config_builder``; the built-in ones are in ``suite.plan.configs``) for the
variant's config, giving it a ``VariantContext``: the recipe, the variant, the model it is served from (the base
model, an existing checkpoint, or the content-addressed checkpoint a stage of it builds: ``suite.plan.keys``) and the
other stages' configs. The runner executes the plan; ``suite plan`` prints it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from suite.recipe import LoadedRecipe, VariantSpec, kv
from suite.records.base import Record
from suite.records.evaluate import TaskRun
from suite.plan import dag
from suite.plan.dag import Job
from suite.plan.keys import quantizer_versions
from suite.recipe import checkpoint
from suite.recipe.executor import ExecutorSpec
from suite.stages import registry
from suite.stages.registry import BENCHMARK, EVALUATE, KVCHECK, QUANTIZE, STAGES
from suite.plan.configs import engine_args_as_vllm_takes_them


class _StageConfig:
    """``vp.evaluate`` and the like: a built-in stage's config in ``VariantPlan.configs`` by attribute (None: the
    variant does not run it), as callers have read and replaced them."""

    def __init__(self, stage: str):
        self.stage = stage

    def __get__(self, vp, owner=None):
        return self if vp is None else vp.configs.get(self.stage)

    def __set__(self, vp, cfg) -> None:
        if cfg is None:
            vp.configs.pop(self.stage, None)
        else:
            vp.configs[self.stage] = cfg


@dataclass
class VariantPlan:
    variant: VariantSpec
    is_baseline: bool
    model_path: str
    configs: dict[str, Record] = field(default_factory=dict)  # stage -> its config, for the stages the variant runs
    checkpoint: dict | None = None  # variants[].model: what its config.json says of its quantization (suite.recipe.checkpoint)
    # stage -> the configuration it scores, e.g. 'max_num_seqs=64' (eval.engine_check's evaluate-check-<i>)
    labels: dict[str, str] = field(default_factory=dict)
    quantize = _StageConfig(QUANTIZE)
    kvcheck = _StageConfig(KVCHECK)
    evaluate = _StageConfig(EVALUATE)
    benchmark = _StageConfig(BENCHMARK)

    def config(self, stage: str):
        """The config of ``stage`` for this variant (None: the variant does not run it)."""
        return self.configs.get(stage)

    def check_label(self, stage: str) -> str | None:
        """The engine-check configuration's label (e.g. 'max_num_seqs=64') that ``stage`` scores; None: not a check."""
        return self.labels.get(stage)


@dataclass
class Plan:
    run_dir: Path
    checkpoints_dir: Path
    variants: list[VariantPlan] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    dag: list[Job] = field(default_factory=list)  # suite.plan.dag: dependencies and resources, publish last

    def jobs(self) -> list[tuple[str, str]]:
        """(stage, variant) of every stage job, in a valid order (run_order(): quantize first, then kvcheck,
        evaluate, benchmark); ``dag`` has what each waits for and asks for."""
        return [(stage, v.variant.name) for stage in registry.run_order() for v in self.variants if v.config(stage)]

    @property
    def quantizes(self) -> bool:
        """Whether a variant builds its checkpoint (the run then records the quantize environment's versions)."""
        return any(v.config(QUANTIZE) is not None for v in self.variants)


@dataclass
class PlanContext:
    """What every variant's configs share, worked out once per plan."""
    loaded: LoadedRecipe
    run_dir: Path
    checkpoints_dir: Path
    base_model: str
    tasks: list[TaskRun]
    quantizer: dict | None  # the quantize environment's versions (asked only when a variant quantizes)
    kv_check: bool  # kv.kv_check_enabled
    eval_only_args: dict  # eval.engine_args, typed as vLLM takes them
    check_overrides: list[dict]  # eval.engine_check's configurations, typed likewise

    @classmethod
    def of(cls, loaded: LoadedRecipe, run_dir: Path, checkpoints_dir: Path | None) -> PlanContext:
        r = loaded.recipe
        tasks = [TaskRun(name=t.name, metric=t.metric,
                         num_fewshot=t.num_fewshot if t.num_fewshot is not None else r.eval.num_fewshot,
                         limit=t.limit if t.limit is not None else r.eval.limit) for t in r.eval.tasks]
        checkpoints_dir = checkpoints_dir or loaded.resolve(r.output_dir) / "checkpoints"
        quantizer = quantizer_versions() if any(v.quantization for v in r.variants) else None
        return cls(loaded, run_dir, checkpoints_dir, loaded.model_path(), tasks, quantizer, kv.kv_check_enabled(r),
                   engine_args_as_vllm_takes_them(r.eval.engine_args),
                   [engine_args_as_vllm_takes_them(c) for c in r.eval.engine_check_configs()])


@dataclass
class VariantContext:
    """What a config builder sees for one variant: ``plan`` (a PlanContext), the variant, and through ``config``
    the other stages' configs (each built once, on first asking)."""
    plan: PlanContext
    variant: VariantSpec
    is_baseline: bool
    labels: dict[str, str] = field(default_factory=dict)  # VariantPlan.labels, filled by the builders
    built: dict[str, Record | None] = field(default_factory=dict)
    building: set[str] = field(default_factory=set)  # the stages whose builders are running now
    memo: dict[str, object] = field(default_factory=dict)  # ``shared``'s values

    @property
    def loaded(self) -> LoadedRecipe:
        return self.plan.loaded

    @property
    def recipe(self):
        return self.plan.loaded.recipe

    @property
    def vdir(self) -> Path:
        """The variant's folder in the run folder (its stages' output_dirs are under it)."""
        return self.plan.run_dir / "variants" / self.variant.name

    def config(self, stage: str) -> Record | None:
        """``stage``'s config for this variant, from its registry entry's config builder."""
        if stage in self.building:
            raise RuntimeError(f"stage {stage}'s config builder needs its own config (a cycle between builders)")
        if stage not in self.built:
            self.building.add(stage)
            try:
                spec = STAGES[stage]
                self.built[stage] = spec.load_config_builder()(self, spec)
            finally:
                self.building.discard(stage)
        return self.built[stage]

    def shared(self, name: str, make):
        """A value several builders read (e.g. the variant's engine), made once."""
        if name not in self.memo:
            self.memo[name] = make()
        return self.memo[name]

    @cached_property
    def existing(self) -> tuple[str, dict] | None:
        """variants[].model: (path, what its config.json says), served as it is; None: no existing checkpoint."""
        return existing_checkpoint(self.loaded, self.variant) if self.variant.model is not None else None

    @property
    def checkpoint(self) -> dict | None:
        return self.existing[1] if self.existing else None

    @cached_property
    def model_path(self) -> str:
        """The folder or hub id the variant is served from: the checkpoint a stage of it builds (that config's
        checkpoint_dir), else its existing checkpoint, else the base model."""
        for stage in registry.run_order():
            if STAGES[stage].builds_checkpoint and (cfg := self.config(stage)) is not None:
                return cfg.checkpoint_dir
        return self.existing[0] if self.existing else self.plan.base_model


def make_plan(loaded: LoadedRecipe, run_dir: Path, checkpoints_dir: Path | None = None) -> Plan:
    r = loaded.recipe
    context = PlanContext.of(loaded, run_dir, checkpoints_dir)
    plan = Plan(run_dir=run_dir, checkpoints_dir=context.checkpoints_dir, env=dict(r.runtime.env))
    for variant in r.all_variants():
        ctx = VariantContext(context, variant, variant is r.baseline)
        configs = {stage: cfg for stage in registry.run_order() if (cfg := ctx.config(stage)) is not None}
        plan.variants.append(VariantPlan(variant, ctx.is_baseline, ctx.model_path, configs, ctx.checkpoint, ctx.labels))
    dag.share_gpus(plan, r.executor)
    plan.executor, plan.dag = r.executor, dag.build(plan, r.executor)
    return plan


def existing_checkpoint(loaded: LoadedRecipe, variant: VariantSpec) -> tuple[str, dict]:
    """(the path or hub id the engine is given, what its config.json says of its quantization) for a variant
    served from an existing checkpoint (``variants[].model``); `suite validate` has checked it can be read."""
    path = checkpoint.model_path(loaded, variant.model)
    try:
        info = checkpoint.describe(path, variant.model.revision)
    except (OSError, ValueError) as e:
        info = {"summary": f"config.json unreadable: {e}"}
    return path, {"model": path, "revision": variant.model.revision, **info}


def with_results(vp: VariantPlan, done: Mapping[str, Record]) -> VariantPlan:
    """The variant's plan with what its finished stages decided passed on to the later ones: the layers
    kvcheck chose for ``kv_skip_layers: auto`` and the scale option it chose for ``kv_scales: auto`` go into
    its evaluate and benchmark engine arguments (and so into their configs, the evaluation cache key and
    the summary). ``done``: the results of its stages that ran, by stage name (its ``VariantSummary``'s
    ``stages``)."""
    chk = done.get(KVCHECK)
    extra: dict = {}
    if chk is not None and chk.auto and vp.variant.kv_skip_layers == "auto":
        extra.update(kv.skip_layer_args(chk.skip_layers))
    if chk is not None and chk.kv_scales_auto and vp.variant.kv_scales == "auto":
        extra.update(kv.scale_args(chk.kv_scales))
    if not extra:
        return vp
    def keep(cfg):
        engine = cfg.engine.model_copy(update={"engine_args": {**cfg.engine.engine_args, **extra}})
        kept = cfg.model_copy(update={"engine": engine})
        if (served := getattr(cfg, EVALUATE, None)) is not None:  # eval.engine: served: the evaluation it carries
            kept = kept.model_copy(update={EVALUATE: keep(served)})
        return kept

    # every stage that starts an engine for the variant (evaluate, eval.engine_check's, benchmark)
    configs = {stage: keep(cfg) if hasattr(cfg, "engine") else cfg for stage, cfg in vp.configs.items()}
    return dataclasses.replace(vp, configs=configs)


