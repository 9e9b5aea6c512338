"""The evaluate stage's config and result (pydantic only), defined in suite.stages.records and named here.

They live in the common records module because a variant with ``eval.engine: served`` is scored inside
its benchmark stage, whose config and result carry them (the stage subpackages import no one another).
"""

from __future__ import annotations

from suite.stages.records import EngineStart, EvaluateConfig, EvaluateResult, TaskRun, TaskScore

__all__ = ["EngineStart", "EvaluateConfig", "EvaluateResult", "TaskRun", "TaskScore"]
