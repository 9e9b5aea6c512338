"""A checkpoint folder's completeness mark and content hash: shared by the quantize stage that writes the folder and
by the run's lookup that decides whether a checkpoint already there is the one a job would build."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from suite.records.quantize import QuantizeResult
from suite.runtime import safeio

COMPLETE_MARK = ".complete"  # written last, before the folder is renamed into place: a folder without it is partial
RESULT_FILE = "quantize_result.json"  # the result the quantize job wrote, kept in the folder it describes
NOT_CONTENT = {"provenance.json", RESULT_FILE, COMPLETE_MARK}  # they record when and how, not what


def is_complete(folder: Path) -> bool:
    return (Path(folder) / COMPLETE_MARK).is_file()


def content_sha256(folder: Path, digest: Callable[[Path], str] | None = None) -> str:
    """SHA-256 over the checkpoint's files (relative path and the sha256 of its bytes, in sorted order), leaving
    out the files that say when and how it was made: what a reader loads, so two builds that would serve the same
    weights hash the same. ``digest``: a file's sha256 (default: read it; the parent passes its per-machine cache)."""
    digest = digest or (lambda f: safeio.sha256(f, "weights"))
    total = hashlib.sha256()
    for f in sorted(p for p in safeio.walk_files(folder) if p.name not in NOT_CONTENT):
        total.update(f"{f.relative_to(folder).as_posix()}\0{digest(f)}\n".encode())
    return total.hexdigest()


def lookup(folder: Path, key: str, digest: Callable[[Path], str] | None = None) -> QuantizeResult | None:
    """The checkpoint in ``folder`` (its quantize result, marked a cache hit) when it is the one ``key`` names:
    complete, its result made under ``key``, and its files hashing to the content sha256 that result records (a
    folder rewritten since, or one whose result records no hash, is not found). The quantize stage and the run's
    lookup (suite.orchestrate.store.CheckpointStore) both ask this."""
    folder = Path(folder)
    if not is_complete(folder):
        return None
    try:
        result = QuantizeResult.read(folder / RESULT_FILE)
    except (OSError, ValueError):
        return None
    if result.key != key or not result.content_sha256 or content_sha256(folder, digest) != result.content_sha256:
        return None
    return result.model_copy(update={"checkpoint": str(folder), "cache_hit": True, "wall_s": 0.0,
                                     "calibration_s": 0.0, "job": None})


def set_aside(folder: Path) -> Path | None:
    """Remove a complete checkpoint folder that ``lookup`` does not find (renamed ``<name>.stale-PID-NS`` first, so
    that a build can take its place at once: a complete folder is never replaced where it is, and a reader that has
    its files open keeps them); the name it was moved to, or None when there was nothing to remove."""
    folder = Path(folder)
    if not is_complete(folder):
        return None
    aside = folder.with_name(f"{folder.name}.stale-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(folder, aside)
    except OSError:
        return None
    shutil.rmtree(aside, ignore_errors=True)
    return aside
