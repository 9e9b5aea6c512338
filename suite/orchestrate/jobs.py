"""One job of a plan: its stage process (suite.orchestrate.stageproc) or, for evaluate, the evaluation cache."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from suite.orchestrate.stageproc import StageOutcome, run_stage
from suite.orchestrate.store import RunFolder, eval_cache_dir, job_key, prerequisites_before, recorded_key
from suite.records import migrate
from suite.records.summary import RUN_FACTS, RunFacts
from suite.stages import registry
from suite.stages.registry import EVALUATE, STAGES


def run_job(stage: str, vp, vs, run_dir: Path, out_root: Path, env: dict[str, str], force: bool,
            lock=None, python: str | None = None) -> StageOutcome:
    """One job of a plan: ``stage`` of the variant planned as ``vp`` (a ``VariantPlan`` as the job runs it: with
    what a prerequisite stage chose passed on, ``ready_plan``; ``vs`` its ``VariantSummary``); evaluations go
    through the evaluation cache (``eval_cache.evaluate_cached``)."""
    vdir = run_dir / "variants" / vp.variant.name
    if stage == EVALUATE or STAGES[stage].check_of == EVALUATE:  # eval.engine_check's jobs too
        from suite.orchestrate.eval_cache import evaluate_cached

        return evaluate_cached(vp, vs, eval_cache_dir(env, out_root), vdir, env, force, lock, python, stage)
    # the job's key (a checkpoint's is its config's): the stage writes it into its result (a resume keeps it while
    # it is the same; the gate binds the result to its planned job by it)
    key = job_key(vp, stage, vs, env)
    outcome = run_stage(stage, vp.config(stage), vdir, env, lock, python, key)
    if outcome.result is None:
        return outcome
    return outcome._replace(result=RunFolder(vdir, lock).bind(stage, key, outcome.result))


def ready_plan(vp, stage: str, vs):
    """The variant's plan as ``stage``'s job runs it: after a prerequisite stage of its variant, with what that
    chose passed on (``planner.with_results``: e.g. the layers kvcheck chose for kv_skip_layers: auto, into the
    evaluate and benchmark engine arguments); the plan itself for a job after none (nothing to pass on)."""
    if not prerequisites_before(vp, stage):
        return vp
    from suite.plan.planner import with_results

    return with_results(vp, vs)


def made_with(vs, rebuilt_from=None):
    """What a variant's kept results were made with: its prerequisite stages' results in ``vs`` (its
    ``VariantSummary``), but a checkpoint rebuilt byte for byte under another content key counts as the one the run
    used (``rebuilt_from``: that one's result; runner.rebuilt kept what was made with it)."""
    done = SimpleNamespace(**{s: getattr(vs, s, None) for s in registry.run_order() if STAGES[s].prerequisite})
    for s in (s for s in registry.run_order() if STAGES[s].builds_checkpoint):
        now = getattr(done, s)
        same = rebuilt_from is not None and now is not None and rebuilt_from.content_sha256
        if same and rebuilt_from.content_sha256 == now.content_sha256:
            setattr(done, s, rebuilt_from)
    return done


def kept_result(vp, stage: str, result, vs, rebuilt_from, vdir: Path, env: dict[str, str]):
    """A kept result (a resumed run) once its job is ready: the run folder's ``lookup`` under the key its earlier
    stages' results give it now (evaluate's, kvcheck's and benchmark's known only once the checkpoint's content is),
    or None when it was made under another key or records none. One kept across a byte-identical rebuild under a new
    checkpoint key is recorded under its key now, so that a later resume finds it."""
    if recorded_key(result) is None:  # rundir.kept_results keeps none; nothing says which job made it
        return None
    folder = RunFolder(vdir)
    if folder.lookup(stage, job_key(vp, stage, made_with(vs, rebuilt_from), env)) is None:
        return None
    if rebuilt_from is not None and (now := job_key(vp, stage, vs, env)) is not None and now != recorded_key(result):
        return folder.put(stage, now, result)
    return result


def stage_jobs(plan) -> list:
    """The plan's DAG jobs that run a stage (not the publish step the DAG ends with)."""
    from suite.plan.dag import PUBLISH

    return [j for j in plan.dag if j.stage != PUBLISH]


def builds_checkpoint(stage: str) -> bool:
    """Whether ``stage`` builds a checkpoint that later jobs are served from (the registry's StageSpec says)."""
    return stage in STAGES and STAGES[stage].builds_checkpoint


def preflight(variants) -> list[str]:
    """The evaluation pre-flight (same prompts for every variant), once every checkpoint exists: its warnings."""
    from suite.stages.evaluate import preflight as check

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


def write_facts(run_dir: Path, summary, versions: dict[str, str], stage_wall_s: dict[str, float], finished: str) -> Path:
    """run.json (``records.summary.RunFacts``): what the runner knows of the run that its stage results do not say,
    from its job loop's ``summary`` (each variant's errors and tokenizer facts, the run's warnings, where and when it
    ran), so that ``suite.analysis.derive.summarize`` makes the run's summary from the folder alone."""
    facts = RunFacts(started=summary.started, finished=finished, recipe_sha256=summary.recipe_sha256,
                     platform=summary.platform, versions=versions,
                     errors={v.name: list(v.errors) for v in summary.variants if v.errors},
                     tokenizer={v.name: dict(v.tokenizer) for v in summary.variants if v.tokenizer},
                     model_sha256={v.name: v.model_sha256 for v in summary.variants if v.model_sha256},
                     warnings=list(summary.warnings), recipe_changed_on_resume=list(summary.recipe_changed_on_resume),
                     stage_wall_s=dict(stage_wall_s))
    return facts.write(run_dir / RUN_FACTS, root=run_dir)
