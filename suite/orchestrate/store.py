"""One result store, one lookup: a job whose content key (suite.plan.keys) has a result in the store is a hit and does
not run; anything else runs, and its result records its key (``records.base.JobStamp``, written by the stage process).

A hit is, for a job whose key is known (its prerequisites' results in hand):
- the run folder's own result (``RunFolder``: ``variants/<name>/<stage>.result.json``) when it records that key and,
  for the serve environment's stages, the versions of ``keys.KEY_PACKAGES`` that environment has now (a result that
  says it was made on another vLLM is not a hit, whatever key it records), and, for a checkpoint, when the checkpoint
  folder is there, complete, and its files hash to the content sha256 the result records; else
- the store shared between runs, for the stages that have one (``shared_store``): the evaluation cache
  (``Store(<store>/eval-cache)``, one folder per key; skipped under ``--force``) and the checkpoints (a checkpoint
  folder, named by its key, is the entry: ``CheckpointStore``, the same check as the quantize stage's own,
  ``runtime.ckptfiles.lookup``). Such a hit is filed into the run folder as this job's (its files copied beside it),
  so the run folder holds everything its verdict reads.
A result that records no key is never a hit. What each earlier reconciliation pass of a resume guarded is in the key
or in this check: the base model's content and the serve environment's versions are in the evaluate and benchmark
keys, the checkpoint's content sha256 is the model's identity in every key after it (a rebuild byte for byte the
same keeps their results; one that differs redoes them), and the batch limits an evaluation ran with are in its
key (an older run's evaluations planned with other limits are redone, so every variant's scores pair).
``lookup`` judges without writing (a resume's look before anything runs uses it); ``find`` is the job loop's: a
run-folder result that misses is renamed ``<stage>.result.<why>.json`` and a shared hit is filed.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import NamedTuple

from suite.orchestrate import store_seal
from suite.plan import keys
from suite.plan.results import read_result
from suite.records.base import JobStamp, Record
from suite.records.paths import run_folder_of
from suite.runtime import ckptfiles, envs, safeio
from suite.runtime.engine.compilecache import STORE_ENV
from suite.runtime.settings import Settings
from suite.stages import registry
from suite.stages.registry import EVALUATE, STAGES
from suite.plan.planner import with_results



EVAL_CACHE = "eval-cache"  # the evaluation cache's folder in the store (compile-cache/ is vLLM's compile caches)


def store_root(loaded, out_root: Path) -> Path:
    """The run's store (its evaluation cache and compile caches): the ``SUITE_STORE`` setting, else the recipe's
    ``store:`` (relative to the recipe), else the output folder ``out_root`` (where eval-cache/ always was)."""
    if (setting := Settings().store) is not None:
        return Path(setting).expanduser().resolve()
    if getattr(loaded.recipe, "store", None):
        return loaded.resolve(loaded.recipe.store)
    return Path(out_root)


def run_env(loaded, plan, out_root: Path) -> dict[str, str]:
    """What a run's stage processes get: the stage environment of the plan (``envs.stage_env``) with the run's store
    (``STORE_ENV``: the evaluation cache and the engines' compile caches)."""
    return envs.stage_env(plan.env) | {STORE_ENV: str(store_root(loaded, out_root))}


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
        holds was made under that other key; its job runs again and ``put`` replaces it) or other versions than the
        environment has now (``other_versions``)."""
        path = self.root / key / result_file(stage)
        if not path.is_file():
            return None
        if store_seal.refusal(self.root / key, stage, key) is not None:  # with SUITE_MANIFEST_KEY: sealed, or not used
            return None
        result = STAGES[stage].result.read(path, root=self.root / key)  # its files' names are the entry's
        if not holds(result, key) or other_versions(stage, result):  # as a run folder's result is judged
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
        store_seal.seal(tmp, stage, key)  # with SUITE_MANIFEST_KEY: what lookup checks before reuse
        shutil.rmtree(final, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:  # another job stored the same result a moment ago: theirs stands, ours goes
            shutil.rmtree(tmp, ignore_errors=True)
        return stored


class RunFolder:
    """A variant's folder of a run as a store: one result a stage (``variants/<name>/<stage>.result.json``), with the
    key it was made under recorded in it (``KEY_FIELDS``). ``lookup``: the result there when it is a hit for the job
    (the module's docstring); ``put`` records the key in the result and writes it there."""

    def __init__(self, vdir: Path, lock=None):
        self.vdir = Path(vdir)
        self.lock = lock  # the run's suite.runtime.lock.RunLock: ``put`` writes only while the run owns the folder

    def result(self, stage: str) -> Record | None:
        """The result in the folder, whatever key it records (None: none, or one that does not read)."""
        return read_result(self.vdir, stage)[0]

    def lookup(self, stage: str, key: str | None, shared=None) -> Record | None:
        """The folder's result when it is a hit for ``stage``'s job under ``key`` (``shared``: the job's shared store,
        where a checkpoint's folder is checked); None: a miss."""
        result = self.result(stage)
        return result if result is not None and miss_reason(stage, result, key, shared)[0] is None else None

    def set_aside(self, stage: str, tag: str) -> None:
        """Rename the stage's result ``<stage>.result.<tag>.json`` (a result that is not its job's now: a resume
        interrupted before the job runs again must not file it as the job's either)."""
        res = self.vdir / result_file(stage)
        if res.is_file() and (self.lock is None or self.lock.owned()):
            res.rename(res.with_name(f"{stage}.result.{tag}.json"))

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

    def file(self, stage: str, key: str, hit: Record, config: Record) -> Record:
        """A result found in a shared store (``hit``) filed as this variant's job's, made for ``config``: the config
        written, the files it names copied into the stage's folder here (so that the run folder holds everything its
        verdict reads), and the result stamped as this job's under ``key``, pointing at them (a run folder taken
        over by another run: left alone, the hit as it is)."""
        if self.lock is not None and not self.lock.owned():
            return hit
        config.write(self.vdir / f"{stage}.config.json", root=run_folder_of(self.vdir))
        if STAGES[stage].result_files:  # a checkpoint's result names no file: its folder is the store's entry
            folder = self.vdir / STAGES[stage].output_dirs[0]
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            hit = copy_files(stage, hit, folder, folder)
        if "job" in type(hit).model_fields:  # the job that made the entry is not this one: stamped anew, written once
            hit = hit.model_copy(update={"job": None})
        return self.bind(stage, key, hit)


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
        if value is not None:  # an optional file (tokenizer_file) the result names none of
            update[name] = {k: copy(f) for k, f in value.items()} if isinstance(value, dict) else copy(value)
    return result.model_copy(update=update)


def prerequisites_before(vp, stage: str) -> list[str]:
    """The prerequisite stages the variant planned as ``vp`` runs before ``stage`` (what they make or choose decides
    its config and key)."""
    order = registry.run_order()
    return [s for s in order[:order.index(stage)] if STAGES[s].prerequisite and vp.config(s) is not None]


def job_key(vp, stage: str, done: Mapping[str, Record] | None = None, env: dict[str, str] | None = None) -> str | None:
    """The content key of ``stage``'s job of the variant planned as ``vp``, given what its earlier stages made
    (``done``: their results by stage name, as a ``VariantSummary``'s ``stages``): a checkpoint's is its
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
    if any((done or {}).get(s) is None for s in earlier):
        return None  # known once they ran: the runner compares it then (runner.schedule)

    config = with_results(vp, done).config(stage) if done is not None else config
    built = next((done[s] for s in earlier if STAGES[s].builds_checkpoint), None)
    key_of = spec.load_content_key()
    return key_of(config, keys.model_identity(vp.model_path, built), env) if key_of else None


# the field of a stage's result that records the key it was made under (evaluate's: the evaluation cache's key)
KEY_FIELDS = ("key", "cache_key")


def recorded_key(result: Record) -> str | None:
    """The key ``result`` records it was made under (None: it records none, an older result)."""
    return next((getattr(result, f) for f in KEY_FIELDS if getattr(result, f, None)), None)


def holds(result: Record, key: str | None) -> bool:
    """Whether ``result`` was made under ``key`` (a result that records no key, or a job whose key is not known, None:
    not)."""
    made = recorded_key(result)
    return made is not None and made == key


class CheckpointStore:
    """The checkpoints as a store: a checkpoint job's entry is its checkpoint folder (``checkpoint_dir``, named by its
    key), found by the same check as the quantize stage's own (``runtime.ckptfiles.lookup``), its files hashed
    through the per-machine hash cache (``keys.hash_cache``: read once). ``put``: the stage wrote it there itself."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def lookup(self, stage: str, key: str) -> Record | None:
        hashes = keys.hash_cache()
        try:
            return ckptfiles.lookup(self.folder, key, hashes.sha256)
        finally:
            hashes.save()

    def put(self, stage: str, key: str, result: Record) -> Record:
        return result


