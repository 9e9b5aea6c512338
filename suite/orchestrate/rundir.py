"""The run folder: its name, its lock, the recipe copy and plan.json it holds, and what a resume keeps of it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

from suite.runtime import safeio
from suite.recipe.loaded import fields_that_differ
from suite.records import migrate
from suite.runtime.errors import Problem, SuiteError
from suite.recipe import LoadedRecipe, serving_problems
from suite.stages.registry import EVALUATE, STAGES, run_order


def new_run_dir(loaded: LoadedRecipe, out_root: Path) -> Path:
    """``<timestamp>-<recipe>``, or with ``-2``, ``-3``... when runs of the recipe start in the same second
    (``mkdir`` is atomic: two processes never get one folder)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        run_dir = out_root / (f"{stamp}-{loaded.recipe.name}" + (f"-{n}" if n > 1 else ""))
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run folder name for {stamp}-{loaded.recipe.name} in {out_root}")


def acquire_run_lock(run_dir: Path):
    """The run folder's lock (suite.runtime.lock.RunLock), or a clear error while another run of it is alive."""
    from suite.runtime.lock import RunLock, RunLockedError

    try:
        return RunLock(run_dir).acquire()
    except RunLockedError as e:
        raise SuiteError(Problem(str(run_dir), "run.lock", str(e),
                                 "wait for that run to end, or stop it first (kill its pid); a lock whose "
                                 "processes are gone, or from another boot or host, is taken over by itself")) from None


def prepare(loaded: LoadedRecipe, run_dir: Path, out_root: Path, resume: bool):
    """The run's plan (checkpoints under ``out_root``) and the results a resume keeps; the plan is written to
    plan.json."""
    from suite.plan.planner import make_plan

    plan = make_plan(loaded, run_dir, out_root / "checkpoints")
    if resume:
        keep_batch_limits_of_older_runs(plan, run_dir)
    kept, notes = kept_results(loaded, plan, run_dir, resume)
    # what this attempt runs (a resume's too, once the earlier plan was read: with --accept-recipe-change its jobs
    # differ): `suite gate` binds every result to its job in it
    (run_dir / "plan.json").write_text(plan_json(plan, loaded.path))
    return plan, kept, notes


def keep_batch_limits_of_older_runs(plan, run_dir: Path) -> None:
    """A run planned before ``EvaluateConfig.batch_limits`` existed scored with vLLM's own batch limits: its
    evaluations still to run keep them, so that they pair with the kept ones (the decode batch moves FP8 KV
    scores: studies/2026-12-01-fp8-kv-cache)."""
    try:
        stored = safeio.read_json(run_dir / "plan.json", "record").get("variants", {})
    except (OSError, ValueError):
        return

    older = any(isinstance(v.get(EVALUATE), dict) and "batch_limits" not in v[EVALUATE] for v in stored.values())
    if not older:
        return
    for vp in plan.variants:
        if vp.evaluate is not None and vp.evaluate.batch_limits != "llm":
            vp.evaluate = vp.evaluate.model_copy(update={"batch_limits": "llm"})


REBUILD = "quantize (rebuilt)"  # kept_results' key for a quantize result whose checkpoint is no longer there


def kept_results(loaded: LoadedRecipe, plan, run_dir: Path, resume: bool) -> tuple[dict, list[str]]:
    """{(stage, variant): result} a resumed run keeps (none for a new run), and under (REBUILD, variant)
    the quantize results whose checkpoints are gone or whose content key is no longer the plan's; when a resume
    still has jobs to run, a SuiteError if this machine cannot serve the recipe. With it, a line for each result
    not kept. A result that records the content key it was made under (kvcheck's and benchmark's ``key``, evaluate's
    ``cache_key``: suite.orchestrate.store) is kept only while its job's key is the same; where that key depends on
    the checkpoint's content, known only once the quantize job has run again or been kept, the runner compares it
    then (runner.schedule). Named first, as the reason: an evaluate or benchmark result made with other versions
    of the serve environment's key packages (vLLM, lm-eval, torch, transformers) than it has now is not kept, its
    file renamed ``.stale-versions`` (a resumed run must not pair scores of two vLLMs), and neither are the results
    of an unquantized variant whose model's content changed since the run began (``drop_other_base_models``).
    A result that records no key (``store.recorded_key``) is not kept: its file is renamed ``.no-key``."""
    from suite.orchestrate import store
    from suite.orchestrate.jobs import builds_checkpoint

    if not resume:
        return {}, []
    kept = store.in_run_folder(run_dir, plan.jobs())
    planned = {vp.variant.name: vp for vp in plan.variants}
    notes = []
    for (stage, name), res in list(kept.items()):  # nothing says which job made it: it is not kept
        if store.recorded_key(res) is None:
            set_aside(kept, run_dir, stage, name, "no-key")
            notes.append(f"{name}: its {stage} result records no content key (made before results recorded one): "
                         "it runs again")
    for (stage, name), res in list(kept.items()):
        if builds_checkpoint(stage):
            notes += _check_checkpoint(kept, planned[name], stage, name, res)
    # what changed by name (the model, the serve environment's versions): the reason a note gives, for a result
    # that records its key too (its key covers both); an older result without one is judged by these alone
    notes += drop_other_base_models(plan, kept, run_dir)
    notes += drop_other_versions(kept, run_dir)
    env = None
    for (stage, name), res in list(kept.items()):
        if stage == REBUILD or builds_checkpoint(stage):
            continue
        if env is None:
            from suite.runtime.envs import stage_env

            env = stage_env(plan.env)
        done = SimpleNamespace(**{s: r for (s, n), r in kept.items() if n == name})  # its earlier stages' results
        key = store.job_key(planned[name], stage, done, env)  # None until its checkpoint is known: runner.schedule
        if not store.holds(res, key):  # made under another key than its job's now: it runs again
            set_aside(kept, run_dir, stage, name, "stale-key")
            notes.append(f"{name}: its {stage} result's content key changed since the run began: it runs again")
    if len([k for k in kept if k[0] != REBUILD]) < len(plan.jobs()):  # something will run: can we serve it?
        if problems := serving_problems(loaded):
            raise SuiteError(problems)
    return kept, notes


