"""A planned job's result as the run folder holds it: read with its job stamp, and filed into its variant's summary.

The runner files each result as its job ends; ``suite.analysis.derive.summarize`` files those of a finished folder.
Both go through here, so a result lands in the same place of the summary either way."""

from __future__ import annotations

from pathlib import Path

from suite.plan.configs import check_label, engine_args_as_vllm_takes_them
from suite.records.base import Record
from suite.records.evaluate import EvaluateResult
from suite.records.paths import recorded_run_dir, run_folder_of
from suite.runtime.errors import SuiteError
from suite.stages.registry import ENGINE_CHECKS, EVALUATE, STAGES, run_order


def read_result(vdir: Path, stage: str) -> tuple[Record | None, str | None]:
    """A stage's result in its variant folder, if it is there and complete (it is written atomically, so
    one that parses is whole), else (None, why it does not parse) or (None, None) when there is none."""
    path = vdir / f"{stage}.result.json"
    if not (path.exists() or path.is_symlink()):  # anything else there (a FIFO, a link to a device): the reader says
        return None, None
    try:
        run_dir = run_folder_of(vdir)
        return STAGES[stage].result.read(path, root=run_dir, recorded=recorded_run_dir(run_dir)), None
    except ValueError as e:
        return None, f"its result file does not parse: {str(e).splitlines()[0]}"
    except SuiteError as e:  # the safe reader's refusal: not a regular file, over its size or nesting cap
        return None, f"its result file cannot be read: {e.problems[0].message}"


def is_stage(name: str) -> bool:
    """Whether ``name`` is a registered stage (plan.json's variant entries hold other fields beside its stages)."""
    return name in STAGES


def variant_results(vdir: Path) -> list[tuple[str, Record | None, str | None]]:
    """(stage, result or None, why it does not parse) for every stage in run order, as ``read_result`` gives them."""
    return [(stage, *read_result(vdir, stage)) for stage in run_order()]


def scored_tasks(result) -> set[str]:
    """The tasks a stage result scores: an evaluation's, or those of the evaluation a served benchmark carries."""
    return {sc.task for r in (result, getattr(result, EVALUATE, None)) for sc in getattr(r, "scores", None) or []}


def record(vs, stage: str, result, vp=None) -> None:
    """A stage's result into its variant's summary (a result that carries an evaluation, a served benchmark's, also
    gives the variant's evaluation; an eval.engine_check evaluation goes into engine_checks under its label, which
    ``vp.check_label(stage)`` gives: a ``VariantPlan`` or ``CheckLabels``)."""
    if vp is not None and (label := vp.check_label(stage)) is not None:
        vs.engine_checks[label] = result
        return
    vs.stages[stage] = result
    if stage != EVALUATE and (served := evaluation_of(stage, result, vp)) is not None:
        vs.stages[EVALUATE] = served


def evaluation_of(stage: str, result, vp=None) -> EvaluateResult | None:
    """The evaluation a stage's result gives its variant: an evaluation's own, the one a served benchmark carries;
    None for any other result and for an eval.engine_check's (``vp.check_label(stage)``: not the variant's scores)."""
    if vp is not None and vp.check_label(stage) is not None:
        return None
    if stage == EVALUATE:
        return result if isinstance(result, EvaluateResult) else None
    # a check stage's evaluation (the served check's first items) is not the variant's: only a result that carries one
    return served if isinstance(served := getattr(result, EVALUATE, None), EvaluateResult) else None


class CheckLabels:
    """The engine-check stages' labels as the planner gives them (``VariantPlan.check_label``'s question), from the
    recipe's eval.engine_check, so that a summary made from the folder files each check under the label the run
    used."""

    def __init__(self, recipe):
        configs = recipe.eval.engine_check_configs() if recipe.eval.engine_check is not None else []
        self.labels = dict(zip(ENGINE_CHECKS, (check_label(engine_args_as_vllm_takes_them(c)) for c in configs)))

    def check_label(self, stage: str) -> str | None:
        return self.labels.get(stage)
