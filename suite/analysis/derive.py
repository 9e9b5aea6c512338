"""The one builder of a run's summary: ``summarize(run_dir)``, a pure function of the run folder's records.

It reads recipe.yaml, plan.json (the planned variants and jobs), run.json (``records.summary.RunFacts``: what the
runner knew that the stage results do not say: when, where, versions, each variant's errors, the run's warnings),
jobs.json (when each job ran) and ``variants/<name>/<stage>.result.json``, and makes the ``RunSummary`` with the
current analysis code (``suite.analysis.assemble.finish``). It writes nothing. The runner's closing summary, `suite
summarize` (which publishes it), `suite gate`, the report, `suite compare`, ``suite.load_run`` and MLflow all take
the summary from here; summary.json is a cache of it and never an input.

A folder without run.json: an interrupted run (each planned job without a result is an error of its variant, so no
gate passes it), or one from before run.json was written, whose summary.json then holds the runner's facts (its
errors, warnings, versions: read as an older record, upgraded; its metrics and results are never read).

An archived folder (the studies' collect step) keeps ``variants/<v>/evaluate/items.jsonl.gz`` in place of lm-eval's
samples file: the same rows cut to task, doc_id, filter and the scores, gzipped. Where a result's samples file is gone
and its folder holds such a file (and the result names no other samples file in that folder: one items file a
folder), the paired comparisons read it instead (``suite.analysis.paired.item_scores`` reads gzip), for accuracy
tasks only (a perplexity task pairs what the items file does not keep); the summary keeps the recorded paths and
says in a warning which files were read (``ARCHIVED``). Anything else missing is refused, naming the file.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import yaml
from pydantic import ValidationError

from suite.analysis import summary as summaries
from suite.analysis.assemble import finish
from suite.analysis.load import load_summary, with_tracking
from suite.analysis.paired import is_perplexity_metric, item_scores
from suite.plan.keys import brought_sha256
from suite.plan.planner import VariantPlan, make_plan
from suite.plan.results import CheckLabels, record, variant_results
from suite.recipe.load import load_run_recipe
from suite.recipe.loaded import LoadedRecipe
from suite.recipe.schema import Recipe
from suite.records.paths import recorded_run_dir
from suite.records.summary import RUN_FACTS, RunFacts, RunSummary, VariantSummary
from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.version import __version__
from suite.records.evaluate import EvaluateResult

ITEMS_FILE = "items.jsonl.gz"  # an archived evaluate folder's per-item scores (see the module docstring)
ARCHIVED = "archived run folder: the paired comparisons read"  # the start of the warning that says so
JOBS = "jobs.json"
CACHE = "summary.json"
# what publish and tracking add to a summary, and timings: not figures of the run's records
_NOT_FIGURES = {"artifacts", "tracking", "tracking_pending", "run_dir", "stage_wall_s", "stage_elapsed_s"}
# said by `suite gate` when summary.json (a cache of ``summarize``, written by publish) is not what the folder gives
CACHE_DIFFERS = ("summary.json is not what the run folder's records give: judged on the records; `suite summarize "
                 "{run}` rewrites it")


def summarize(run_dir: Path) -> RunSummary:
    """The run folder's summary, made from its records with the current analysis code; nothing is written."""
    run_dir = Path(run_dir).resolve()
    loaded, said = _run_recipe(run_dir)
    facts = run_facts(run_dir)
    plan = _read_plan(run_dir)
    summary = blank(loaded, run_dir, _variants(loaded, run_dir, plan, facts),
                    started=facts.started if facts else _started(run_dir),
                    platform=facts.platform if facts else "", versions=facts.versions if facts else {})
    planned = {tuple(j) for j in plan.get("jobs", []) if isinstance(j, (list, tuple))}
    totals: dict[str, float] = {}
    checks = CheckLabels(loaded.recipe)
    for v in summary.variants:
        for stage, result, bad in variant_results(run_dir / "variants" / v.name):
            if result is not None:
                record(v, stage, result, checks)  # an engine check's result goes under its label
                totals[stage] = totals.get(stage, 0.0) + getattr(result, "wall_s", 0.0)
            elif bad is not None or ((stage, v.name) in planned and facts is None):  # one there but unreadable: lost
                v.errors.append(f"{stage} not finished: " + (bad or f"no {stage}.result.json in the run folder"))
    try:
        with _items_in_place_of_samples(summary) as read:
            summary = finish(summary, loaded.recipe, summary.versions, totals)
    except FileNotFoundError as e:  # an archived folder whose per-item samples were packed or left out
        raise SuiteError(Problem(str(e.filename), "", "a stage result names this file and it is not in the run folder",
                                 f"restore the run folder's stage files (the paired comparisons read every sample; "
                                 f"an {ITEMS_FILE} beside a gone samples file stands in for it when it is the only one "
                                 "its result names in that folder)")) from None
    names = sorted({_relative(f, run_dir) for f in read})
    archived = [f"{ARCHIVED} {len(names)} {ITEMS_FILE} file(s) in place of lm-eval's samples files, which are not in "
                f"the folder (the same per-item scores): {', '.join(names)}"] if names else []
    runner = [w for w in facts.warnings if not w.startswith(ARCHIVED)] if facts else []
    jobs = safeio.read_json(run_dir / JOBS, "record").get("jobs", []) if (run_dir / JOBS).is_file() else None
    return summary.model_copy(update={
        "warnings": list(dict.fromkeys(runner + said + summary.warnings + archived)),  # the runner's, then the analysis'
        "finished": facts.finished if facts else None,
        "recipe_sha256": facts.recipe_sha256 if facts else "",  # recorded by the run, never recipe.yaml's own
        # the runner's measure of each job (a kept result: its own wall_s)
        "stage_wall_s": {**summary.stage_wall_s, **(facts.stage_wall_s if facts else {})},
        "recipe_changed_on_resume": list(facts.recipe_changed_on_resume) if facts else [],
        "stage_elapsed_s": elapsed_by_stage(jobs) if jobs is not None else summary.stage_elapsed_s})