def _check_checkpoint(kept: dict, vp, stage: str, name: str, res) -> list[str]:
    """A kept quantize result whose content key is no longer its job's, or whose checkpoint is gone, moves to
    (REBUILD, variant): its job runs again; a line when the key changed."""
    from suite.orchestrate import store

    key = store.job_key(vp, stage)
    if not store.holds(res, key):
        # what builds the checkpoint changed since (the base model's content, the quantization, the calibration
        # data or the quantizer's versions): it is built again, like a lost one, and what was made with the old
        # one is redone unless the new one is the same, byte for byte (runner.rebuilt)
        kept[REBUILD, name] = kept.pop((stage, name))
        return [f"{name}: the checkpoint's content key changed since the run began ({res.key[:12]} -> "
                f"{str(key)[:12]}): it is built again"]
    if not (Path(res.checkpoint) / ".complete").is_file():
        # a fresh machine: the checkpoint is gone. The quantize job runs again and rebuilds it from its
        # content key; runner.schedule compares the rebuild's content hash with the recorded one
        # (REBUILD: this result) and redoes what was made with a checkpoint that differs.
        kept[REBUILD, name] = kept.pop((stage, name))
    return []


def set_aside(kept: dict, run_dir: Path, stage: str, name: str, tag: str) -> None:
    """Drop a kept result and rename its file ``<stage>.result.<tag>.json``: a resume interrupted before its job runs
    again must not find it either."""
    kept.pop((stage, name), None)
    res = run_dir / "variants" / name / f"{stage}.result.json"
    if res.is_file():
        res.rename(res.with_name(f"{stage}.result.{tag}.json"))


def drop_other_versions(kept: dict, run_dir: Path) -> list[str]:
    """Drop from ``kept`` (and set aside, ``.stale-versions``) the results of the serve environment's stages whose
    recorded versions of the key packages differ from that environment's now; a line for each. Results that
    recorded none (older ones) are kept, and the environment is asked only when some result recorded versions."""
    from suite.plan.keys import KEY_PACKAGES

    recorded = {k: r for k, r in kept.items()
                if k[0] in STAGES and STAGES[k[0]].environment == "serve" and getattr(r, "versions", None)}
    if not recorded:
        return []
    from suite.runtime.envs import serve_versions

    now = serve_versions()
    notes = []
    for (stage, name), res in recorded.items():
        changed = [f"{p} {res.versions.get(p)} -> {now.get(p)}" for p in KEY_PACKAGES
                   if res.versions.get(p) != now.get(p)]
        if changed:
            set_aside(kept, run_dir, stage, name, "stale-versions")
            notes.append(f"{name}: its {stage} result was made with other versions than this environment's "
                         f"({', '.join(changed)}): it runs again")
    return notes


def plan_json(plan, recipe_path: Path | None = None) -> str:
    """plan.json: the run folder, the recipe's path, the stage environment, the jobs and every config."""
    return json.dumps({
        migrate.VERSION_FIELD: migrate.SCHEMA_VERSION,  # the record files' version (suite.records.migrate)
        "run_dir": str(plan.run_dir), "recipe_path": str(recipe_path) if recipe_path else None,
        "env": plan.env, "jobs": plan.jobs(), "executor": plan.executor.model_dump(),
        "dag": [j.as_dict() for j in plan.dag],
        "variants": {vp.variant.name: {"model_path": vp.model_path,
                                       **({"checkpoint": vp.checkpoint} if getattr(vp, "checkpoint", None) else {}),
                                       **{s: (c.model_dump() if (c := vp.config(s)) else None) for s in run_order()}}
                     for vp in plan.variants},
        "base_fingerprints": base_fingerprints(plan),
    }, indent=2)


