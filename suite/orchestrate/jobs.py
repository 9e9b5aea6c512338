"""One job of a plan: its stage process (suite.orchestrate.stageproc) or, for evaluate, the evaluation cache."""

from __future__ import annotations

from pathlib import Path

from suite.stages.registry import EVALUATE, STAGES

# re-exported: callers import the stage process's names from here
from suite.orchestrate.stageproc import StageOutcome, failure_line, interpreter, read_result, run_stage  # noqa: F401


def run_job(stage: str, vp, vs, run_dir: Path, out_root: Path, env: dict[str, str], force: bool,
            lock=None, python: str | None = None) -> StageOutcome:
    """One job of a plan: ``stage`` of the variant planned as ``vp`` (a ``VariantPlan``; ``vs`` its
    ``VariantSummary``); evaluations go through the evaluation cache (``eval_cache.evaluate_cached``)."""
    from suite.plan.planner import with_results

    vp = with_results(vp, vs)  # e.g. the layers kvcheck chose for kv_skip_layers: auto, into later configs
    vdir = run_dir / "variants" / vp.variant.name
    if stage == EVALUATE or STAGES[stage].check_of == EVALUATE:  # eval.engine_check's jobs too
        from suite.orchestrate.eval_cache import evaluate_cached

        return evaluate_cached(vp, vs, out_root / "eval-cache", vdir, env, force, lock, python, stage)
    return run_stage(stage, vp.config(stage), vdir, env, lock, python)
