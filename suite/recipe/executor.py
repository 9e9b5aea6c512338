"""The recipe's ``executor`` section: where a run's jobs run (this machine, or a Ray cluster) and how much
of a GPU each job may take.

``local`` (the default) runs as many jobs at once as this machine has GPUs for, each pinned with
``CUDA_VISIBLE_DEVICES``, and one at a time on a machine without GPUs. ``ray`` makes each job a Ray
task asking for its GPUs, on a Ray instance started for the run or on an existing cluster
(``address``). ``gpu_fraction`` lets small models' jobs share a GPU: a stage given 0.25 runs beside three
others on one GPU, and its vLLM engine gets a matching ``gpu_memory_utilization`` (the fraction times
the recipe's own value, vLLM's 0.9 when it sets none). The benchmark never shares: serving speed measured
beside another engine is not the GPU's speed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from suite.recipe import guards
from suite.recipe.base import Strict, bad
from suite.stages.registry import STAGES

SHAREABLE_STAGES = tuple(name for name, s in STAGES.items() if s.in_run and s.shares_gpu and not s.check_of)


class ExecutorSpec(Strict):
    kind: Literal["local", "ray"] = Field("local", description="local: this machine; ray: Ray tasks")
    address: str | None = Field(
        None, description="ray: an existing cluster's address ('auto', 'ray://host:10001', 'host:6379'); "
        "absent: a Ray instance is started for the run and stopped after it")
    max_retries: int = Field(1, ge=0, le=5, description="a job whose worker was lost is run again this many times")
    gpus: list[int] | None = Field(
        None, description="the GPU indices jobs may use, on this machine (local) or in the Ray instance started "
        "for the run (ray without address); absent: every GPU this machine shows, CUDA_VISIBLE_DEVICES respected")
    gpu_fraction: dict[str, float] = Field(
        default_factory=dict, description="stage -> the share of one GPU each of its jobs takes "
        f"({', '.join(SHAREABLE_STAGES)}; absent: a whole GPU per tensor-parallel rank)")
    cpus_per_job: int = Field(1, ge=1, description="CPU cores each job asks for (Ray's num_cpus)")
    memory_gb: float = Field(0.0, ge=0, description="host memory each job asks for (Ray's memory; 0: not asked)")

    @field_validator("address")
    @classmethod
    def _no_credentials(cls, v: str | None) -> str | None:
        if v and (what := guards.uri_credential(v)):
            raise bad(f"the address holds {what}; recipes end up in MLflow and in logs",
                      "remove it and give the credential through the environment that runs `suite`")
        return v

    @field_validator("gpu_fraction")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for stage, f in v.items():
            if stage in STAGES and STAGES[stage].in_run and not STAGES[stage].shares_gpu:
                raise bad(f"executor.gpu_fraction.{stage}: the {stage} never shares a GPU (serving speed "
                          "measured beside another engine is not the GPU's speed)", "remove it")
            if stage not in SHAREABLE_STAGES:
                raise bad(f"executor.gpu_fraction.{stage}: no such stage", f"use one of {', '.join(SHAREABLE_STAGES)}")
            if not 0.05 <= f <= 1.0:
                raise bad(f"executor.gpu_fraction.{stage} = {f}: a share of one GPU is in [0.05, 1]",
                          "give e.g. 0.25 for four such jobs on one GPU")
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> "ExecutorSpec":
        if self.kind == "local" and self.address is not None:
            raise bad("executor.address is for kind: ray", "remove it, or set executor.kind: ray")
        if self.kind == "ray" and self.gpus is not None and self.address is not None:
            raise bad("executor.gpus with kind: ray is for the Ray instance started for the run (a cluster at "
                      "executor.address places jobs on its own GPUs)", "remove executor.gpus or executor.address")
        if self.gpus is not None and len(set(self.gpus)) != len(self.gpus):
            raise bad(f"executor.gpus repeats an index: {self.gpus}", "list each GPU once")
        return self
