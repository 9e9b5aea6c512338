"""The run and the policy, before any number: is the run what its recipe describes, does the policy name what the
run has (``suite.analysis.gate`` reports each problem as bad input)."""

from __future__ import annotations

import math

from pydantic import ValidationError

from suite.recipe import DEFAULTS, PER_TASK, GateSpec, Recipe
from suite.analysis.paired import is_perplexity_metric
from suite.analysis.gates.base import FIX_SUMMARY
from suite.records.summary import RunSummary, VariantSummary
from suite.records.evaluate import EvaluateResult


def structure(s: RunSummary, src: str, bad):
    """(the baseline, the run's recipe); the baseline None when the run is not what its recipe describes, and the
    recipe None when its copy is not valid (problems through ``bad``)."""
    fix = FIX_SUMMARY
    names = [v.name for v in s.variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        bad("variants", f"variant name(s) repeated: {', '.join(dupes)}", fix)
    if not s.finished:
        bad("finished", "the run has no finish time: it did not complete", "finish it with `suite run --resume RUN`")
    bases = [v for v in s.variants if v.is_baseline]
    if not bases:
        bad("variants", "no variant is the baseline (is_baseline): nothing to compare against", fix)
    elif len(bases) > 1:
        bad("variants", f"{len(bases)} baselines ({', '.join(v.name for v in bases)}); a run has one", fix)
    try:
        recipe = Recipe.model_validate(s.recipe)
    except ValidationError as e:
        first = e.errors()[0]
        bad("recipe", f"the run's recipe copy is not a valid recipe: {'.'.join(map(str, first['loc']))}: "
                      f"{first['msg']}", fix)
        return None, None
    if s.recipe_name != recipe.name:
        bad("recipe_name", f"{s.recipe_name!r} but the recipe is named {recipe.name!r}", fix)
    if bases and bases[0].name != recipe.baseline.name:
        bad(f"{bases[0].name}", f"marked the baseline, but the recipe's baseline is {recipe.baseline.name!r}", fix)
    in_recipe = [v.name for v in recipe.all_variants()]
    for name in names:
        if name not in in_recipe:
            bad(name, f"a variant the recipe does not have (it has: {', '.join(in_recipe)})", fix)
    for name in in_recipe:
        if name not in names:
            bad(name, "a variant of the recipe that the run does not report: it would go unjudged", fix)
    tasks = [t.name for t in recipe.eval.tasks]
    if sorted(s.tasks) != sorted(tasks):
        bad("tasks", f"the run lists tasks [{', '.join(s.tasks)}] but its recipe evaluates [{', '.join(tasks)}]", fix)
    return (bases[0] if len(bases) == 1 and not dupes else None), recipe


def policy_problems(policy: GateSpec, tasks: list[str], psrc: str, bad) -> None:
    fix_task = "gate only the tasks the run evaluated, or evaluate the task (eval.tasks)"
    for name in PER_TASK:
        for task, value in getattr(policy, name).items():
            if task not in tasks:
                bad(f"{name}.{task}", f"a gate on a task the run did not evaluate (it evaluated: "
                                      f"{', '.join(tasks) or 'no tasks'})", fix_task)
            if not math.isfinite(value):
                bad(f"{name}.{task}", f"threshold {value} is not a finite number", "give a finite threshold")
    for name, value in policy.model_dump().items():
        if isinstance(value, float) and not math.isfinite(value):
            bad(name, f"threshold {value} is not a finite number", "give a finite threshold")
    if not tasks:
        for name in DEFAULTS:
            if getattr(policy, name) is not None:
                bad(name, "an accuracy gate, but the run evaluated no tasks: it would check nothing", fix_task)


def perplexity_tasks(s: RunSummary, base: VariantSummary, bad) -> list[str]:
    """The run's tasks whose headline metric is a perplexity (lower is better), as the baseline scored them;
    a variant that scored one of them as the other kind is a problem."""
    evaluations = [ev for v in s.variants if (ev := v.result(EvaluateResult))]
    kinds = {t: {is_perplexity_metric(sc.metric) for ev in evaluations for sc in ev.scores if sc.task == t}
             for t in s.tasks}
    for t, k in kinds.items():
        if len(k) > 1:
            bad(f"evaluate.scores.{t}", "scored as a perplexity by some variants and as an accuracy by others",
                FIX_SUMMARY)
    base_ev = base.result(EvaluateResult)
    base_scores = {sc.task: sc.metric for sc in base_ev.scores} if base_ev else {}
    return [t for t in s.tasks if is_perplexity_metric(base_scores.get(t))]


def perplexity_policy_problems(policy: GateSpec, ppl_tasks: list[str], bad) -> None:
    for name in PER_TASK:
        for task in getattr(policy, name):
            if task in ppl_tasks:
                bad(f"{name}.{task}", "an accuracy gate on a perplexity task (lower is better): it would read a rise "
                    "in perplexity as a gain", "gate it with max_perplexity_increase")
    if policy.max_perplexity_increase is not None and not ppl_tasks:
        bad("max_perplexity_increase", "the run evaluated no perplexity task (word_perplexity, byte_perplexity or "
            "bits_per_byte, as its baseline scored them): it would check nothing",
            "add suite_longppl to eval.tasks, or drop the gate")
