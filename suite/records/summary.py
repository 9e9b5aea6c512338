"""The run's summary (summary.json): each variant's stage results, metrics and errors, and where MLflow has them."""

from __future__ import annotations

from typing import Any, Optional, TypeVar

from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator

from suite.records.evaluate import EvaluateResult
from suite.records.base import Record
from suite.records.paths import FileName
from suite.records.registry import STAGE_GROUP, RegistryError, of_group

R = TypeVar("R", bound=Record)


class VariantSummary(Record):
    name: str
    is_baseline: bool
    scheme: Optional[str] = None
    kv_cache: Optional[str] = None
    kv_cache_dtype: str = "auto"
    engine_args: dict[str, Any] = Field(default_factory=dict)
    model_path: str
    model_sha256: Optional[str] = Field(None, description="a variant served from a local folder as it is (a brought "
                                        "checkpoint): the sha256 of its files when the run began (weights_fingerprint),"
                                        " what `suite gate` registers it by on a machine without the folder")
    stages: dict[str, SerializeAsAny[Record]] = Field(
        default_factory=dict, description="each stage's result by the stage registry's name (a plug-in stage's "
        "too), typed by its StageSpec's result; a served benchmark's evaluation is the evaluate stage's; the "
        "eval.engine_check evaluations are in engine_checks, by label")
    metrics: dict[str, float] = Field(default_factory=dict, description="acc.*, acc.*.delta, tput.*, time.*")
    paired: list[dict[str, Any]] = Field(default_factory=list, description="per-task paired comparison with the baseline")
    engine_checks: dict[str, EvaluateResult] = Field(
        default_factory=dict, description="eval.engine_check: the variant scored again under other engine "
        "configurations, by label (e.g. 'max_num_seqs=64'); with the main evaluation, the engine spread's inputs")
    engine_spread: list[dict[str, Any]] = Field(default_factory=list, description="per task, the score range and "
                                                "flip rate across engine configurations (suite.analysis.engine_spread)")
    served_agreement: list[dict[str, Any]] = Field(default_factory=list, description="per task, the served check's "
                                                   "item-by-item comparison (suite.analysis.served_check)")
    perplexity: list[dict[str, Any]] = Field(default_factory=list, description="per perplexity task, the paired "
                                             "per-document comparison with the baseline (suite.analysis.perplexity)")
    kv_scales: Optional[str] = Field(None, description="FP8 KV-cache scale option served with (suite.recipe.kv)")
    kv_skip_layers: list[int] = Field(default_factory=list, description="layers whose KV stayed BF16 (given, or "
                                      "chosen by kvcheck for kv_skip_layers: auto)")
    kv_scales_auto: bool = Field(False, description="kv_scales: auto: kv_scales is the kvcheck stage's choice")
    kv_skip_layers_auto: bool = False
    tokenizer: dict[str, Any] = Field(default_factory=dict, description="BOS handling and chat template (suite.stages.evaluate.preflight)")
    errors: list[str] = Field(default_factory=list)

    @field_validator("stages", mode="before")
    @classmethod
    def _typed_results(cls, value: Any, info: ValidationInfo) -> Any:
        """Each stage's result read as its registered result type (summary.json holds them as plain objects)."""
        if not isinstance(value, dict):
            return value
        return {name: _stage_result(name, r, info.context) for name, r in value.items()}

    def result(self, kind: type[R]) -> R | None:
        """The result of the one stage whose result is a ``kind`` (e.g. ``EvaluateResult``: the variant's evaluation),
        not counting a stage that checks another (``StageSpec.check_of``: ``check_result``); None when no stage gave
        one; ValueError when two stages did (name the stage: ``stages[NAME]``)."""
        return self._one(kind, checks=False)

    def check_result(self, kind: type[R]) -> R | None:
        """The result of the one checking stage (``StageSpec.check_of``, e.g. the served check of an evaluation) whose
        result is a ``kind``; None when none gave one."""
        return self._one(kind, checks=True)

    def _one(self, kind: type[R], checks: bool) -> R | None:
        if not any(type(r) is kind for r in self.stages.values()):
            return None
        specs = of_group(STAGE_GROUP)  # loaded: the results were typed by it
        found = [(name, r) for name, r in self.stages.items()
                 if type(r) is kind and (getattr(specs.get(name), "check_of", None) is not None) == checks]
        if len(found) > 1:
            raise ValueError(f"{self.name}: stages {', '.join(n for n, _ in found)} each hold a {kind.__name__}: "
                             "read the one meant by its stage name")
        return found[0][1] if found else None


