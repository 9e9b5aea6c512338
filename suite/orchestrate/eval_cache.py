"""The evaluation cache: a finished evaluation is copied to ``<output_dir>/eval-cache/<key>/`` and not made again.

The key (``suite.plan.keys.cache_key``) hashes what decides the scores. A finished evaluation is copied to
``<output_dir>/eval-cache/<key>/`` (results, every sample, the stage result with paths rewritten),
written to a temporary folder and renamed, so a half-written entry is never used. ``suite run
--force`` recomputes (and refreshes the entry).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from suite.plan.keys import cache_key
from suite.records.evaluate import EvaluateResult
from suite.stages.registry import EVALUATE

RESULT = "evaluate.result.json"


def lookup(cache_dir: Path, key: str) -> EvaluateResult | None:
    path = cache_dir / key / RESULT
    if not path.is_file():
        return None
    result = EvaluateResult.read(path)
    return result.model_copy(update={"cache_hit": True})


def store(cache_dir: Path, key: str, result: EvaluateResult) -> EvaluateResult:
    """Copy the evaluation's files into the cache and return the result pointing at the copies."""
    final = cache_dir / key
    tmp = cache_dir / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"  # two jobs may store one key at once
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    def copy(path: str) -> str:
        src = Path(path)
        dst = tmp / src.name
        if src.is_file():
            shutil.copy2(src, dst)
        return str(final / src.name)

    cached = result.model_copy(update={
        "results_file": copy(result.results_file),
        "samples_files": {t: copy(f) for t, f in result.samples_files.items()},
    })
    cached.write(tmp / RESULT)
    shutil.rmtree(final, ignore_errors=True)
    try:
        tmp.rename(final)
    except OSError:  # another job stored the same evaluation a moment ago: theirs stands, ours goes
        shutil.rmtree(tmp, ignore_errors=True)
    return cached


def evaluate_cached(vp, vs, cache_dir: Path, vdir: Path, env: dict[str, str], force: bool, lock=None,
                    python: str | None = None, stage: str = EVALUATE):
    """The evaluate stage through the cache: reuse a finished evaluation of the same thing (``vp``: its
    ``VariantPlan``, ``vs``: its ``VariantSummary``); a ``stageproc.StageOutcome``."""
    from suite.orchestrate.stageproc import StageOutcome, run_stage
    from suite.plan.keys import weights_fingerprint

    # a checkpoint is named by what made it (its key); its content hash says what it holds: a rebuild that
    # differs (another machine, another GPU) is not the checkpoint the cached scores came from
    identity = ((vs.quantize.key + (f":{vs.quantize.content_sha256}" if vs.quantize.content_sha256 else ""))
                if vs.quantize else weights_fingerprint(vp.model_path))
    config = vp.config(stage)  # evaluate, or one of eval.engine_check's evaluate-check-<i>
    key = cache_key(config, identity, env=env)
    if not force and (hit := lookup(cache_dir, key)) is not None:
        return StageOutcome(hit, None, 0.0)
    outcome = run_stage(stage, config, vdir, env, lock, python)
    if outcome.result is not None:
        outcome = outcome._replace(result=store(cache_dir, key, outcome.result.model_copy(update={"cache_key": key})))
    return outcome