def shared_store(stage: str, config, env: dict[str, str], out_root: Path) -> Store | CheckpointStore | None:
    """The store shared between runs that ``stage``'s jobs are looked up in and put into: a checkpoint's folder, the
    evaluation cache for the evaluations (eval.engine_check's too); None for the other stages."""
    if STAGES[stage].builds_checkpoint:
        return CheckpointStore(config.checkpoint_dir)
    if (STAGES[stage].check_of or stage) == EVALUATE:
        return Store(eval_cache_dir(env, out_root))
    return None


def other_versions(stage: str, result: Record) -> str:
    """What differs between the versions of ``keys.KEY_PACKAGES`` a serve-environment stage's result records and
    those the environment has now ('vllm 0.31 -> 0.32, ...'); '' when none differs or the result records none."""
    recorded = getattr(result, "versions", None)
    if STAGES[stage].environment != "serve" or not recorded:
        return ""
    now = envs.serve_versions()
    return ", ".join(f"{p} {recorded.get(p)} -> {now.get(p)}" for p in keys.KEY_PACKAGES
                     if recorded.get(p) != now.get(p))


def miss_reason(stage: str, result: Record, key: str | None, shared=None) -> tuple[str | None, str]:
    """(None, '') when the run folder's ``result`` is a hit for ``stage``'s job under ``key`` (the module's
    docstring); else (why, as it follows '<variant>: its <stage> result', the tag its file is set aside under)."""
    if recorded_key(result) is None:
        return " records no content key (made before results recorded one)", "no-key"
    if changed := other_versions(stage, result):
        return f" was made with other versions than this environment's ({changed})", "stale-versions"
    if not holds(result, key):
        return "'s content key changed since the run began", "stale-key"
    if STAGES[stage].builds_checkpoint:
        there = shared.lookup(stage, key) if shared is not None else None
        if there is None or there.content_sha256 != result.content_sha256:
            return "'s checkpoint is gone, or is not the one the run used", "stale-checkpoint"
    return None, ""


