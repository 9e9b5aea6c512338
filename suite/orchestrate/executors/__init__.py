"""Executors: where a run's stage jobs run. ``local`` (threads on this machine, one GPU set per job) and
``ray`` (a Ray task per job). Both take a job (``suite.plan.dag.Job``) and a ``JobCall`` (what to run,
picklable) and hand back its ``Finished`` record; the runner decides what is ready (its dependencies
done), the executor decides where and when it fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from suite.orchestrate.executors.base import Executor, Finished, JobCall
from suite.recipe.executor import ExecutorSpec
from suite.orchestrate.executors.local import LocalExecutor, machine_gpus
from suite.orchestrate.executors.ray import RayExecutor

if TYPE_CHECKING:
    from suite.plan.dag import Job


def make_executor(spec: ExecutorSpec) -> Executor:
    """The executor a recipe's (or ``--executor``'s) ``executor`` section asks for."""
    if spec.kind == "ray":
        return RayExecutor(spec)

    return LocalExecutor(spec)


def job_use(spec: ExecutorSpec) -> Callable[[Job], str]:
    """What a job will use on the executor ``spec`` asks for, as a queued job's line says it: a local executor on a
    machine without GPUs runs every job on the CPU, one at a time; otherwise what the job asks for (a Ray cluster's
    GPUs are known only once it is joined)."""
    if spec.kind != "ray":
        if not machine_gpus(spec):
            return lambda job: "CPU, one job at a time"
    return lambda job: job.resources.describe()


__all__ = ["Executor", "ExecutorSpec", "Finished", "JobCall", "job_use", "make_executor"]
