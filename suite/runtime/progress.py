"""Stage progress: a small count record a stage process keeps next to its result, for the parent to show.

A stage writes ``variants/<name>/<stage>.progress.json`` (``{"what", "done", "total", "time"}``), replaced
atomically and at most about once a second (the last count of a phase always). The stage entry
(``suite.stages.__main__``) names the file in ``SUITE_PROGRESS_FILE``; without it ``update`` does nothing, so
stage code calls it freely. The parent's reader is ``suite.orchestrate.progress``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from suite.runtime import atomic, safeio

ENV = "SUITE_PROGRESS_FILE"
MIN_INTERVAL_S = 1.0
_last: dict[str, float] = {}  # what -> when it was last written


def path_for(result_path: Path) -> Path:
    """``evaluate.result.json`` -> ``evaluate.progress.json`` beside it."""
    name = result_path.name
    stem = name[:-len("result.json")] if name.endswith("result.json") else name + "."
    return result_path.with_name(stem + "progress.json")


def update(what: str, done: int, total: int | None = None) -> None:
    """Say that ``done`` of ``total`` units of ``what`` (e.g. "lm-eval generate_until") are done. Never fails
    the stage: a file that cannot be written is skipped."""
    path = os.environ.get(ENV)
    if not path:
        return
    now = time.monotonic()
    final = total is not None and done >= total
    if not final and now - _last.get(what, float("-inf")) < MIN_INTERVAL_S:
        return
    _last[what] = now
    record = {"what": what, "done": int(done), "total": None if total is None else int(total), "time": time.time()}
    try:
        atomic.write(path, json.dumps(record))
    except OSError:
        pass


def read(path: Path) -> dict | None:
    """A progress record, or None when there is none or it does not parse."""
    try:
        record = safeio.read_json(path, "state")
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "what" in record and "done" in record else None
