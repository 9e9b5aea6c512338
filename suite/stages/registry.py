"""The stage registry: what each stage is (config and result types, environment, entry point), in one place.

A stage is a function ``run(Config) -> Result`` in a module of its own subpackage, run in a process of
its own by ``python -m suite.stages NAME CONFIG.json RESULT.json`` under the interpreter of its
environment ('quantize': llmcompressor; 'serve': vLLM and lm-eval). Nothing here imports a stage module:
the entry is a 'module:function' string, imported only inside the stage process. Adding a stage is one
``StageSpec`` here and one subpackage under ``suite/stages/``; the planner builds its config
(``Plan.jobs`` runs the stages of ``RUN_ORDER``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from suite.records.benchmark import BenchmarkConfig, BenchmarkResult
from suite.records.evaluate import EvaluateConfig, EvaluateResult
from suite.records.kvcheck import KVCheckConfig, KVCheckResult
from suite.records.quantize import QuantizeConfig, QuantizeResult, SensitivityConfig, SensitivityResult
from suite.records.base import Record

Environment = Literal["quantize", "serve"]
QUANTIZE_ENV: Environment = "quantize"  # llmcompressor
SERVE_ENV: Environment = "serve"        # vLLM and lm-eval

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

    def load_entry(self):
        """The stage's function (imports its module: call this only inside the stage's own process)."""
        import importlib

        module, _, func = self.entry.partition(":")
        return getattr(importlib.import_module(module), func)

    def load_close(self):
        """The stage's ``close`` function, or None (imports its module: only inside the stage's own process)."""
        import importlib

        if self.close is None:
            return None
        module, _, func = self.close.partition(":")
        return getattr(importlib.import_module(module), func)


STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec(QUANTIZE, QuantizeConfig, QuantizeResult, QUANTIZE_ENV, "suite.stages.quantize.stage:run",
              builds_checkpoint=True, prerequisite=True),
    StageSpec(KVCHECK, KVCheckConfig, KVCheckResult, QUANTIZE_ENV, "suite.stages.kvcheck.stage:run",
              prerequisite=True),
    StageSpec(EVALUATE, EvaluateConfig, EvaluateResult, SERVE_ENV, "suite.stages.evaluate.stage:run",
              close="suite.stages.evaluate.stage:close", output_dirs=("evaluate",)),
    *(StageSpec(name, EvaluateConfig, EvaluateResult, SERVE_ENV, "suite.stages.evaluate.stage:run",
                close="suite.stages.evaluate.stage:close", output_dirs=(name,), check_of=EVALUATE)
      for name in ENGINE_CHECKS),
    StageSpec(BENCHMARK, BenchmarkConfig, BenchmarkResult, SERVE_ENV, "suite.stages.benchmark.stage:run",
              shares_gpu=False, output_dirs=("benchmark",)),
    StageSpec(SENSITIVITY, SensitivityConfig, SensitivityResult, QUANTIZE_ENV, "suite.stages.quantize.sensitivity:run",
              in_run=False),
)}
# the order of a run's jobs: every quantize job first (all checkpoints exist before any is served), then the
# KV-scale checks (kvcheck: a variant's kv_skip_layers: auto is chosen there), then evaluate, then benchmark
RUN_ORDER: tuple[str, ...] = tuple(name for name, s in STAGES.items() if s.in_run)


def stage(name: str) -> StageSpec:
    return STAGES[name]
