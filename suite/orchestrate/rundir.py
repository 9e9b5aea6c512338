"""The run folder: its name, its lock, the recipe copy and plan.json it holds, the summary a run opens with, and what a
run promised at its start."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from suite.analysis import derive
from suite.orchestrate.jobs import stage_jobs
from suite.orchestrate.store import RunFolder, job_key, run_env, shared_store
from suite.records.paths import recorded_run_dir
from suite.records.summary import RunSummary
from suite.runtime import safeio
from suite.runtime.envs import run_versions, stage_env, vllm_platform
from suite.recipe.loaded import fields_that_differ
from suite.records import migrate
from suite.runtime.errors import Problem, SuiteError
from suite.recipe import LoadedRecipe, serving_problems
from suite.stages.registry import run_order
from suite.runtime.lock import RunLock, RunLockedError
from suite.plan.planner import make_plan


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
    try:
        return RunLock(run_dir).acquire()
    except RunLockedError as e:
        raise SuiteError(Problem(str(run_dir), "run.lock", str(e),
                                 "wait for that run to end, or stop it first (kill its pid); a lock whose "
                                 "processes are gone, or from another boot or host, is taken over by itself")) from None


def prepare(loaded: LoadedRecipe, run_dir: Path, out_root: Path, resume: bool):
    """The run's plan (checkpoints under ``out_root``), written to plan.json (what this attempt runs: `suite gate`
    binds every result to its job in it), for a resume the jobs whose run-folder results are hits before anything
    runs (``expected_hits``), and what the stage processes get (``store.run_env``); when some job will run, a
    SuiteError if this machine cannot serve the recipe."""
    plan = make_plan(loaded, run_dir, out_root / "checkpoints")
    expected = expected_hits(plan, run_dir, out_root) if resume else {}
    if resume and len(expected) < len(plan.jobs()) and (problems := serving_problems(loaded)):
        raise SuiteError(problems)
    (run_dir / "plan.json").write_text(plan_json(plan, loaded.path))
    return plan, expected, run_env(loaded, plan, out_root)


def opening_summary(loaded: LoadedRecipe, plan, run_dir: Path, resume: bool, started: str,
                    quantizes: bool) -> RunSummary:
    """The summary the job loop files results into (``derive.start``): a resume keeps where and with what the run
    began (its summary.json, names resolved against the folder where it is now); a new run asks the serve
    environment's platform and the versions its stages will run with (the quantize environment's when the plan
    ``quantizes``)."""
    earlier = None
    if resume and (run_dir / "summary.json").is_file():
        earlier = RunSummary.read(run_dir / "summary.json", root=run_dir, recorded=recorded_run_dir(run_dir))
    if earlier is not None:
        return derive.start(loaded, plan, run_dir, platform="", versions={}, earlier=earlier, started=started)
    return derive.start(loaded, plan, run_dir, platform=vllm_platform(), versions=run_versions(quantize=quantizes),
                        started=started)


def expected_hits(plan, run_dir: Path, out_root: Path) -> dict:
    """{(stage, variant): result} of the jobs whose run-folder result is a hit with the keys known before anything
    runs (each job's prerequisites: the results found before it, in the DAG's order), judged as the job loop's
    lookup judges (``store.RunFolder.lookup``) and nothing written: what a resume will not run, unless a checkpoint
    it is served from turns out otherwise when its job is looked up."""
    env, found = stage_env(plan.env), {}
    planned = {vp.variant.name: vp for vp in plan.variants}
    for job in stage_jobs(plan):
        vp = planned[job.variant]
        done = {s: r for (s, n), r in found.items() if n == job.variant}
        key = job_key(vp, job.stage, done, env)
        shared = shared_store(job.stage, vp.config(job.stage), env, out_root)
        if key is not None and (hit := RunFolder(run_dir / "variants" / job.variant).lookup(job.stage, key, shared)):
            found[job.stage, job.variant] = hit
    return found


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
    }, indent=2)


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