def start(loaded, plan, run_dir, platform: str, versions: dict[str, str], earlier: RunSummary | None = None,
          started: str | None = None) -> RunSummary:
    """The runner's summary before any stage ran, which its job loop files results into (what a job passes on to the
    next): one ``VariantSummary`` per planned variant (``plan``: a ``Plan``), from its recipe section. ``earlier``:
    the summary of the run a resume continues (it keeps where and with what its stages ran). Its closing summary is
    ``summarize``'s."""
    e = earlier
    return blank(loaded, run_dir, [summaries.variant_summary(vp, brought_sha256(vp)) for vp in plan.variants],
                 e.started if e else started, e.platform if e else platform, e.versions if e else versions)


def blank(loaded, run_dir, variants: list[VariantSummary], started, platform: str, versions: dict) -> RunSummary:
    """A summary of ``variants`` (before their stages' results) for the recipe ``loaded`` in ``run_dir``."""
    r = loaded.recipe
    return RunSummary(suite_version=__version__, recipe_name=r.name, recipe_path=str(loaded.path),
                      recipe_sha256=loaded.sha256, recipe=r.model_dump(mode="json"), run_dir=str(run_dir),
                      started=started, platform=platform, versions=versions, tasks=[t.name for t in r.eval.tasks],
                      variants=variants, artifacts={"recipe": str(run_dir / "recipe.yaml")})


def cache_differs(summary: RunSummary, run_dir: Path) -> bool:
    """Whether the run folder's summary.json (when there is one) differs from ``summary`` (``summarize``'s) in any
    figure: anything but what publish and tracking add (``_NOT_FIGURES``). One that cannot be read differs."""
    if not ((Path(run_dir) / CACHE).exists() or (Path(run_dir) / CACHE).is_symlink()):
        return False
    try:
        cached = load_summary(str(Path(run_dir) / CACHE))
    except SuiteError:
        return True
    return _figures(cached) != _figures(summary)


