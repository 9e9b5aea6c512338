"""The stage registry: what each stage is (config and result types, environment, entry point), in one place.

A stage is a function ``run(Config) -> Result`` in a module of its own subpackage, run in a process of
its own by ``python -m suite.stages NAME CONFIG.json RESULT.json`` under the interpreter of its
environment ('quantize': llmcompressor; 'serve': vLLM and lm-eval). Nothing here imports a stage module:
the entry is a 'module:function' string, imported only inside the stage process. Each entry also names its
config builder, 'module:function' too, called by the planner (``suite.plan.planner``) once per variant with the
plan's context; it reads the recipe, so it lives above the stages (``suite/plan/configs.py`` for these). Adding a
stage is one subpackage and one ``StageSpec``: here, by ``register_stage`` or, from a package outside ``suite``, by an
entry point of the group ``suite.stages`` (``NAME = module:SPEC``; read in the stage process too, so ``python -m
suite.stages NAME`` finds it). ``STAGES`` is a ``suite.records.registry.Registry``; the planner and the DAG iterate
``run_order()`` and read the spec, naming no stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from suite.records.benchmark import BenchmarkConfig, BenchmarkResult
from suite.records.evaluate import EvaluateConfig, EvaluateResult
from suite.records.kvcheck import KVCheckConfig, KVCheckResult
from suite.records.quantize import QuantizeConfig, QuantizeResult, SensitivityConfig, SensitivityResult
from suite.records.base import Record
from suite.records.registry import STAGE_GROUP, Registry, resolve
from suite.runtime.envs import QUANTIZE_ENV, SERVE_ENV, Environment

# the stages' names: code outside suite/stages/ names a stage by these constants (tests/test_architecture.py)
QUANTIZE = "quantize"
KVCHECK = "kvcheck"
EVALUATE = "evaluate"
BENCHMARK = "benchmark"
SENSITIVITY = "sensitivity"
# eval.engine_check: evaluate's entry again under other engine arguments, one stage per configuration (a fixed
# number of slots, so that every name a job, result file, resume or executor reads is a registered stage)
MAX_ENGINE_CHECKS = 4
ENGINE_CHECKS: tuple[str, ...] = tuple(f"{EVALUATE}-check-{i}" for i in range(1, MAX_ENGINE_CHECKS + 1))
# eval.served_check_items: the first items of each task scored again by evaluate's in-process engine, after the
# benchmark's server (which scored them served) has stopped, compared item by item (suite.analysis.served_check)
SERVED_CHECK = f"{EVALUATE}-served-check"


@dataclass(frozen=True)
class StageSpec:
    """One stage: ``entry`` is 'module:function', called with ``config`` read from its JSON file."""

    name: str
    config: type[Record]
    result: type[Record]
    environment: Environment
    entry: str
    in_run: bool = True  # one of `suite run`'s jobs (False: started by its own command, e.g. `suite sensitivity`)
    # 'module:function' called once the result is written, after which the process ends with os._exit(0), without
    # the interpreter's teardown: on a GPU that teardown can abort an evaluate process (vLLM's engine threads,
    # 'terminate called without an active exception', exit -6) after its result was written. None: a normal exit.
    close: str | None = None
    # properties the planner, DAG, executors and recipe checks read instead of branching on a stage's name:
    builds_checkpoint: bool = False  # its job makes the variant's model folder (jobs on one folder wait for the first)
    prerequisite: bool = False  # the variant's later stages wait for it (a checkpoint, a choice they read)
    shares_gpu: bool = True  # executor.gpu_fraction may give its jobs part of a GPU (False: the GPU is its alone)
    output_dirs: tuple[str, ...] = ()  # folders it writes in the variant folder, removed before it runs again
    check_of: str | None = None  # eval.engine_check: a second run of that stage's entry under other engine arguments
    after: str | None = None  # its job waits for that stage's job of the same variant (e.g. its server stopped)
    # 'module:function' ``build(ctx, spec) -> config | None``: the stage's config for one variant (None: the variant
    # does not run it), from the planner's ``VariantContext`` (recipe, variant, served model and engine, the other
    # stages' configs). A stage that builds_checkpoint: its config's ``checkpoint_dir`` is the variant's model folder.
    config_builder: str | None = None
    colour: str = "#999999"  # its bars in timeline.png (written into jobs.json: outputs never import this module)
    # 'module:function' ``key(config, model_identity, env) -> str``: the content key its result is made under (the
    # result store's; env: the stages' environment). None: no key (a checkpoint stage's is its config's ``key``)
    content_key: str | None = None
    result_files: tuple[str, ...] = ()  # its result's fields naming files (a path or {name: path}) kept with it
    before: str | None = None  # run_order() puts it just before that stage (whose jobs then may wait for it)

    def load_entry(self):
        """The stage's function (imports its module: call this only inside the stage's own process)."""
        return resolve(self.entry)

    def load_close(self):
        """The stage's ``close`` function, or None (imports its module: only inside the stage's own process)."""
        return None if self.close is None else resolve(self.close)

    def load_content_key(self):
        """The stage's content-key function, or None (imports suite.plan.keys: the parent's business)."""
        return None if self.content_key is None else resolve(self.content_key)

    def load_config_builder(self):
        """The stage's config builder (imports its module: the planner's business, never a stage process's)."""
        if self.config_builder is None:
            raise LookupError(f"stage {self.name} names no config_builder: the planner cannot plan its jobs")
        return resolve(self.config_builder)


