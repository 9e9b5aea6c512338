"""What every executor shares: the job call it runs, the record of a finished job, the interface."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from suite.stages.registry import STAGES
from suite.orchestrate.jobs import run_job
from suite.orchestrate.stageproc import interpreter

if TYPE_CHECKING:
    from suite.orchestrate.stageproc import StageOutcome
    from suite.plan.dag import Job


@dataclass
class JobCall:
    """One stage job with everything it needs, picklable (a Ray task ships it to a worker): ``run`` adds
    the executor's environment (``CUDA_VISIBLE_DEVICES``) and calls ``suite.orchestrate.jobs.run_job``."""

    stage: str
    variant_plan: object  # suite.plan.planner.VariantPlan, with what earlier stages decided passed on
    done: dict  # its earlier stages' results by stage name, as they stood when the job was sent
    run_dir: Path
    out_root: Path
    env: dict[str, str]
    force: bool = False
    lock: object = None  # suite.runtime.lock.RunLock
    python: str | None = None  # the stage's interpreter, chosen here (SUITE_*_PYTHON are this process's)

    @classmethod
    def of_stage(cls, stage: str, *args, **kwargs) -> "JobCall":
        """The call of a ``stage`` job, with its stage's interpreter chosen here, in the parent (a Ray worker's
        SUITE_*_PYTHON may name other interpreters)."""
        return cls(stage, *args, **kwargs, python=interpreter(stage))

    def run(self, extra_env: dict[str, str]) -> "StageOutcome":
        return run_job(self.stage, self.variant_plan, self.done, self.run_dir, self.out_root,
                       {**self.env, **extra_env}, self.force, self.lock, self.python)

    def clean(self) -> None:
        """Remove what a job that did not finish left (its result, log and outputs), before it runs again."""
        vdir = self.run_dir / "variants" / self.variant_plan.variant.name
        for suffix in ("result.json", "log", "stacks.json"):
            (vdir / f"{self.stage}.{suffix}").unlink(missing_ok=True)
        # its outputs in the variant folder (the registry's output_dirs, read now: a stage registered late counts)
        for sub in (spec.output_dirs if (spec := STAGES.get(self.stage)) else ()):
            shutil.rmtree(vdir / sub, ignore_errors=True)


@dataclass
class Finished:
    """A job that ended: its outcome and where and when it ran (times are ``time.time()``)."""

    job: "Job"
    outcome: "StageOutcome"
    placement: str = ""  # e.g. "GPU 0 (0.25)", "node 10.0.0.2 GPU 1", "CPU"
    submitted: float = 0.0
    started: float = 0.0  # the job's own code began (in the worker, for Ray)
    ended: float = 0.0  # the job's own code returned
    received: float = field(default_factory=time.time)  # the runner had the outcome
    attempts: int = 1
    lost: list[str] = field(default_factory=list)  # why earlier attempts were lost (a worker died)

    @property
    def overhead_s(self) -> float:
        """The executor's own share: from submit to the job's start, and from its end to the runner."""
        return max(0.0, self.started - self.submitted) + max(0.0, self.received - self.ended)

    def as_dict(self, t0: float) -> dict:
        return {"id": self.job.id, "stage": self.job.stage, "variant": self.job.variant,
                "placement": self.placement, "submitted_s": round(self.submitted - t0, 3),
                "started_s": round(self.started - t0, 3), "ended_s": round(self.ended - t0, 3),
                "wall_s": round(self.ended - self.started, 3), "stage_wall_s": round(self.outcome.wall_s, 3),
                "overhead_s": round(self.overhead_s, 4), "attempts": self.attempts, "lost": self.lost,
                "state": "failed" if self.outcome.error else "ok", "error": self.outcome.error}


class Executor:
    """Runs jobs; ``submit`` returns False while a job does not fit yet (the runner offers it again after
    the next ``wait``), ``wait`` blocks until at least one running job ended."""

    kind = "?"
    startup_s = 0.0  # starting the executor itself (Ray's start-up), reported apart from the jobs

    def start(self) -> None:
        pass

    def never_fits(self, job: "Job") -> str | None:
        """Why ``job`` can never run here (it asks for more than there is), else None."""
        return None

    def order(self, ready: list["Job"]) -> list["Job"]:
        """The order in which the runner offers the jobs that are ready now: as the DAG lists them (a checkpoint's
        build first: the jobs waiting for it can then share the machine with the others)."""
        return ready

    def submit(self, job: "Job", call: JobCall) -> bool:
        raise NotImplementedError

    def running(self) -> list[tuple["Job", str]]:
        """(job, placement) of the jobs running now."""
        raise NotImplementedError

    def wait(self) -> list[Finished]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind

    def close(self) -> None:
        pass
