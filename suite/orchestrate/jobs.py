"""One job of a plan: its lookup in the store (suite.orchestrate.store.find) and, when that misses, its stage process
(suite.orchestrate.stageproc)."""

from __future__ import annotations

from pathlib import Path

from suite.orchestrate.stageproc import StageOutcome, run_stage
from suite.orchestrate.store import (Found, RunFolder, find, job_key, prerequisites_before, recorded_key, result_file,
                                    shared_store)
from suite.records import migrate
from suite.records.summary import RUN_FACTS, RunFacts
from suite.runtime import envs
from suite.runtime.engine.compilecache import STORE_ENV
from suite.stages.registry import STAGES
from suite.plan.planner import with_results
from suite.plan.dag import PUBLISH
from suite.stages.evaluate import preflight as check


def run_job(stage: str, vp, done, run_dir: Path, out_root: Path, env: dict[str, str], force: bool,
            lock=None, python: str | None = None) -> StageOutcome:
    """One job of a plan that ``look_up`` did not find: ``stage`` of the variant planned as ``vp`` (a ``VariantPlan``
    as the job runs it: with what a prerequisite stage chose passed on, ``ready_plan``; ``done`` its earlier stages'
    results by stage name) run as its stage process, its result bound to the job under its key (the stage writes the
    key into it; the gate binds the result to its planned job by it) and put in the shared store, where its stage
    has one (the evaluation cache: a second copy, the run folder's is the one its summary names; ``force``
    refreshes the entry as any run does)."""
    vdir = run_dir / "variants" / vp.variant.name
    key = job_key(vp, stage, done, env)
    config = vp.config(stage)
    outcome = run_stage(stage, config, vdir, env, lock, python, key)
    if outcome.result is None:
        return outcome
    result = RunFolder(vdir, lock).bind(stage, key, outcome.result)
    if key is not None and (shared := shared_store(stage, config, env, out_root)) is not None:
        shared.put(stage, key, result)
    return outcome._replace(result=result)


def look_up(stage: str, vp, done, run_dir: Path, out_root: Path, env: dict[str, str], force: bool, lock=None) -> Found:
    """A job's one lookup once it is ready (its prerequisites' results in ``done``, by stage name, so its key is
    known): the run
    folder's result, else the shared store's (not under ``force``, but for a checkpoint), as ``store.find`` judges."""
    vp = ready_plan(vp, stage, done)
    key, config = job_key(vp, stage, done, env), vp.config(stage)
    folder = RunFolder(run_dir / "variants" / vp.variant.name, lock)
    return find(stage, key, config, folder, shared_store(stage, config, env, out_root), use_shared=not force)


def ready_plan(vp, stage: str, done):
    """The variant's plan as ``stage``'s job runs it: after a prerequisite stage of its variant, with what that
    chose passed on (``planner.with_results``: e.g. the layers kvcheck chose for kv_skip_layers: auto, into the
    evaluate and benchmark engine arguments); the plan itself for a job after none (nothing to pass on)."""
    if not prerequisites_before(vp, stage):
        return vp

    return with_results(vp, done)


def miss_note(stage: str, variant: str, found: Found, vp) -> list[str]:
    """Why a result the run folder held is not the job's hit now (``found``: its lookup, ``vp``: the variant's plan):
    it runs again; for a checkpoint only when its key changed (``checkpoint_note`` says the rest once it is there)."""
    if not builds_checkpoint(stage):
        return [f"{variant}: its {stage} result{found.why}: it runs again"]
    if found.tag != "stale-key":
        return []
    return [f"{variant}: the checkpoint's content key changed since the run began ({found.earlier.key[:12]} -> "
            f"{vp.config(stage).key[:12]}): it is built again"]


def reuse_note(stage: str, found: Found, vs, env: dict[str, str]) -> str | None:
    """The line a hit in the shared store says once: the baseline's scored result reused from the store (its key),
    so a team sees its baseline was not run again; None for any other hit."""
    scored = not STAGES[stage].check_of and not builds_checkpoint(stage)
    if not (found.where == "store" and vs.is_baseline and scored):
        return None
    return (f"baseline: reused from {env.get(STORE_ENV)} (key {recorded_key(found.result)}): its {stage} is not run "
            "again")


