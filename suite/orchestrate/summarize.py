"""A run folder's summary rebuilt from its stage results (``suite summarize RUN_DIR``): no stage runs.

``summarize(run_dir)`` reads what the runner left in the folder (recipe.yaml, plan.json, jobs.json,
``variants/<name>/<stage>.result.json``, the summary.json of an earlier publish when there is one) and makes the
``RunSummary`` with the current analysis code (suite.analysis.summary.finish): a partial run (interrupted, no
summary.json yet) too, each planned job without a result then an error of its variant, so no gate passes it.
``rebuild(run_dir)`` also writes summary.json and the report (suite.outputs.publish, without tracking).

An archived folder (the studies' collect step) keeps ``variants/<v>/evaluate/items.jsonl.gz`` in place of lm-eval's
samples file: the same rows cut to task, doc_id, filter and the scores, gzipped. Where a result's samples file is gone
and its folder holds such a file (and the result names no other samples file in that folder: one items file a
folder), the paired comparisons read it instead (``suite.analysis.paired.item_scores`` reads gzip), for accuracy
tasks only (a perplexity task pairs what the items file does not keep); the summary keeps the recorded paths and
says in a warning which files were read (``ARCHIVED``). Anything else missing is refused, naming the file.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from suite.runtime import safeio
from suite.analysis import summary as summaries
from suite.outputs import manifest
from suite.records.paths import recorded_run_dir
from suite.records.summary import RunSummary, VariantSummary
from suite.stages.registry import ENGINE_CHECKS, run_order

# what the runner and the analysis write into a variant's summary: rebuilt from the folder, never copied
_DERIVED = ("metrics", "paired", "perplexity")
ITEMS_FILE = "items.jsonl.gz"  # an archived evaluate folder's per-item scores (see the module docstring)
ARCHIVED = "archived run folder: the paired comparisons read"  # the start of the warning that says so


def summarize(run_dir: Path) -> RunSummary:
    """The run folder's summary, rebuilt from its stage results with the current analysis code."""
    from suite.orchestrate import jobs
    from suite.orchestrate.stageproc import read_result
    from suite.recipe.schema import Recipe

    run_dir = Path(run_dir).resolve()
    earlier = None
    if (run_dir / "summary.json").is_file():  # names resolved against the folder where it is now (records.paths)
        earlier = RunSummary.read(run_dir / "summary.json", root=run_dir, recorded=recorded_run_dir(run_dir))
    summary = _skeleton(run_dir, earlier)
    recipe = Recipe.model_validate(summary.recipe)
    planned = _planned_jobs(run_dir)
    totals: dict[str, float] = {}
    checks = _CheckLabels(recipe)
    for v in summary.variants:
        vdir = run_dir / "variants" / v.name
        for stage in run_order():
            path = vdir / f"{stage}.result.json"
            result, bad = read_result(vdir, stage) if path.is_file() else (None, None)
            if result is not None:
                jobs.record(v, stage, result, checks)  # an engine check's result goes under its label
                totals[stage] = totals.get(stage, 0.0) + getattr(result, "wall_s", 0.0)
            elif (there := path.exists() or path.is_symlink()) or ((stage, v.name) in planned and earlier is None):
                # a result there but unreadable is a lost stage (with or without an earlier summary): never dropped
                why = f"{path} is not a regular file" if there else f"no {stage}.result.json in the run folder"
                v.errors.append(f"{stage} not finished: {bad or why}")
    versions = summary.versions
    warnings = [w for w in summary.warnings if not w.startswith(ARCHIVED)]  # said again below if still so
    summary.warnings = []
    try:
        with _items_in_place_of_samples(summary) as read:
            summaries.finish(summary, recipe, versions, totals)
    except FileNotFoundError as e:  # an archived folder whose per-item samples were packed or left out
        from suite.runtime.errors import Problem, SuiteError

        raise SuiteError(Problem(str(e.filename), "", "a stage result names this file and it is not in the run folder",
                                 f"restore the run folder's stage files (the paired comparisons read every sample; "
                                 f"an {ITEMS_FILE} beside a gone samples file stands in for it when it is the only one "
                                 "its result names in that folder)")) from None
    if read:
        names = sorted({_relative(f, run_dir) for f in read})
        summary.warnings.append(f"{ARCHIVED} {len(names)} {ITEMS_FILE} file(s) in place of lm-eval's samples files, "
                                f"which are not in the folder (the same per-item scores): {', '.join(names)}")
    summary.warnings = list(dict.fromkeys(warnings + summary.warnings))  # the runner's, then the analysis' (once)
    if earlier is not None and "track" in earlier.stage_wall_s:
        summary.stage_wall_s["track"] = earlier.stage_wall_s["track"]
    jobs = run_dir / "jobs.json"
    if jobs.is_file():
        from suite.orchestrate.jobs import elapsed_by_stage

        summary.stage_elapsed_s = elapsed_by_stage(safeio.read_json(jobs, "record").get("jobs", []))
    return summary


def archive_notes(summary: RunSummary) -> list[str]:
    """The summary's warnings that say the paired comparisons read archived items files (``ARCHIVED``)."""
    return [w for w in summary.warnings if w.startswith(ARCHIVED)]