class Found(NamedTuple):
    """What ``find`` found for a job: ``result`` (None: a miss, the job runs), ``where`` it was ('run': the run
    folder's own, 'store': a shared store's, filed into the run folder), and, for a resume, the run folder's result
    that missed (``earlier``) with why (``why``, and ``tag``: the name its file was set aside under)."""

    result: Record | None
    where: str = ""
    earlier: Record | None = None
    why: str | None = None
    tag: str = ""


def find(stage: str, key: str | None, config, folder: RunFolder, shared, use_shared: bool = True) -> Found:
    """The job's one lookup: the run folder's result when it is a hit, else the shared store's (``use_shared``:
    False under --force, for what is not a checkpoint) filed into the run folder, else a miss. A run-folder result
    that misses is set aside (``RunFolder.set_aside``) and returned as ``earlier``, with why."""
    earlier = folder.result(stage)
    why, tag = miss_reason(stage, earlier, key, shared) if earlier is not None else (None, "")
    if earlier is not None and why is None:
        return Found(earlier, "run")
    if earlier is not None:
        folder.set_aside(stage, tag)
    checkpoint = STAGES[stage].builds_checkpoint
    if shared is not None and key is not None and (use_shared or checkpoint):
        if (hit := shared.lookup(stage, key)) is not None:
            return Found(folder.file(stage, key, hit, config), "store", earlier, why, tag)
    return Found(None, "", earlier, why, tag)