def checkpoint_note(old, new, variant: str, plan) -> list[str]:
    """A checkpoint a resumed run built again or found anew (the run folder's result missed: its folder was gone, or
    its key changed): the same content as the one the run used, and the results made with it keep their keys; other
    content, and every result made with it (of each variant served from it) runs again, its key moved with it."""
    where = "rebuilt on this machine" if not new.cache_hit else f"found at {new.checkpoint}"
    if old.content_sha256 and old.content_sha256 == new.content_sha256:
        return [f"{variant}: checkpoint {where}, identical to the one the run used "
                f"(sha256 {new.content_sha256[:12]}); its results are kept"]
    users = [vp.variant.name for vp in plan.variants if vp.model_path == plan_path(plan, variant)]
    made = sorted((s, v) for v in users for s in STAGES if not builds_checkpoint(s)
                  and (plan.run_dir / "variants" / v / result_file(s)).is_file())
    redoing = ", ".join(f"{s} {v}" for s, v in made) or "nothing (no later result yet)"
    was = (old.content_sha256 or "not recorded")[:12]
    return [f"{variant}: checkpoint {where} differs from the one the run used (sha256 {was} -> "
            f"{(new.content_sha256 or '?')[:12]}): redoing {redoing}"]


def plan_path(plan, variant: str) -> str:
    return next(vp.model_path for vp in plan.variants if vp.variant.name == variant)


def stage_jobs(plan) -> list:
    """The plan's DAG jobs that run a stage (not the publish step the DAG ends with)."""
    return [j for j in plan.dag if j.stage != PUBLISH]


def builds_checkpoint(stage: str) -> bool:
    """Whether ``stage`` builds a checkpoint that later jobs are served from (the registry's StageSpec says)."""
    return stage in STAGES and STAGES[stage].builds_checkpoint


def preflight(variants) -> list[str]:
    """The evaluation pre-flight (same prompts for every variant), once every checkpoint exists: its warnings."""
    return check.run(variants)


def write_timeline(path: Path, executor, plan, timeline: list[dict], t0: float) -> None:
    """jobs.json: the executor, its start-up, the DAG, where and when each job ran (seconds from the start) and what
    timeline.png draws each stage's jobs in (``stages``: the registry's colour; outputs never import the stages)."""
    import json
    import time

    walls = [j["wall_s"] for j in timeline if j["wall_s"] > 0]
    overhead = sum(j["overhead_s"] for j in timeline)
    path.write_text(json.dumps({
        migrate.VERSION_FIELD: migrate.SCHEMA_VERSION,  # the record files' version (suite.records.migrate)
        "executor": executor.describe(), "startup_s": round(executor.startup_s, 3),
        "t0": t0, "wall_s": round(time.time() - t0, 3),  # t0: the run's start, Unix seconds (engine starts' clock)
        "overhead_s": round(overhead, 4),
        "overhead_share": round(overhead / sum(walls), 6) if walls else None,
        "dag": [j.as_dict() for j in plan.dag], "jobs": timeline,
        "stages": {stage: {"colour": STAGES[stage].colour}
                   for stage in dict.fromkeys(j.stage for j in stage_jobs(plan))},
    }, indent=2))


def forget_facts(run_dir: Path) -> None:
    """run.json removed: an attempt that stops before its job loop ends leaves none (``summarize`` then says each
    planned job without a result is not finished)."""
    (run_dir / RUN_FACTS).unlink(missing_ok=True)


def write_facts(run_dir: Path, summary, quantizes: bool, stage_wall_s: dict[str, float], finished: str) -> Path:
    """run.json (``records.summary.RunFacts``): what the runner knows of the run that its stage results do not say,
    from its job loop's ``summary`` (each variant's errors and tokenizer facts, the run's warnings, where and when it
    ran, the versions its stages ran with: ``envs.run_versions``, the quantize environment's asked when the plan
    ``quantizes``), so that ``suite.analysis.derive.summarize`` makes the run's summary from the folder alone."""
    facts = RunFacts(started=summary.started, finished=finished, recipe_sha256=summary.recipe_sha256,
                     platform=summary.platform, versions=envs.run_versions(summary.variants, quantize=quantizes),
                     errors={v.name: list(v.errors) for v in summary.variants if v.errors},
                     tokenizer={v.name: dict(v.tokenizer) for v in summary.variants if v.tokenizer},
                     model_sha256={v.name: v.model_sha256 for v in summary.variants if v.model_sha256},
                     warnings=list(summary.warnings), recipe_changed_on_resume=list(summary.recipe_changed_on_resume),
                     stage_wall_s=dict(stage_wall_s))
    return facts.write(run_dir / RUN_FACTS, root=run_dir)
