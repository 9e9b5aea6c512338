"""Executors: where a run's stage jobs run. ``local`` (threads on this machine, one GPU set per job) and
``ray`` (a Ray task per job). Both take a job (``suite.plan.dag.Job``) and a ``JobCall`` (what to run,
picklable) and hand back its ``Finished`` record; the runner decides what is ready (its dependencies
done), the executor decides where and when it fits.
"""

from __future__ import annotations

from suite.orchestrate.executors.base import Executor, Finished, JobCall
from suite.recipe.executor import ExecutorSpec


def make_executor(spec: ExecutorSpec) -> Executor:
    """The executor a recipe's (or ``--executor``'s) ``executor`` section asks for."""
    if spec.kind == "ray":
        from suite.orchestrate.executors.ray import RayExecutor

        return RayExecutor(spec)
    from suite.orchestrate.executors.local import LocalExecutor

    return LocalExecutor(spec)


__all__ = ["Executor", "ExecutorSpec", "Finished", "JobCall", "make_executor"]
