"""The runner: the job loop of one run (each stage job a process of its own), then the run's outputs.

Data flows one way: recipe -> plan (suite.plan) -> stage results (JSON files in the run folder) ->
summary.json (suite.analysis.summary) -> frontier.png, report.html, MLflow (suite.outputs.publish).
A failed stage does not stop the run: the variant records the error (and its log's tail), its later
stages are skipped, and the other variants go on.

Run folder layout (``<output_dir>/<timestamp>-<recipe>[-N]/``, suite.orchestrate.rundir):
  recipe.yaml, plan.json, summary.json, report.html, frontier.png (when a variant has both an accuracy
  and a throughput figure), run.lock (while a run of it is alive: suite.runtime.lock)
  variants/<name>/{quantize,evaluate,benchmark}.{config.json,result.json,log}
  variants/<name>/evaluate/  lm_eval results and samples (lm-eval's own file names)
  variants/<name>/benchmark/ bench-<point>.json, server.log
Quantized checkpoints live in ``<output_dir>/checkpoints/<scheme>[-kv]-<key>/`` (named by content: two
variants with the same quantization share one) and are reused across runs; finished evaluations in
``<output_dir>/eval-cache/<key>/``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable

from suite.analysis import summary as summaries
from suite.orchestrate import jobs, rundir, tracking
from suite.orchestrate.executors import JobCall, make_executor
from suite.outputs.publish import now, publish

envs = jobs.envs  # the stage environment and the versions the summary records
elapsed_by_stage = jobs.elapsed_by_stage  # re-exported: callers import it from here


# (stage, variant, event[, where]) with event in start|ok|failed|skipped|resumed|cached; 'start' also says
# where the job runs (the executor's placement: "GPU 0 (0.25)", "CPU", a Ray node). Also ("run", "", "started",
# run folder) once plan.json is written, before any job, and (stage, variant, "progress", StageProgress) while a
# job runs (suite.orchestrate.progress: the counts its stage process writes)
Reporter = Callable[..., None]
Watcher = Callable[[list, list], None]  # (running [(Job, placement)], queued [Job]): on every pass of the job loop


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during a run, once its stage processes are stopped and its lock released: ``run_dir`` is
    the folder a ``suite run --resume`` continues."""

    def __init__(self, run_dir: Path):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def execute(loaded: "rundir.LoadedRecipe", out_root: Path | None = None, report: Reporter | None = None,
            track: bool = True, force: bool = False, resume: Path | None = None,
            watch: Watcher | None = None, accept_recipe_change: bool = False) -> "summaries.RunSummary":
    """Run a recipe's plan in a new run folder, or with ``resume`` continue the run in that folder: stage
    results already there are kept (event 'resumed'), the other jobs run. The folder is locked
    (``run.lock``) for as long as this runs: a resume refuses while a run of it, or a stage of one, is alive.
    A resume keeps what the run promised at its start (rundir.record_start): it honours the start's --force, and
    refuses a run folder whose recipe.yaml changed since, unless ``accept_recipe_change`` (then recorded in the
    summary). Ctrl-C raises RunInterrupted once the stage processes are stopped and the lock released."""
    report = report or (lambda *event: None)
    if resume:
        run_dir = resume.resolve()
        out_root = out_root or run_dir.parent  # where its checkpoints/ and eval-cache/ are
    else:
        out_root = out_root or loaded.resolve(loaded.recipe.output_dir)
        run_dir = rundir.new_run_dir(loaded, out_root)
    lock = rundir.acquire_run_lock(run_dir)
    try:
        changed = None
        if not resume:
            shutil.copy(loaded.path, run_dir / "recipe.yaml")
            rundir.record_start(run_dir, loaded, force)
        else:
            force = force or bool(rundir.started_with(run_dir).get("force"))
            changed = rundir.recipe_changes(run_dir, loaded)
            if changed and not accept_recipe_change:
                raise rundir.refuse_recipe_change(run_dir, changed)
        return _execute(loaded, run_dir, out_root, lock, report, track, force, resume, watch, changed or [])
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir) from None
    finally:
        lock.release()