def base_fingerprints(plan) -> dict[str, str]:
    """The content fingerprint of the model each unquantized variant is served from (``keys.weights_fingerprint``,
    through the per-machine hash cache): a resume redoes that variant's results when its model changed since."""
    from suite.plan.keys import weights_fingerprint

    paths = {vp.variant.name: vp.model_path for vp in plan.variants if vp.quantize is None}
    by_path = {p: weights_fingerprint(p) for p in set(paths.values())}  # variants sharing a model: hashed once
    return {name: by_path[p] for name, p in paths.items()}


def drop_other_base_models(plan, kept: dict, run_dir: Path) -> list[str]:
    """Drop from ``kept`` (and set aside, ``.stale-model``) the results of each unquantized variant whose
    model's fingerprint differs from the one plan.json recorded when the run began (a folder rewritten between the
    attempts), and record the new fingerprints there, so that the results made now stand at a later resume; a line
    for each variant. A plan.json from before fingerprints were recorded: nothing is checked."""
    path = run_dir / "plan.json"
    try:
        stored = safeio.read_json(path, "record")
    except (OSError, ValueError):
        return []
    recorded = stored.get("base_fingerprints")
    if not isinstance(recorded, dict):
        return []
    now = base_fingerprints(plan)
    notes = []
    for name, fingerprint in now.items():
        if recorded.get(name) in (None, fingerprint):
            continue
        dropped = sorted(stage for stage, v in kept if v == name)
        for stage in dropped:
            set_aside(kept, run_dir, stage, name, "stale-model")
        notes.append(f"{name}: its model's content changed since the run began ({recorded[name][:12]} -> "
                     f"{fingerprint[:12]}): {', '.join(dropped) or 'nothing kept yet'} run again")
    if notes:
        path.write_text(json.dumps({**stored, "base_fingerprints": {**recorded, **now}}, indent=2))
    return notes


# --------------------------------------------------------------------------------------------------
# What a run promised at its start, kept by every resume: --force, and the recipe it was made from

RUN_OPTIONS = "run-options.json"


def record_start(run_dir: Path, loaded: LoadedRecipe, force: bool) -> None:
    """run-options.json: the recipe's sha256 and parsed fields as the run began, and whether it was started with
    --force (a resume honours it: the evaluations still to run are recomputed, not taken from the cache)."""
    (run_dir / RUN_OPTIONS).write_text(json.dumps({
        migrate.VERSION_FIELD: migrate.SCHEMA_VERSION, "recipe_sha256": loaded.sha256, "force": force,
        "recipe": loaded.recipe.model_dump(mode="json"),
    }, indent=2))


def started_with(run_dir: Path) -> dict:
    """run-options.json of a run folder ({} for a run made before it was written: summary.json's
    recipe_sha256 then stands in for the recipe's hash, when there is one)."""
    try:
        return safeio.read_json(run_dir / RUN_OPTIONS, "state")
    except (OSError, ValueError):
        pass
    try:
        sha = safeio.read_json(run_dir / "summary.json", "record").get("recipe_sha256")
    except (OSError, ValueError, AttributeError):
        return {}
    return {"recipe_sha256": sha} if sha else {}




def recipe_changes(run_dir: Path, loaded: LoadedRecipe) -> list[str] | None:
    """None when the run folder's recipe.yaml is the one the run began with (same sha256) or nothing was
    recorded; else the fields that changed (["(comments or layout only)"] when the parsed fields are equal,
    ["(fields not recorded)"] for a run from before run-options.json)."""
    start = started_with(run_dir)
    if not start.get("recipe_sha256") or start["recipe_sha256"] == loaded.sha256:
        return None
    if "recipe" not in start:
        return ["(fields not recorded)"]
    return fields_that_differ(start["recipe"], loaded.recipe.model_dump(mode="json")) or ["(comments or layout only)"]


def refuse_recipe_change(run_dir: Path, changed: list[str]) -> SuiteError:
    return SuiteError(Problem(
        str(run_dir / "recipe.yaml"), ", ".join(changed[:8]) + (" ..." if len(changed) > 8 else ""),
        "changed since the run began (its sha256 differs from the one recorded in run-options.json): a resume would "
        "judge the earlier results by another recipe than the one they were made with",
        "restore the file, start a new run with the changed recipe, or resume with --accept-recipe-change "
        "(the summary and `suite gate` then show the changed fields)"))
