"""A run's jobs as a DAG with resources: what each job waits for and what it asks of the machine.

Dependencies: a variant's kvcheck, evaluate and benchmark wait for its quantize (and evaluate and
benchmark for its kvcheck, which may choose the layers they keep in BF16); a quantize job whose
checkpoint another variant's quantize job also makes waits for that one (it is then a cache hit, not a
second build of the same folder). A variant's evaluate under eval.sequential, and its benchmark under
throughput.adaptive_repetitions, wait for the baseline's (they read its result). The run's outputs (summary,
frontier, report, tracking) come after every job: the ``publish`` job, run by the runner itself.

Resources: GPUs = tensor x pipeline parallel size for the stages that start vLLM (quantize and kvcheck:
one), CPU cores and host memory from the recipe's ``executor`` section. A single-GPU job of a stage in
``executor.gpu_fraction`` asks for that share of a GPU, and its vLLM engine (evaluate) gets a matching
``gpu_memory_utilization`` and a KV cache of fixed size (``EngineConfig.gpu_share``, suite.runtime.engine.gpushare); multi-GPU jobs and the benchmark take whole GPUs, and the benchmark's are its
own (``exclusive``: nothing else runs on them while it measures).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.recipe.executor import ExecutorSpec
from suite.runtime.engine.parallel import parallel_size
from suite.stages.registry import EVALUATE, STAGES, run_order

VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's EngineArgs default
PUBLISH = "publish"


@dataclass(frozen=True)
class Resources:
    gpus: int = 1  # how many GPUs (tensor x pipeline parallel); 0: none
    gpu_share: float = 1.0  # of each of them (< 1 only when gpus == 1: jobs sharing one GPU)
    exclusive: bool = False  # no other job on its GPUs while it runs (the benchmark)
    cpus: int = 1
    memory_gb: float = 0.0

    @property
    def gpu_total(self) -> float:
        """GPUs as Ray counts them (num_gpus): 0.25 for a quarter of one, 2 for two whole ones."""
        return self.gpus * self.gpu_share

    def describe(self) -> str:
        gpu = ("no GPU" if not self.gpus else f"{self.gpu_share:g} GPU" if self.gpu_share < 1
               else f"{self.gpus} GPU" + ("s" if self.gpus > 1 else ""))
        parts = [gpu + (" (exclusive)" if self.exclusive else ""), f"{self.cpus} CPU"]
        if self.memory_gb:
            parts.append(f"{self.memory_gb:g} GB")
        return ", ".join(parts)


@dataclass(frozen=True)
class Job:
    stage: str
    variant: str  # "*" for the run-wide publish job
    deps: tuple[str, ...] = ()
    resources: Resources = field(default_factory=Resources)

    @property
    def id(self) -> str:
        return f"{self.stage}:{self.variant}"

    def as_dict(self) -> dict:
        r = self.resources
        return {"id": self.id, "stage": self.stage, "variant": self.variant, "deps": list(self.deps),
                "resources": {"gpus": r.gpus, "gpu_share": r.gpu_share, "exclusive": r.exclusive, "cpus": r.cpus,
                              "memory_gb": r.memory_gb}}


def resources(stage: str, config, executor: ExecutorSpec) -> Resources:
    gpus = parallel_size(config.engine.engine_args) if hasattr(config, "engine") else 1
    share = executor.gpu_fraction.get(STAGES[stage].check_of or stage, 1.0) if gpus == 1 else 1.0  # a check: as evaluate
    return Resources(gpus=gpus, gpu_share=share, exclusive=not STAGES[stage].shares_gpu, cpus=executor.cpus_per_job,
                     memory_gb=executor.memory_gb)


def share_gpus(plan, executor: ExecutorSpec) -> None:
    """Give each evaluation engine that shares a GPU the matching ``gpu_memory_utilization``: its share
    times the recipe's own value (vLLM's 0.9 when the recipe sets none), so that the engines on one GPU
    fit in it together. Changes the plan's configs in place."""
    share = executor.gpu_fraction.get(EVALUATE)
    if not share or share >= 1.0:
        return
    def shared(cfg):
        if cfg is None or parallel_size(cfg.engine.engine_args) > 1:
            return cfg
        own = float(cfg.engine.engine_args.get("gpu_memory_utilization", VLLM_DEFAULT_GPU_MEMORY_UTILIZATION))
        args = {**cfg.engine.engine_args, "gpu_memory_utilization": round(own * share, 4)}
        engine = cfg.engine.model_copy(update={"engine_args": args, "gpu_share": share})
        return cfg.model_copy(update={"engine": engine})

    for vp in plan.variants:  # evaluate's jobs, and eval.engine_check's as evaluate's
        vp.configs.update({stage: shared(cfg) for stage, cfg in vp.configs.items()
                           if (STAGES[stage].check_of or stage) == EVALUATE})


def build(plan, executor: ExecutorSpec) -> list[Job]:
    """The plan's jobs in a valid order (stage by stage, as the registry's run_order() lists them), each with
    what it waits for and the resources it asks for; the publish job last."""
    order = run_order()
    jobs: list[Job] = []
    first_builder: dict[str, str] = {}  # checkpoint folder -> the quantize job that makes it
    for stage in order:
        for vp in plan.variants:
            cfg = vp.config(stage)
            if cfg is None:
                continue
            name = vp.variant.name
            deps: list[str] = []
            if STAGES[stage].builds_checkpoint:
                if (other := first_builder.setdefault(vp.model_path, f"{stage}:{name}")) != f"{stage}:{name}":
                    deps.append(other)
            else:
                deps += [f"{s}:{name}" for s in order if STAGES[s].prerequisite and s != stage
                         and vp.config(s) is not None
                         and order.index(s) < order.index(stage)]
            if (after := STAGES[stage].after) is not None and vp.config(after) is not None:
                deps.append(f"{after}:{name}")
            # eval.sequential: its baseline's looks; throughput.adaptive_repetitions: its baseline's repetitions
            if any(getattr(getattr(cfg, f, None), "baseline_result", None) for f in ("sequential", "adaptive")):
                deps.append(f"{stage}:{next(b.variant.name for b in plan.variants if b.is_baseline)}")
            jobs.append(Job(stage, name, tuple(deps), resources(stage, cfg, executor)))
    jobs.append(Job(PUBLISH, "*", tuple(j.id for j in jobs), Resources(gpus=0, cpus=1)))
    return jobs


def check(jobs: list[Job]) -> None:
    """Every dependency names an earlier job (so the list is a topological order and has no cycle)."""
    seen: set[str] = set()
    for j in jobs:
        missing = [d for d in j.deps if d not in seen]
        if missing:
            raise ValueError(f"job {j.id} waits for {', '.join(missing)}, which is not an earlier job")
        seen.add(j.id)
