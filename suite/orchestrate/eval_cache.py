"""The evaluation cache: a finished evaluation is copied to ``<output_dir>/eval-cache/<key>/`` and not made again.

The key (``suite.plan.keys.cache_key``, the evaluate stage's ``StageSpec.content_key``) hashes what decides the
scores. A finished evaluation is copied to
``<output_dir>/eval-cache/<key>/`` (results, every sample, the stage result with paths rewritten),
written to a temporary folder and renamed, so a half-written entry is never used. The cache holds a second copy,
never the only one: a hit is filed into the run folder (its files copied into the variant's stage folder, its result
written there naming them), so the run folder holds every file its verdict reads. ``suite run
--force`` recomputes (and refreshes the entry). The cache is the result store (suite.orchestrate.store) at
``<output_dir>/eval-cache``.
"""

from __future__ import annotations

from pathlib import Path

from suite.orchestrate.store import RunFolder, Store
from suite.records.evaluate import EvaluateResult
from suite.records.paths import run_folder_of
from suite.stages.registry import EVALUATE, STAGES

RESULT = "evaluate.result.json"  # an entry's result file (suite.orchestrate.store.result_file)


def lookup(cache_dir: Path, key: str) -> EvaluateResult | None:
    """The evaluation stored under ``key`` (marked a cache hit), or None."""
    return Store(cache_dir).lookup(EVALUATE, key)


def store(cache_dir: Path, key: str, result: EvaluateResult) -> EvaluateResult:
    """Copy the evaluation's files into the cache and return the result pointing at the copies."""
    return Store(cache_dir).put(EVALUATE, key, result)


def evaluate_cached(vp, vs, cache_dir: Path, vdir: Path, env: dict[str, str], force: bool, lock=None,
                    python: str | None = None, stage: str = EVALUATE):
    """The evaluate stage through the cache: reuse a finished evaluation of the same thing (``vp``: its
    ``VariantPlan``, ``vs``: its ``VariantSummary``); a ``stageproc.StageOutcome``."""
    from suite.orchestrate.stageproc import StageOutcome, run_stage
    from suite.plan.keys import model_identity

    # a checkpoint is named by what made it (its key); its content hash says what it holds: a rebuild that
    # differs (another machine, another GPU) is not the checkpoint the cached scores came from
    config = vp.config(stage)  # evaluate, or one of eval.engine_check's evaluate-check-<i>
    key = STAGES[stage].load_content_key()(config, model_identity(vp.model_path, vs.quantize), env)  # the store's key
    folder = RunFolder(vdir, lock)
    if not force and (hit := lookup(cache_dir, key)) is not None:  # filed into the run folder: its own copy
        if lock is None or lock.owned():  # what the filed result was made for, as a run writes it
            config.write(vdir / f"{stage}.config.json", root=run_folder_of(vdir))
        return StageOutcome(folder.bind(stage, key, folder.file(stage, key, hit)), None, 0.0)  # stamped as this job's
    outcome = run_stage(stage, config, vdir, env, lock, python, key)  # the stage records its key and job
    if outcome.result is not None:  # the run folder's result, bound to its job and key (a resume compares it)
        outcome = outcome._replace(result=folder.bind(stage, key, outcome.result))
        store(cache_dir, key, outcome.result)  # a second copy; the run folder's is the one its summary names
    return outcome