def _stage_result(name: str, value: Any, context: Any) -> Any:
    """``value`` as the registered stage ``name``'s result type (a Record already typed is kept)."""
    if isinstance(value, Record):
        return value
    try:
        kind = of_group(STAGE_GROUP)[name].result
    except RegistryError as e:
        raise ValueError(f"stages: {e}") from None
    return kind.model_validate(value, context=context)


class CostBasis(Record):
    """The price behind a run's ``cost.*`` metrics: the recipe's ``throughput.gpu_hour_cost``, an assumption of
    the recipe (never a built-in default), recorded once per run (suite.analysis.summary.cost_metrics)."""

    gpu_hour: float = Field(description="price of one GPU hour")
    currency: str
    source: str = Field(description="where the price came from, as the recipe says")
    scope: str = Field("", description="what the figures include and leave out")

    def params(self) -> dict[str, str]:
        """As MLflow params (suite.outputs.mlflow: the parent run's and every variant run's)."""
        return {"cost.gpu_hour": f"{self.gpu_hour:g}", "cost.currency": self.currency, "cost.source": self.source}


class TrackingInfo(Record):
    uri: str
    experiment: str
    experiment_id: str
    parent_run_id: str
    variant_run_ids: dict[str, str]


class RunSummary(Record):
    suite_version: str
    recipe_name: str
    recipe_path: str
    recipe_sha256: str
    recipe: dict[str, Any]
    run_dir: str
    started: str
    finished: Optional[str] = None
    platform: str
    versions: dict[str, str] = Field(default_factory=dict)
    tasks: list[str] = Field(default_factory=list)
    variants: list[VariantSummary]
    stage_wall_s: dict[str, float] = Field(
        default_factory=dict, description="each stage's wall time summed over its jobs (job-seconds: jobs that ran at "
        "once each count; a resumed run's kept results count their own)")
    stage_elapsed_s: dict[str, float] = Field(
        default_factory=dict, description="each stage's elapsed time in this run: the union of its jobs' intervals")
    artifacts: dict[str, FileName] = Field(default_factory=dict, description="the run's output files by kind (relative to "
                                          "the run folder on disk: suite.records.paths)")
    cost: Optional[CostBasis] = Field(None, description="the GPU-hour price of the cost.* metrics (absent: none)")
    tracking: Optional[TrackingInfo] = None
    tracking_pending: Optional[str] = Field(None, description="why MLflow logging was deferred (`suite sync`)")
    recipe_changed_on_resume: list[str] = Field(
        default_factory=list, description="fields in which the run folder's recipe.yaml differed from the one the run "
        "began with, accepted by `suite run --resume --accept-recipe-change` (empty: none)")
    engine_starts: list[dict[str, Any]] = Field(
        default_factory=list, description="the start-up ledger: every vLLM engine start the run made, in order, each an "
        "EngineStart (suite.records.engine) with its variant and part (suite.analysis.ledger)")
    warnings: list[str] = Field(default_factory=list, description="pre-flight findings (suite.stages.evaluate.preflight) and notes on stages that succeeded oddly")

    def baseline(self) -> VariantSummary:
        return next(v for v in self.variants if v.is_baseline)


RUN_FACTS = "run.json"  # in the run folder, beside jobs.json


class RunFacts(Record):
    """What the runner knows of a run that its stage results do not say (run.json, written when its job loop ends):
    when and where it ran, with what versions, each variant's errors (a job that failed or was skipped, and why) and
    tokenizer facts, the run's warnings. ``suite.analysis.derive.summarize`` reads it with the stage results; a folder
    without it (an interrupted run, or one from before it was written) is summarized from its results alone."""

    started: str
    finished: Optional[str] = None
    recipe_sha256: str = Field("", description="the sha256 of the recipe the run ran (recipe.yaml as it was written): "
                               "`suite gate` trusts recipe.yaml's gates only under it")
    platform: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    errors: dict[str, list[str]] = Field(default_factory=dict, description="variant -> its errors, in order")
    tokenizer: dict[str, dict[str, Any]] = Field(default_factory=dict, description="variant -> its tokenizer facts")
    model_sha256: dict[str, str] = Field(default_factory=dict, description="variant -> a brought checkpoint's "
                                         "fingerprint when the run began")
    stage_wall_s: dict[str, float] = Field(default_factory=dict, description="each stage's wall time summed over its "
                                           "jobs, as the runner measured them")
    warnings: list[str] = Field(default_factory=list, description="the runner's warnings (the analysis' are derived)")
    recipe_changed_on_resume: list[str] = Field(default_factory=list)
