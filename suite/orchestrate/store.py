"""One result store: a stage's result under its content key (the keys of suite.plan.keys), so that a job whose key
already holds a result is not run again.

``Store(root)``: ``lookup(stage, key)`` / ``put(stage, key, result)`` over ``<root>/<key>/<stage>.result.json`` and
the files the result names (copied beside it, the result rewritten to point at the copies), written to a temporary
folder and renamed, so a half-written entry is never used. The evaluation cache is the store at
``<output_dir>/eval-cache`` (suite.orchestrate.eval_cache: same layout as before, so its entries still hit).

A run folder holds one result per planned job (``variants/<name>/<stage>.result.json``): ``RunFolder(vdir)`` is
the same ``lookup`` / ``put`` over a variant's folder, the key recorded in the result (``KEY_FIELDS``). ``job_key(vp,
stage, done)`` is the key the plan gives a job once its prerequisites' results are known (kvcheck's, evaluate's and
benchmark's depend on the checkpoint's content and kvcheck's choices); a resume keeps a result only while it holds
that key (suite.orchestrate.rundir.kept_results before anything runs, the runner once the job is ready), and
keeps no result that records none. The stage process writes the key (with its job, ``records.base.JobStamp``) into
its result itself, so a result is never on disk without it.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from suite.plan import keys
from suite.records.base import JobStamp, Record
from suite.records.paths import run_folder_of
from suite.runtime import safeio
from suite.runtime.engine.compilecache import STORE_ENV
from suite.runtime.settings import Settings
from suite.stages import registry
from suite.stages.registry import STAGES



EVAL_CACHE = "eval-cache"  # the evaluation cache's folder in the store (compile-cache/ is vLLM's compile caches)


def store_root(loaded, out_root: Path) -> Path:
    """The run's store (its evaluation cache and compile caches): the ``SUITE_STORE`` setting, else the recipe's
    ``store:`` (relative to the recipe), else the output folder ``out_root`` (where eval-cache/ always was)."""
    if (setting := Settings().store) is not None:
        return Path(setting).expanduser().resolve()
    if getattr(loaded.recipe, "store", None):
        return loaded.resolve(loaded.recipe.store)
    return Path(out_root)


def eval_cache_dir(env: dict[str, str], out_root: Path) -> Path:
    """The evaluation cache of the run whose stages get ``env`` (the runner puts the store in it, ``STORE_ENV``)."""
    return Path(env.get(STORE_ENV) or out_root) / EVAL_CACHE


def result_file(stage: str) -> str:
    return f"{stage}.result.json"


class Store:
    """Results under their content keys, in ``root`` (one folder per key)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def lookup(self, stage: str, key: str) -> Record | None:
        """The result ``put`` under ``key``, marked a cache hit (where its record has that field); None: a miss, as is
        an entry whose result records another key than its folder's name (a folder copied or renamed by hand: what it
        holds was made under that other key; its job runs again and ``put`` replaces it)."""
        path = self.root / key / result_file(stage)
        if not path.is_file():
            return None
        result = STAGES[stage].result.read(path, root=self.root / key)  # its files' names are the entry's
        if not holds(result, key):
            return None
        return result.model_copy(update={"cache_hit": True}) if "cache_hit" in type(result).model_fields else result

    def put(self, stage: str, key: str, result: Record) -> Record:
        """Copy the result's files into the store under ``key`` and return the result pointing at the copies
        (two jobs storing one key at once: the first rename stands). The entry names its files relative to its
        own folder (suite.records.paths), so the store can be moved too."""
        final = self.root / key
        tmp = self.root / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        stored = copy_files(stage, result, tmp, final)
        if (field := next((f for f in KEY_FIELDS if f in type(result).model_fields), None)) is not None:
            stored = stored.model_copy(update={field: key})  # the entry records the key it is stored under
        stored.write(tmp / result_file(stage), root=final)
        shutil.rmtree(final, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:  # another job stored the same result a moment ago: theirs stands, ours goes
            shutil.rmtree(tmp, ignore_errors=True)
        return stored


class RunFolder:
    """A variant's folder of a run as a store: one result a stage (``variants/<name>/<stage>.result.json``), with the
    key it was made under recorded in it (``KEY_FIELDS``). ``lookup(stage, key)``: the result there when it was made
    under ``key`` (a result that records none matches, as does ``key`` None: not known yet); ``put`` records the key
    in the result and writes it there. A resume is the run's plan with each job looked up here first."""

    def __init__(self, vdir: Path, lock=None):
        self.vdir = Path(vdir)
        self.lock = lock  # the run's suite.runtime.lock.RunLock: ``put`` writes only while the run owns the folder

    def lookup(self, stage: str, key: str | None) -> Record | None:
        from suite.plan.results import read_result

        result = read_result(self.vdir, stage)[0]
        return result if result is not None and holds(result, key) else None

    def put(self, stage: str, key: str, result: Record) -> Record:
        """``result`` recorded under ``key`` (its key field and its job's) and written here."""
        field = next((f for f in KEY_FIELDS if f in type(result).model_fields), None)
        update = {field: key} if field is not None else {}
        if getattr(result, "job", None) is not None:
            update["job"] = result.job.model_copy(update={"key": key})
        result = result.model_copy(update=update)
        if self.lock is None or self.lock.owned():  # a run folder taken over by another run is not written
            result.write(self.vdir / result_file(stage), root=run_folder_of(self.vdir))
        return result

    def bind(self, stage: str, key: str | None, result: Record, config: Record | None = None) -> Record:
        """``result`` as this variant's job's (``records.base.JobStamp``: this folder's variant, ``stage``, ``key`` and
        the sha256 of its config file here, written first when ``config`` is given). A result its stage process
        stamped with this job and key is returned as it is (nothing written again); one it did not (an evaluation
        cache hit made by another job, a stage entry that writes no stamp) is stamped and written in one write."""
        path = self.vdir / f"{stage}.config.json"
        if config is not None and (self.lock is None or self.lock.owned()):
            config.write(path)
        if "job" not in type(result).model_fields:
            return result if key is None else self.put(stage, key, result)
        job = getattr(result, "job", None)
        if job is not None and job.variant == self.vdir.name and job.stage == stage and recorded_key(result) == key:
            return result
        sha = safeio.sha256(path, "record") if path.is_file() else ""
        stamped = result.model_copy(update={"job": JobStamp(variant=self.vdir.name, stage=stage, key=key,
                                                            config_sha256=sha)})
        if key is not None:
            return self.put(stage, key, stamped)
        if self.lock is None or self.lock.owned():
            stamped.write(self.vdir / result_file(stage))
        return stamped

    def file(self, stage: str, key: str, hit: Record) -> Record:
        """A result found in another store (``hit``: the evaluation cache's) filed as this variant's: its files
        copied into the stage's folder here, so that the run folder holds everything its verdict
        reads, and ``put`` under ``key`` pointing at them (a run folder taken over by another run: left alone, the
        hit as it is)."""
        if self.lock is not None and not self.lock.owned():
            return hit
        folder = self.vdir / STAGES[stage].output_dirs[0]
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return self.put(stage, key, copy_files(stage, hit, folder, folder))


def copy_files(stage: str, result: Record, into: Path, named: Path) -> Record:
    """``result`` with each file it names (the registry's ``result_files``) copied into folder ``into`` and named as
    the same file name in folder ``named`` (where ``into`` will be). A copy, not a hard link: a file edited in one
    place must not change the other (the gate checks each against its recorded sha256)."""

    def copy(path: str) -> str:
        src = Path(path)
        if src.is_file():
            shutil.copy2(src, into / src.name)
        return str(named / src.name)

    update = {}
    for name in STAGES[stage].result_files:
        value = getattr(result, name)
        update[name] = {k: copy(f) for k, f in value.items()} if isinstance(value, dict) else copy(value)
    return result.model_copy(update=update)


def in_run_folder(run_dir: Path, jobs) -> dict:
    """{(stage, variant): result} of the ``jobs`` ((stage, variant) pairs) that have a readable result in the run
    folder (each folder's ``lookup`` with no key yet: rundir.kept_results judges the keys)."""
    return {(stage, name): res for stage, name in jobs
            if (res := RunFolder(Path(run_dir) / "variants" / name).lookup(stage, None)) is not None}


def prerequisites_before(vp, stage: str) -> list[str]:
    """The prerequisite stages the variant planned as ``vp`` runs before ``stage`` (what they make or choose decides
    its config and key)."""
    order = registry.run_order()
    return [s for s in order[:order.index(stage)] if STAGES[s].prerequisite and vp.config(s) is not None]


def job_key(vp, stage: str, done=None, env: dict[str, str] | None = None) -> str | None:
    """The content key of ``stage``'s job of the variant planned as ``vp``, given what its earlier stages made
    (``done``: its ``VariantSummary``, or any object with their results as attributes): a checkpoint's is its
    config's ``key``; kvcheck's, evaluate's (and eval.engine_check's) and benchmark's hash their config (with what
    kvcheck chose passed on), the model's identity and their environment's versions (suite.plan.keys). None when the
    variant does not run ``stage``, or while a prerequisite stage it runs (its checkpoint, kvcheck's choices) has
    no result in ``done``. ``env``: the stages' environment (its VLLM_* switches are in the serve stages' keys)."""
    config = vp.config(stage)
    if config is None:
        return None
    spec = STAGES[stage]
    if spec.builds_checkpoint:
        return getattr(config, "key", None)
    earlier = prerequisites_before(vp, stage)
    if any(getattr(done, s, None) is None for s in earlier):
        return None  # known once they ran: the runner compares it then (runner.schedule)
    from suite.plan.planner import with_results

    config = with_results(vp, done).config(stage) if done is not None else config
    built = next((getattr(done, s) for s in earlier if STAGES[s].builds_checkpoint), None)
    key_of = spec.load_content_key()
    return key_of(config, keys.model_identity(vp.model_path, built), env) if key_of else None


# the field of a stage's result that records the key it was made under (evaluate's: the evaluation cache's key)
KEY_FIELDS = ("key", "cache_key")


def recorded_key(result: Record) -> str | None:
    """The key ``result`` records it was made under (None: it records none, an older result)."""
    return next((getattr(result, f) for f in KEY_FIELDS if getattr(result, f, None)), None)


def holds(result: Record, key: str | None) -> bool:
    """Whether ``result`` was made under ``key`` (any result matches a job whose key is not known yet, None; a result
    that records no key matches no known key: a resume runs its job again)."""
    made = recorded_key(result)
    return key is None or made == key