def read_run(run_dir: Path) -> RunSummary:
    """The run folder's summary as every command reads it: ``summarize``'s, with tracking.json's state laid over it
    (where MLflow has the run) and the output files the last publish recorded that are in the folder (summary.json's
    ``artifacts``: file names for the report and MLflow, never a figure)."""
    summary = with_tracking(summarize(run_dir), run_dir)
    try:
        cached = load_summary(str(Path(run_dir) / CACHE)) if (Path(run_dir) / CACHE).is_file() else None
    except SuiteError:
        cached = None
    folder = Path(summary.run_dir)
    made = {k: f for k, f in (cached.artifacts if cached else {}).items()
            if Path(f).is_file() and Path(f).resolve().is_relative_to(folder)}
    return summary.model_copy(update={"artifacts": {**made, **summary.artifacts}})


def _figures(summary: RunSummary) -> str:
    """What a verdict may read of a summary, as one comparable text (NaN included)."""
    return json.dumps(summary.model_dump(mode="json", exclude=_NOT_FIGURES), sort_keys=True, default=str)

def _run_recipe(run_dir: Path) -> tuple[LoadedRecipe, list[str]]:
    """The run's recipe as a record (recipe.yaml: parsed, not checked against this machine) and what to say of it; a
    folder from before recipe.yaml (and run.json) were kept: the recipe copy its summary.json recorded, said in a
    warning."""
    if (run_dir / "recipe.yaml").exists() or (run_dir / RUN_FACTS).exists() or not (run_dir / CACHE).is_file():
        return load_run_recipe(run_dir, references=False), []
    older = _record(RunSummary, run_dir / CACHE, run_dir)
    try:
        recipe = Recipe.model_validate(older.recipe)
    except ValidationError as e:
        first = e.errors()[0]
        raise SuiteError(Problem(str(run_dir / CACHE), "recipe", f"no recipe.yaml, and the recipe copy is not a recipe "
                                 f"this version reads: {'.'.join(map(str, first['loc']))}: {first['msg']}",
                                 "run the recipe again (`suite run`)")) from None
    text = yaml.safe_dump(older.recipe, sort_keys=False)
    return LoadedRecipe(recipe=recipe, path=Path(older.recipe_path), text=text), [
        "no recipe.yaml in the run folder (made before it was kept): summarized from the recipe copy in summary.json"]


def run_facts(run_dir: Path) -> RunFacts | None:
    """run.json, or for a folder from before it was written the runner's facts its summary.json recorded (an older
    record: only started, finished, the recipe's sha256, platform, versions, each variant's errors, tokenizer and
    model_sha256, and the warnings are taken); None for neither (an interrupted run)."""
    if (run_dir / RUN_FACTS).exists() or (run_dir / RUN_FACTS).is_symlink():  # the safe reader refuses a non-file
        return _record(RunFacts, run_dir / RUN_FACTS, run_dir)
    if not (run_dir / CACHE).is_file():
        return None
    older = _record(RunSummary, run_dir / CACHE, run_dir)
    return RunFacts(started=older.started, finished=older.finished, recipe_sha256=older.recipe_sha256,
                    platform=older.platform, versions=older.versions,
                    errors={v.name: v.errors for v in older.variants if v.errors},
                    tokenizer={v.name: v.tokenizer for v in older.variants if v.tokenizer},
                    model_sha256={v.name: v.model_sha256 for v in older.variants if v.model_sha256},
                    warnings=older.warnings, recipe_changed_on_resume=older.recipe_changed_on_resume,
                    stage_wall_s={k: s for k, s in older.stage_wall_s.items() if k != "track"})