_BUILDERS = "suite.plan.configs"  # the built-in stages' config builders
_KEYS = "suite.plan.keys"  # and their content keys
_EVALUATION = {"content_key": f"{_KEYS}:evaluate_job_key",
               "result_files": ("results_file", "samples_files", "tokenizer_file")}
STAGES: Registry[StageSpec] = Registry("stage", STAGE_GROUP, base=StageSpec, name_of=lambda s: s.name)
for _spec in (
    StageSpec(QUANTIZE, QuantizeConfig, QuantizeResult, QUANTIZE_ENV, "suite.stages.quantize.stage:run",
              builds_checkpoint=True, prerequisite=True, config_builder=f"{_BUILDERS}:quantize", colour="#8c6bb1"),
    StageSpec(KVCHECK, KVCheckConfig, KVCheckResult, QUANTIZE_ENV, "suite.stages.kvcheck.stage:run",
              prerequisite=True, config_builder=f"{_BUILDERS}:kvcheck", colour="#41ab5d",
              content_key=f"{_KEYS}:kvcheck_job_key"),
    StageSpec(EVALUATE, EvaluateConfig, EvaluateResult, SERVE_ENV, "suite.stages.evaluate.stage:run",
              close="suite.stages.evaluate.stage:close", output_dirs=(EVALUATE,),
              config_builder=f"{_BUILDERS}:evaluate", colour="#2b8cbe", **_EVALUATION),
    *(StageSpec(name, EvaluateConfig, EvaluateResult, SERVE_ENV, "suite.stages.evaluate.stage:run",
                close="suite.stages.evaluate.stage:close", output_dirs=(name,), check_of=EVALUATE,
                config_builder=f"{_BUILDERS}:engine_check", **_EVALUATION)
      for name in ENGINE_CHECKS),
    StageSpec(BENCHMARK, BenchmarkConfig, BenchmarkResult, SERVE_ENV, "suite.stages.benchmark.stage:run",
              shares_gpu=False, output_dirs=(BENCHMARK,), config_builder=f"{_BUILDERS}:benchmark", colour="#e6550d",
              content_key=f"{_KEYS}:benchmark_job_key"),
    # after the benchmark: the in-process engine never holds the GPU beside the server, and as an evaluation of its
    # own it is keyed and kept in the evaluation cache, so one configuration pays for its check once
    StageSpec(SERVED_CHECK, EvaluateConfig, EvaluateResult, SERVE_ENV, "suite.stages.evaluate.stage:run",
              close="suite.stages.evaluate.stage:close", output_dirs=(SERVED_CHECK,), check_of=EVALUATE,
              after=BENCHMARK, config_builder=f"{_BUILDERS}:served_check",
              colour="#74a9cf", **_EVALUATION),
    StageSpec(SENSITIVITY, SensitivityConfig, SensitivityResult, QUANTIZE_ENV, "suite.stages.quantize.sensitivity:run",
              in_run=False),
):
    STAGES.register(_spec.name, _spec)


def run_order() -> tuple[str, ...]:
    """The order of a run's jobs: registration order (every quantize job first, so all checkpoints exist before any
    is served; then the KV-scale checks, where a variant's kv_skip_layers: auto is chosen; then evaluate, then
    benchmark), with a stage that names ``before`` moved just before that stage. Read at each call: a stage
    registered late (an entry point, ``register_stage``) counts."""
    order = [name for name, s in STAGES.items() if s.in_run]
    for name in [n for n in order if STAGES[n].before in order]:
        order.remove(name)
        order.insert(order.index(STAGES[name].before), name)
    return tuple(order)


def stage(name: str) -> StageSpec:
    return STAGES[name]


def register_stage(spec: StageSpec, before: str | None = None) -> StageSpec:
    """Add ``spec`` (a stage of the same name is replaced in place): last in ``run_order()``, or just before the
    stage ``before`` (a stage whose jobs must wait for it comes after it)."""
    return STAGES.register(spec.name, spec, before=before)


def unregister_stage(name: str) -> None:
    STAGES.unregister(name)