def _execute(loaded: "rundir.LoadedRecipe", run_dir: Path, out_root: Path, lock, report: Reporter, track: bool, force: bool,
             resume: Path | None, watch: Watcher | None = None,
             recipe_changed: list[str] | None = None) -> "summaries.RunSummary":
    r = loaded.recipe
    plan, kept, resume_notes = rundir.prepare(loaded, run_dir, out_root, resume is not None)
    report("run", "", "started", str(run_dir))  # the folder, its logs, where it is tracked: before any stage
    env = envs.stage_env(plan.env)
    quantizes = any(vp.quantize for vp in plan.variants)
    earlier = summaries.RunSummary.read(run_dir / "summary.json") if resume and (run_dir / "summary.json").is_file() else None
    summary = summaries.start(loaded, plan, run_dir, platform=envs.vllm_platform() if not earlier else "",
                              versions=envs.run_versions(quantize=quantizes) if not earlier else {}, earlier=earlier,
                              started=now())
    summary.warnings += resume_notes  # results of the earlier attempt made from other inputs, not kept
    if recipe_changed:
        summary.recipe_changed_on_resume = list(recipe_changed)
        summary.warnings.append(f"resumed with --accept-recipe-change: recipe.yaml differs from the one the run "
                                f"began with in {', '.join(recipe_changed)}")
    if lock.taken_over:
        t = lock.taken_over
        summary.warnings.append(f"took over the run lock of `suite run` pid {t.get('pid')} on {t.get('host')} "
                                "(no longer running here); results its stages may still write are refused")
    live = tracking.live(summary, loaded, run_dir, out_root, on=track and resume is None)  # MLflow runs RUNNING now
    if live.url:
        report("run", "", "tracking", live.url)
    try:
        with tracking.watching(run_dir, report):  # the stages' progress records -> report(stage, variant, "progress", count)
            totals = schedule(plan, summary, kept, plan.executor, run_dir, out_root, env, force, lock,
                              live.hear(report), watch)
        summaries.finish(summary, r, envs.run_versions(summary.variants, quantize=quantizes), totals)
        publish(summary, run_dir, out_root, track, resumed=resume is not None, report=report, end_times=live.end_ms)
    except BaseException:
        live.abort()
        raise
    return summary


def schedule(plan, summary, kept: dict, spec, run_dir: Path, out_root: Path, env: dict[str, str], force: bool, lock,
             report: Reporter, watch: Watcher | None = None) -> dict[str, float]:
    """Run the plan's DAG on the executor ``spec`` asks for: a job is sent when every job it waits for has
    succeeded (skipped, with the reason, when one failed), and the executor starts it when it fits. Writes
    ``jobs.json`` (where and when each job ran, the executor's overhead); returns each stage's total wall time."""
    by_name = {v.name: v for v in summary.variants}
    plans = {vp.variant.name: vp for vp in plan.variants}
    totals: dict[str, float] = {}
    state: dict[str, str] = {}  # job id -> ok | failed | skipped
    refusals: dict[str, str] = {}  # variant -> why its first job refused at the start can never run here
    pending = jobs.stage_jobs(plan)
    quantize_left = {j.id for j in pending if jobs.builds_checkpoint(j.stage)}  # checkpoints still to build
    executor = make_executor(spec)
    t0 = time.time()
    timeline: list[dict] = []
    checked = False
    try:
        executor.start()
        # before anything runs, not once its inputs exist. Kept apart from the variant's errors until the end: an error
        # skips every later job of its variant, and the variant's other jobs (kept results of a resumed run, a
        # checkpoint another variant builds on) must still run
        for job, why in refused_at_start(pending, kept, executor):
            pending.remove(job)
            refusals.setdefault(job.variant, f"{job.stage} not run: {why}")
            state[job.id] = "skipped"
            quantize_left.discard(job.id)
            report(job.stage, job.variant, "skipped")
        while pending or executor.running():
            progressed = False
            if not quantize_left and not checked:  # every checkpoint exists now: same prompts for all?
                summary.warnings += jobs.preflight(summary.variants)
                checked = True
            for job in list(pending):
                if any(d not in state for d in job.deps):
                    continue  # still waiting
                vs = by_name[job.variant]
                failed_dep = next((d for d in job.deps if state[d] != "ok"), None)
                if (job.stage, job.variant) in kept and not failed_dep and not vs.errors:
                    still_kept(job, plans[job.variant], vs, kept, run_dir, env, summary)
                kept_here = (job.stage, job.variant) in kept and not failed_dep and not vs.errors
                if not kept_here and (failed_dep or vs.errors or (why := executor.never_fits(job))):
                    pending.remove(job)
                    if not vs.errors and failed_dep:
                        vs.errors.append(f"{job.stage} not run: {failed_dep} did not succeed")
                    elif not vs.errors:
                        vs.errors.append(f"{job.stage} not run: {why}")
                    state[job.id] = "skipped"
                    quantize_left.discard(job.id)
                    progressed = True
                    report(job.stage, job.variant, "skipped")
                    continue
                if (job.stage, job.variant) in kept:
                    pending.remove(job)
                    result = kept[job.stage, job.variant]
                    jobs.record(vs, job.stage, result, plans[job.variant])
                    totals[job.stage] = totals.get(job.stage, 0.0) + getattr(result, "wall_s", 0.0)
                    state[job.id] = "ok"
                    quantize_left.discard(job.id)
                    progressed = True
                    report(job.stage, job.variant, "resumed")
                    continue
                call = JobCall(job.stage, plans[job.variant], vs, run_dir, out_root, env, force, lock,
                               jobs.interpreter(job.stage))
                if executor.submit(job, call):
                    pending.remove(job)
                    progressed = True
                    where = dict((j.id, p) for j, p in executor.running()).get(job.id, "")
                    report(job.stage, job.variant, "start", where)
            if watch is not None:
                watch(executor.running(), [j for j in pending])
            if not executor.running():
                if pending and not progressed:  # nothing runs, nothing changed: these can never start
                    raise RuntimeError(f"jobs that cannot start: {', '.join(j.id for j in pending)}")
                continue  # something became ready (a kept result, a skip): look again
            for f in executor.wait():
                job, outcome = f.job, f.outcome
                vs = by_name[job.variant]
                timeline.append(f.as_dict(t0))
                totals[job.stage] = totals.get(job.stage, 0.0) + outcome.wall_s
                quantize_left.discard(job.id)
                if outcome.note:
                    summary.warnings.append(f"{job.variant}: {outcome.note}")
                if outcome.error:
                    vs.errors.append(outcome.error)
                    state[job.id] = "failed"
                    report(job.stage, job.variant, "failed")
                    continue
                jobs.record(vs, job.stage, outcome.result, plans[job.variant])
                if jobs.builds_checkpoint(job.stage) and (old := kept.get((rundir.REBUILD, job.variant))) is not None:
                    summary.warnings += rebuilt(old, outcome.result, job.variant, plan, kept)
                state[job.id] = "ok"
                report(job.stage, job.variant, "cached" if getattr(outcome.result, "cache_hit", False) else "ok")
    finally:
        for name, why in refusals.items():  # first: the cause, before what followed from it
            by_name[name].errors.insert(0, why)
        executor.close()
        jobs.write_timeline(run_dir / "jobs.json", executor, plan, timeline, t0)
    summary.stage_elapsed_s = elapsed_by_stage(timeline)
    return totals


