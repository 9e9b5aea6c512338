"""Every verdict input bound to its job: the run folder's plan.json names the jobs the run was to make (variant, stage,
config); each stage result must be the one its job made, and every planned evaluation task is judged or reported
missing.

A stage result is bound when its ``job`` (``records.base.JobStamp``, written by the stage process in the same write as
the result) names this variant and stage and a content key (the result's own key field, the same), when the config file
beside it (``variants/<v>/<stage>.config.json``) has the sha256 the job recorded, and when that config is the plan's for
the job (but for where it writes and what a prerequisite stage passed on: ``planner.with_results`` adds engine
arguments). A result made for another variant, another config or with no key is not judged: bad input, naming it. A
planned job with no result (its variant recorded no error that explains it) and a planned task missing from the
summary or from a variant's scores are reported missing: bad input, never dropped in silence. Each result is read by
``plan.results.read_result``, the reader ``analysis.derive.summarize`` files results with (one reader, one answer).

What it cannot see: plan.json, configs and results rewritten together; ``suite gate --verify`` (the signed manifest)
covers that."""

from __future__ import annotations

import hashlib
from pathlib import Path

from suite.plan import results
from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.records.evaluate import EvaluateResult

PLAN = "plan.json"
FIX_RERUN = ("rerun the job: `suite run --resume RUN_DIR` runs again every job whose result is missing or records no "
             "key")
FIX_FOLDER = "gate the run folder as `suite run` left it (`suite gate --verify` checks it against its manifest)"
# where a job writes, what a prerequisite stage passes on to it and a checkpoint's provenance (the recipe it was
# first built for, saved beside it: not in its content key, so a resume after an accepted recipe change keeps it):
# not part of what decides the result; nor is the record format's version (suite.records.migrate), which the config file
# carries and plan.json's copy need not
NOT_PLANNED = ("output_dir", "engine_args", "batch_limits", "provenance", "schema_version")


def read_json(path: Path) -> tuple[object, str | None]:
    """(the parsed JSON of a regular file within the safe reader's record cap, None) or (None, why it cannot be read)."""
    try:
        if not path.exists():
            return None, "missing"
        return safeio.read_json(path, "record"), None  # a regular file within the record cap, its nesting bounded
    except SuiteError as e:
        return None, e.problems[0].message
    except (OSError, ValueError, RecursionError) as e:
        return None, f"not readable JSON: {type(e).__name__}: {str(e)[:200]}"


def _differ(ran, planned, where: str = "") -> list[str]:
    """The dotted fields where the config a job ran differs from the plan's (NOT_PLANNED left out)."""
    if isinstance(ran, dict) and isinstance(planned, dict):
        out = []
        for k in sorted(set(ran) | set(planned), key=str):
            if k not in NOT_PLANNED:
                out += _differ(ran.get(k), planned.get(k), f"{where}.{k}" if where else str(k))
        return out
    return [] if ran == planned else [where or "(the whole config)"]