def _variants(loaded, run_dir: Path, plan: dict, facts: RunFacts | None) -> list:
    """Each planned variant's summary before its results: the recipe's variant served from the model plan.json
    recorded for it (an older folder's: its summary.json's; re-planned from the recipe where neither says), with the
    runner's facts."""
    r = loaded.recipe
    recorded = plan.get("variants") if isinstance(plan.get("variants"), dict) else {}
    if not all(isinstance(recorded.get(v.name), dict) and recorded[v.name].get("model_path") for v in r.all_variants()):
        recorded = _older_variants(run_dir)  # a plan.json from before it recorded them
    if all(v.name in recorded for v in r.all_variants()):
        plans = [VariantPlan(v, v is r.baseline, recorded[v.name]["model_path"],
                             checkpoint=recorded[v.name].get("checkpoint")) for v in r.all_variants()]
    else:  # neither says: the recipe planned again (the stage environments asked, as `suite run` does)
        plans = make_plan(loaded, run_dir, run_dir.parent / "checkpoints").variants
    out = []
    for vp in plans:
        name = vp.variant.name
        vs = summaries.variant_summary(vp, facts.model_sha256.get(name) if facts else None)
        if facts:
            vs.errors, vs.tokenizer = list(facts.errors.get(name, [])), dict(facts.tokenizer.get(name, {}))
        out.append(vs)
    return out


def _record(kind, path: Path, run_dir: Path):
    """A record of the run folder (``kind``: its Record type) read, or a SuiteError naming the file."""
    try:
        return kind.read(path, root=run_dir, recorded=recorded_run_dir(run_dir))
    except (ValueError, OSError) as e:
        raise SuiteError(Problem(str(path), "", f"not a readable {kind.__name__} record: {str(e).splitlines()[0]}",
                                 "restore the run folder as `suite run` left it")) from None


def _older_variants(run_dir: Path) -> dict[str, dict]:
    """Each variant's model as an older folder's summary.json recorded it ({} without one)."""
    if not (run_dir / CACHE).is_file() or (run_dir / RUN_FACTS).is_file():
        return {}
    older = _record(RunSummary, run_dir / CACHE, run_dir)
    return {v.name: {"model_path": v.model_path} for v in older.variants}


def _read_plan(run_dir: Path) -> dict:
    try:
        plan = safeio.read_json(run_dir / "plan.json", "record")
    except (OSError, ValueError):
        return {}
    return plan if isinstance(plan, dict) else {}


def _started(run_dir: Path) -> str:
    """When the run began: plan.json is written then (it records no start time of its own)."""
    return datetime.fromtimestamp((run_dir / "plan.json").stat().st_mtime, timezone.utc).isoformat(timespec="seconds")


def elapsed_by_stage(timeline: list[dict]) -> dict[str, float]:
    """Each stage's elapsed time in this run: the length of the union of its jobs' [start, end] intervals (jobs that
    overlap count once; kept results of a resumed run, which did not run, count nothing)."""
    out: dict[str, float] = {}
    for stage in dict.fromkeys(row["stage"] for row in timeline):
        spans = sorted((row["started_s"], row["ended_s"]) for row in timeline if row["stage"] == stage)
        total, end = 0.0, float("-inf")
        for a, b in spans:
            if b > end:
                total += b - max(a, end)
                end = b
        out[stage] = round(total, 3)
    return out


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
            for ev in [v.result(EvaluateResult), *v.engine_checks.values(), v.check_result(EvaluateResult)]:
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
        raise SuiteError(Problem(str(items), "", f"an archived items file that cannot be read, standing in for the gone "
                                 f"{samples.name}: {str(e).removeprefix(str(items) + ': ')}",
                                 f"restore {samples.name} or the archive's {ITEMS_FILE}")) from None


def _relative(path: str, run_dir: Path) -> str:
    try:
        return Path(path).relative_to(run_dir).as_posix()
    except ValueError:
        return path