def still_kept(job, vp, vs, kept: dict, run_dir: Path, env: dict[str, str], summary) -> None:
    """A kept result whose job is ready, judged by its key now (jobs.kept_result): one made under another key is set
    aside (``.stale-key``) and its job runs again, with a warning."""
    held = jobs.kept_result(vp, job.stage, kept[job.stage, job.variant], vs, kept.get((rundir.REBUILD, job.variant)),
                            run_dir / "variants" / job.variant, env)
    if held is not None:
        kept[job.stage, job.variant] = held
        return
    rundir.set_aside(kept, run_dir, job.stage, job.variant, "stale-key")
    summary.warnings.append(f"{job.variant}: its {job.stage} result's content key changed since the run began: it "
                            "runs again")


def refused_at_start(pending: list, kept: dict, executor) -> list[tuple]:
    """(job, why) for each job the executor can never hold (``never_fits``: more GPUs, CPUs or memory than any node
    has), then for each job that only feeds such jobs (a quantize whose every user never fits: its checkpoint would
    be built for nothing), each group in DAG order, so that a variant's first error names the cause. Kept results of
    a resumed run are not refused."""
    direct = {j.id: (j, why) for j in pending
              if (j.stage, j.variant) not in kept and (why := executor.never_fits(j))}
    derived: dict[str, tuple] = {}
    for job in reversed(pending) if direct else ():  # later jobs first: a job's users come after it in the DAG
        users = [j for j in pending if job.id in j.deps]
        if job.id in direct or (job.stage, job.variant) in kept or not users:
            continue
        if all(u.id in direct or u.id in derived for u in users):
            derived[job.id] = (job, f"every job that needs it cannot run here ({', '.join(u.id for u in users)})")
    return [direct[j.id] for j in pending if j.id in direct] + [derived[j.id] for j in pending if j.id in derived]


def rebuilt(old, new, variant: str, plan, kept: dict) -> list[str]:
    """A checkpoint a resumed run had to rebuild (the folder was gone: another machine): when its content
    hash differs from the one the run's earlier results were made with, those results (of every variant
    served from it) are dropped from ``kept``, so their jobs run again; a warning says which."""
    if old.content_sha256 and old.content_sha256 == new.content_sha256:
        return [f"{variant}: checkpoint rebuilt on this machine, identical to the one the run used "
                f"(sha256 {new.content_sha256[:12]}); its results are kept"]
    users = [vp.variant.name for vp in plan.variants if vp.model_path == plan_path(plan, variant)]
    dropped = sorted((s, v) for (s, v) in kept if v in users and s != rundir.REBUILD and not jobs.builds_checkpoint(s))
    for stage, name in dropped:
        rundir.set_aside(kept, plan.run_dir, stage, name, f"stale-{(old.content_sha256 or 'unknown')[:12]}")
    redoing = ", ".join(f"{s} {v}" for s, v in dropped) or "nothing (no later result yet)"
    was = (old.content_sha256 or "not recorded")[:12]
    return [f"{variant}: checkpoint rebuilt on this machine differs from the one the run used (sha256 {was} -> "
            f"{(new.content_sha256 or '?')[:12]}): redoing {redoing}"]


def plan_path(plan, variant: str) -> str:
    return next(vp.model_path for vp in plan.variants if vp.variant.name == variant)