def _planned_tasks(config: dict) -> list[str]:
    """The task names of an evaluation config (a served evaluation's, nested one level down, too)."""
    for c in [config, *(v for v in config.values() if isinstance(v, dict))]:
        if isinstance(c.get("tasks"), list):
            return [t["name"] for t in c["tasks"] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    return []


class Binding:
    """The checks of one run folder against its plan; ``problems`` collects what is wrong."""

    def __init__(self, summary, folder: Path):
        self.s, self.folder = summary, Path(folder)
        self.problems: list[Problem] = []
        self.unjudged: set[str] = set()  # variants with a result not judged: their scores are not read again

    def bad(self, file: str, field: str, what: str, fix: str) -> None:
        self.problems.append(Problem(file, field, what, fix))

    def check(self) -> list[Problem]:
        plan, why = read_json(self.folder / PLAN)
        planned = plan.get("variants") if isinstance(plan, dict) else None
        if not isinstance(planned, dict) or not planned:
            self.bad(str(self.folder / PLAN), "variants", f"the run's plan is {why or 'not a plan (no variants)'}: "
                     "what the run was to measure cannot be known, so nothing is judged", FIX_FOLDER)
            return self.problems
        by_name = {v.name: v for v in self.s.variants}
        src = str(self.folder / "summary.json")
        for name in planned:
            if name not in by_name:
                self.bad(src, f"variants.{name}", "planned (plan.json) but missing from the summary", FIX_FOLDER)
        tasks: list[str] = []
        for v in self.s.variants:
            stages = planned.get(v.name)
            if not isinstance(stages, dict):
                self.bad(src, f"variants.{v.name}", "not a variant of the run's plan (plan.json)", FIX_FOLDER)
                continue
            for stage, config in stages.items():
                if isinstance(config, dict) and results.is_stage(stage):  # beside them: model_path, checkpoint
                    tasks += self.job(v, stage, config)
        self.tasks(dict.fromkeys(tasks), src)
        return self.problems

    def job(self, v, stage: str, config: dict) -> list[str]:
        """Check the result of ``v``'s planned ``stage`` job; the tasks it was planned to score."""
        vdir = self.folder / "variants" / v.name
        rel = f"variants/{v.name}/{stage}.result.json"
        want = _planned_tasks(config)
        res, why = results.read_result(vdir, stage)  # the reader summarize files results with
        if res is None:
            if why is not None:
                self.unjudged.add(v.name)
                self.bad(str(vdir / f"{stage}.result.json"), "", f"the {stage} result is not judged: {why}", FIX_RERUN)
            elif not v.errors:  # a variant whose stages failed says so itself (its failure)
                self.unjudged.add(v.name)
                self.bad(rel, "", f"{v.name}'s planned {stage} job has no result: missing, nothing to judge",
                         FIX_RERUN)
            return want
        job = res.job
        key = getattr(res, "key", None) or getattr(res, "cache_key", None)
        if job is None or not job.key or not key:
            self.bad(rel, "job", "records no job or content key: which job made it cannot be known, so it is not "
                     "judged", FIX_RERUN)
            return want
        if job.variant != v.name or job.stage != stage:
            self.bad(rel, "job", f"was made by {job.variant}'s {job.stage} job, not {v.name}'s "
                     f"{stage}: a result made for another job is not judged", FIX_RERUN)
        elif job.key != key:
            self.bad(rel, "job.key", f"{job.key} but the result records {key}: not judged", FIX_RERUN)
        self.config(v, stage, config, job.config_sha256)
        if want and not v.errors and (lacking := [t for t in want if t not in results.scored_tasks(res)]):
            self.bad(rel, "scores", f"no score for {', '.join(lacking)}, which the plan has {v.name} evaluate: "
                     "missing", FIX_RERUN)
        return want

    def config(self, v, stage: str, planned: dict, config_sha256: str) -> None:
        """The config file beside the result: the one the job recorded (sha256) and the plan's."""
        path = self.folder / "variants" / v.name / f"{stage}.config.json"
        rel = f"variants/{v.name}/{stage}.config.json"
        try:
            raw = safeio.read_bytes(path, "record") if path.exists() else None
        except (OSError, SuiteError):
            raw = None
        if raw is None:
            self.bad(rel, "", f"the config {v.name}'s {stage} job ran is missing or unreadable: its result cannot "
                     "be bound to it", FIX_RERUN)
            return
        if hashlib.sha256(raw).hexdigest() != config_sha256:
            self.bad(rel, "", f"is not the config the {stage} result was made with (its sha256 differs from the "
                     "job's config_sha256): not judged", FIX_RERUN)
            return
        ran, why = read_json(path)
        if differ := _differ(ran, planned):
            self.bad(rel, ", ".join(differ[:6]) + (" ..." if len(differ) > 6 else ""),
                     f"differs from {v.name}'s planned {stage} job (plan.json): a result made for another config is "
                     "not judged", FIX_RERUN)

    def tasks(self, planned: dict, src: str) -> None:
        """The summary evaluates exactly the planned tasks, and each variant without errors scored each of them."""
        have = list(self.s.tasks)
        if lacking := [t for t in planned if t not in have]:
            self.bad(src, "tasks", f"{', '.join(lacking)} planned (plan.json) but missing from the summary: never "
                     "dropped in silence", FIX_FOLDER)
        if extra := [t for t in have if t not in planned]:
            self.bad(src, "tasks", f"{', '.join(extra)} not planned (plan.json)", FIX_FOLDER)
        for v in self.s.variants:
            ev = v.result(EvaluateResult)
            scored = {sc.task for sc in ev.scores} if ev is not None else set()
            if planned and not v.errors and v.name not in self.unjudged and (lacking := [t for t in planned
                                                                                         if t not in scored]):
                self.bad(src, f"{v.name}: evaluate.scores", f"no score for {', '.join(lacking)} (planned): missing",
                         FIX_FOLDER)
