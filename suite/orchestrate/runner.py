"""The runner: the job loop of one run (each stage job a process of its own), then the run's outputs.

Data flows one way: recipe -> plan (suite.plan) -> stage results (JSON files in the run folder) ->
summary.json (suite.analysis.summary) -> frontier.png, report.html, MLflow (suite.outputs.publish).
A failed stage does not stop the run: the variant records the error (and its log's tail), its later
stages are skipped, and the other variants go on.

Run folder layout (``<output_dir>/<timestamp>-<recipe>[-N]/``, suite.orchestrate.rundir):
  recipe.yaml, plan.json, summary.json, report.html, frontier.png (when a variant has both an accuracy
  and a throughput figure), run.lock (while a run of it is alive: suite.orchestrate.lock)
  variants/<name>/{quantize,evaluate,benchmark}.{config.json,result.json,log}
  variants/<name>/evaluate/  lm_eval results and samples (lm-eval's own file names)
  variants/<name>/benchmark/ bench-<point>.json, server.log
Quantized checkpoints live in ``<output_dir>/checkpoints/<scheme>[-kv]-<key>/`` (named by content: two
variants with the same quantization share one) and are reused across runs; finished evaluations in
``<output_dir>/eval-cache/<key>/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from suite.analysis import summary as summaries
from suite.orchestrate import envs, jobs, rundir
from suite.outputs.publish import now, publish
from suite.stages.evaluate import preflight

if TYPE_CHECKING:
    from suite.recipe import LoadedRecipe

Reporter = Callable[[str, str, str], None]  # (stage, variant, event) with event in start|ok|failed|skipped|resumed|cached


def execute(loaded: LoadedRecipe, out_root: Path | None = None, report: Reporter | None = None,
            track: bool = True, force: bool = False, resume: Path | None = None) -> "summaries.RunSummary":
    """Run a recipe's plan in a new run folder, or with ``resume`` continue the run in that folder: stage
    results already there are kept (event 'resumed'), the other jobs run. The folder is locked
    (``run.lock``) for as long as this runs: a resume refuses while a run of it, or a stage of one, is alive."""
    report = report or (lambda stage, variant, event: None)
    if resume:
        run_dir = resume.resolve()
        out_root = out_root or run_dir.parent  # where its checkpoints/ and eval-cache/ are
    else:
        out_root = out_root or loaded.resolve(loaded.recipe.output_dir)
        run_dir = rundir.new_run_dir(loaded, out_root)
    lock = rundir.acquire_run_lock(run_dir)
    try:
        if not resume:
            shutil.copy(loaded.path, run_dir / "recipe.yaml")
        return _execute(loaded, run_dir, out_root, lock, report, track, force, resume)
    finally:
        lock.release()


def _execute(loaded: LoadedRecipe, run_dir: Path, out_root: Path, lock, report: Reporter, track: bool, force: bool,
             resume: Path | None) -> "summaries.RunSummary":
    r = loaded.recipe
    plan, kept = rundir.prepare(loaded, run_dir, out_root, resume is not None)
    env = envs.stage_env(plan.env)
    quantizes = any(vp.quantize for vp in plan.variants)
    earlier = summaries.RunSummary.read(run_dir / "summary.json") if resume and (run_dir / "summary.json").is_file() else None
    summary = summaries.start(loaded, plan, run_dir, platform=envs.vllm_platform() if not earlier else "",
                              versions=envs.run_versions(quantize=quantizes) if not earlier else {}, earlier=earlier,
                              started=now())
    if lock.taken_over:
        t = lock.taken_over
        summary.warnings.append(f"took over the run lock of `suite run` pid {t.get('pid')} on {t.get('host')} "
                                "(no longer running here); results its stages may still write are refused")
    by_name = {v.name: v for v in summary.variants}
    plans = {vp.variant.name: vp for vp in plan.variants}
    totals: dict[str, float] = {}
    checked = False
    for stage, name in plan.jobs():
        if stage != "quantize" and not checked:  # every checkpoint exists now: same prompts for all?
            summary.warnings += preflight.run(summary.variants)
            checked = True
        vs = by_name[name]
        if vs.errors:
            report(stage, name, "skipped")
            continue
        if (stage, name) in kept:
            setattr(vs, stage, kept[stage, name])
            totals[stage] = totals.get(stage, 0.0) + getattr(kept[stage, name], "wall_s", 0.0)
            report(stage, name, "resumed")
            continue
        report(stage, name, "start")
        result, error, wall, note = jobs.run_job(stage, plans[name], vs, run_dir, out_root, env, force, lock)
        totals[stage] = totals.get(stage, 0.0) + wall
        if note:
            summary.warnings.append(f"{name}: {note}")
        if error:
            vs.errors.append(error)
            report(stage, name, "failed")
            continue
        setattr(vs, stage, result)
        report(stage, name, "cached" if getattr(result, "cache_hit", False) else "ok")

    summaries.finish(summary, r, envs.run_versions(summary.variants, quantize=quantizes), totals)
    publish(summary, run_dir, out_root, track, resumed=resume is not None, report=report)
    return summary
