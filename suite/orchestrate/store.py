"""One result store: a stage's result under its content key (the keys of suite.plan.keys), so that a job whose key
already holds a result is not run again.

``Store(root)``: ``lookup(stage, key)`` / ``put(stage, key, result)`` over ``<root>/<key>/<stage>.result.json`` and
the files the result names (copied beside it, the result rewritten to point at the copies), written to a temporary
folder and renamed, so a half-written entry is never used. The evaluation cache is the store at
``<output_dir>/eval-cache`` (suite.orchestrate.eval_cache: same layout as before, so its entries still hit).

A run folder holds one result per planned job (``variants/<name>/<stage>.result.json``): ``in_run_folder`` reads
them, and ``job_key(vp, stage)`` / ``holds(result, key)`` say whether a kept result was made under the key the plan
gives its job now (suite.orchestrate.rundir.kept_results: a result whose key differs is set aside and its job runs
again). A stage whose config carries no content key (kvcheck, benchmark, and evaluate, whose key is computed when
its checkpoint is known: eval_cache) is checked by rundir's version and base-model checks instead.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from suite.records.base import Record
from suite.stages.registry import EVALUATE, STAGES

# the fields of a stage's result that name files the store keeps with it: a path, or {name: path}
FILE_FIELDS: dict[str, tuple[str, ...]] = {EVALUATE: ("results_file", "samples_files")}


def result_file(stage: str) -> str:
    return f"{stage}.result.json"


class Store:
    """Results under their content keys, in ``root`` (one folder per key)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def lookup(self, stage: str, key: str) -> Record | None:
        """The result ``put`` under ``key``, marked a cache hit (where its record has that field); None: a miss."""
        path = self.root / key / result_file(stage)
        if not path.is_file():
            return None
        result = STAGES[stage].result.read(path)
        return result.model_copy(update={"cache_hit": True}) if "cache_hit" in type(result).model_fields else result

    def put(self, stage: str, key: str, result: Record) -> Record:
        """Copy the result's files into the store under ``key`` and return the result pointing at the copies
        (two jobs storing one key at once: the first rename stands)."""
        final = self.root / key
        tmp = self.root / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)

        def copy(path: str) -> str:
            src = Path(path)
            if src.is_file():
                shutil.copy2(src, tmp / src.name)
            return str(final / src.name)

        update = {}
        for name in FILE_FIELDS.get(stage, ()):
            value = getattr(result, name)
            update[name] = {k: copy(f) for k, f in value.items()} if isinstance(value, dict) else copy(value)
        stored = result.model_copy(update=update)
        stored.write(tmp / result_file(stage))
        shutil.rmtree(final, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:  # another job stored the same result a moment ago: theirs stands, ours goes
            shutil.rmtree(tmp, ignore_errors=True)
        return stored


def in_run_folder(run_dir: Path, jobs) -> dict:
    """{(stage, variant): result} of the ``jobs`` ((stage, variant) pairs) that have a readable result in the run
    folder."""
    from suite.orchestrate.stageproc import read_result

    return {(stage, name): res for stage, name in jobs
            if (res := read_result(Path(run_dir) / "variants" / name, stage)[0]) is not None}


def job_key(vp, stage: str) -> str | None:
    """The content key the plan gives ``stage``'s job of the variant planned as ``vp`` (a checkpoint's: its config's
    ``key``), or None when its config carries none."""
    config = vp.config(stage)
    return getattr(config, "key", None) if config is not None else None


def holds(result: Record, key: str | None) -> bool:
    """Whether ``result`` was made under ``key`` (a result that records no key matches any)."""
    return key is None or getattr(result, "key", key) == key