@contextmanager
def _items_in_place_of_samples(summary: RunSummary) -> Iterator[list[str]]:
    """While the analysis runs, each evaluation's gone samples file that an archived items file stands in for
    (``_stand_in``) names that file; the recorded paths are put back after. Yields the items files so named."""
    swapped: list[tuple[dict, str, str]] = []  # (an evaluation's samples_files, task, recorded path)
    read: list[str] = []
    try:
        for v in summary.variants:
            for ev in [v.evaluate, *v.engine_checks.values()]:
                for task, path in list((ev.samples_files if ev is not None else {}).items()):
                    if (items := _stand_in(ev, task, path)) is not None:
                        swapped.append((ev.samples_files, task, path))
                        ev.samples_files[task] = items
                        read.append(items)
        yield read
    finally:
        for files, task, path in swapped:
            files[task] = path


def _stand_in(evaluation, task: str, path: str) -> str | None:
    """The items file that stands in for ``task``'s samples file ``path`` of ``evaluation``: None where the samples
    file is there, the task is a perplexity, no items file is in its folder, another samples file of the evaluation
    is in that folder too (which task the items file holds is not known), or it holds no score of the task's
    metric. An items file that cannot be read is a SuiteError naming it."""
    from suite.analysis.paired import is_perplexity_metric, item_scores

    samples = Path(path)
    items = samples.parent / ITEMS_FILE
    metric = next((s.metric for s in evaluation.scores if s.task == task), None)
    if samples.exists() or metric is None or is_perplexity_metric(metric) or not items.is_file():
        return None
    if any(Path(p).parent == samples.parent for t, p in evaluation.samples_files.items() if t != task):
        return None
    try:
        return str(items) if item_scores(items, metric) else None
    except ValueError as e:  # planted, cut short, not gzip: refused in one line, not a traceback nor a guess
        from suite.runtime.errors import Problem, SuiteError

        raise SuiteError(Problem(str(items), "", f"an archived items file that cannot be read, standing in for the gone "
                                 f"{samples.name}: {str(e).removeprefix(str(items) + ': ')}",
                                 f"restore {samples.name} or the archive's {ITEMS_FILE}")) from None


def _relative(path: str, run_dir: Path) -> str:
    try:
        return Path(path).relative_to(run_dir).as_posix()
    except ValueError:
        return path


def _skeleton(run_dir: Path, earlier: RunSummary | None) -> RunSummary:
    """The summary before any stage result: the earlier summary's run and variant facts (what the runner recorded:
    where, with what, errors, warnings) without its stage results and metrics, else the plan's (a partial run)."""
    if earlier is not None:
        variants = [VariantSummary.model_validate({k: val for k, val in v.model_dump().items()
                                                   if k not in _DERIVED and k not in _stage_fields()})
                    for v in earlier.variants]
        return earlier.model_copy(update={"variants": variants, "run_dir": str(run_dir)})
    from suite.orchestrate import rundir
    from suite.plan.planner import make_plan

    loaded = rundir.load_run_recipe(run_dir)
    plan = make_plan(loaded, run_dir, run_dir.parent / "checkpoints")
    return summaries.start(loaded, plan, run_dir, platform="", versions={}, started=_started(run_dir))


def _started(run_dir: Path) -> str:
    """When the run began: plan.json is written then (it records no start time of its own)."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp((run_dir / "plan.json").stat().st_mtime, timezone.utc).isoformat(timespec="seconds")


def _stage_fields() -> tuple[str, ...]:
    return run_order()


def _planned_jobs(run_dir: Path) -> set[tuple[str, str]]:
    try:
        return {tuple(j) for j in safeio.read_json(run_dir / "plan.json", "record").get("jobs", [])}
    except (OSError, ValueError):
        return set()


def rebuild(run_dir: Path) -> RunSummary:
    """``summarize`` and write summary.json, the report and the other untracked outputs (tracking is left as it is:
    ``suite sync`` logs a run). Nothing is signed: a signed folder's stage records are first checked against its
    manifest.json (refused, naming each file, when they differ), which stays as the run signed it; a rebuilt
    summary.json that differs from the signed one is then refused by ``suite gate --verify``."""
    from suite.outputs.publish import publish

    manifest.check_records(run_dir)
    summary = summarize(run_dir)
    run_dir = Path(summary.run_dir)
    return publish(summary, run_dir, run_dir.parent, track=False, resumed=True, report=lambda *e: None,
                   finished=summary.finished, keep_tracking=True)


class _CheckLabels:
    """The engine-check stages' labels as the planner gives them (``VariantPlan.check_label``'s question), from the
    recipe's eval.engine_check, so that a rebuilt summary files each check under the label the run used."""

    def __init__(self, recipe):
        from suite.plan.configs import check_label, engine_args_as_vllm_takes_them

        configs = recipe.eval.engine_check_configs() if recipe.eval.engine_check is not None else []
        self.labels = dict(zip(ENGINE_CHECKS, (check_label(engine_args_as_vllm_takes_them(c)) for c in configs)))

    def check_label(self, stage: str) -> str | None:
        return self.labels.get(stage)

