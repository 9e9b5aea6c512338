"""The recipe: a YAML file naming a model, its BF16 baseline, FP8 variants, and how to judge them.

Every model is pydantic with ``extra="forbid"`` (an unknown key is an error, not a silent no-op, the
way llmcompressor's modifiers behave). ``load_recipe`` turns every problem into a ``SuiteError`` that
names the file, the field, what is allowed and the fix, before any model is loaded.

Relative paths in a recipe are relative to the recipe file's folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from suite.errors import Problem, SuiteError
from suite.results import SloSpec


# llmcompressor's preset scheme names (compressed_tensors.quantization.quant_scheme.PRESET_SCHEMES)
# that this suite supports, and what each means. "FP8" is static per-tensor weights and activations.
SCHEMES = {
    "FP8": "static per-tensor FP8 weights and activations, calibrated (needs a calibration set)",
    "FP8_DYNAMIC": "per-channel FP8 weights, dynamic per-token FP8 activations (no data)",
    "FP8_BLOCK": "128x128 block FP8 weights, dynamic per-group activations (no data)",
}
SCHEMES_NEEDING_DATA = {"FP8"}

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
Scalar = Union[bool, int, float, str]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ModelSpec(Strict):
    """The model under test, as the baseline is served."""

    id: str = Field(description="Hugging Face model id (org/name) or a local folder (relative to the recipe)")
    revision: str | None = Field(None, description="hub revision (commit, tag or branch) for a hub id")
    dtype: Literal["bfloat16", "float16", "auto"] = Field("bfloat16", description="unquantized weights' dtype")
    max_model_len: int = Field(4096, gt=0, description="vLLM max_model_len for evaluation and serving")
    chat_template: bool = Field(
        False, description="apply the tokenizer's chat template in evaluation (lm-eval apply_chat_template)"
    )
    weights: Literal["pretrained", "random"] = Field(
        "pretrained",
        description="'random': the folder holds config.json + tokenizer only; the baseline is served with vLLM's "
        "dummy loader and quantized variants are built from a randomly initialised model (throughput studies "
        "at a scale you have no weights for; accuracy tasks are refused)",
    )


class CalibrationMix(Strict):
    set: str = Field(description="a set name from calibration/ or a set YAML (relative to the recipe)")
    weight: float = Field(1.0, gt=0, description="share of num_calibration_samples, relative to the others")


class QuantizationSpec(Strict):
    """How llmcompressor builds the variant's checkpoint (oneshot + QuantizationModifier)."""

    scheme: str | None = Field(
        None,
        description="weight/activation preset (absent: weights stay BF16): "
        + ", ".join(f"{k} ({v})" for k, v in SCHEMES.items()),
    )
    ignore: list[str] = Field(
        default_factory=lambda: ["lm_head"],
        description="modules kept in BF16: module names, 're:' patterns or class names (as llmcompressor's "
        "ignore), and the shorthands 'first: N' / 'last: N' (decoder layers)",
    )
    kv_cache: Literal["fp8"] | None = Field(
        None, description="'fp8': calibrate per-tensor FP8 KV-cache scales into the checkpoint (kv_cache_scheme)"
    )
    calibration: Union[str, list[CalibrationMix], None] = Field(
        None,
        description="calibration data (required by FP8 static and kv_cache): a set name from calibration/, a set "
        "YAML of your own (path ending .yaml, relative to the recipe), or a mix [{set: ..., weight: ...}, ...]",
    )
    smoothing_strength: float | None = Field(
        None, gt=0, lt=1, description="run llmcompressor's SmoothQuantModifier with this strength before static FP8 "
        "(moves activation outliers into the weights; e.g. 0.8)",
    )
    num_calibration_samples: int = Field(512, gt=0, description="calibration rows used")
    max_seq_length: int = Field(2048, gt=0, description="calibration rows are cut to this many tokens")

    @field_validator("scheme")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None and v not in SCHEMES:
            raise ValueError(f"unsupported scheme {v!r}; allowed: {', '.join(SCHEMES)}")
        return v

    @model_validator(mode="after")
    def _data_when_needed(self) -> "QuantizationSpec":
        if self.scheme is None and self.kv_cache is None:
            raise ValueError("nothing to quantize: give 'scheme', 'kv_cache: fp8', or both")
        if (self.scheme in SCHEMES_NEEDING_DATA or self.kv_cache) and not self.calibration:
            why = f"scheme {self.scheme}" if self.scheme in SCHEMES_NEEDING_DATA else "kv_cache: fp8"
            raise ValueError(f"{why} needs calibration data; set 'calibration' to a set in calibration/")
        if self.smoothing_strength is not None and self.scheme != "FP8":
            raise ValueError("smoothing_strength (SmoothQuant) only helps static activation scales: use scheme FP8")
        return self


class VariantSpec(Strict):
    """One served configuration of the model. The baseline has no quantization."""

    name: str = Field(pattern=_NAME, description="short name, used in run names and metric tags")
    quantization: QuantizationSpec | None = Field(None, description="absent: serve the model as it is")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="vLLM kv_cache_dtype (fp8 reads calibrated scales from the checkpoint when present)"
    )
    engine_args: dict[str, Scalar] = Field(
        default_factory=dict,
        description="extra vLLM engine arguments, snake_case (enforce_eager, gpu_memory_utilization, ...)",
    )


class TaskSpec(Strict):
    name: str = Field(description="task or group name: one of tasks/ or a standard lm-eval task")
    metric: str | None = Field(None, description="headline 'metric,filter' (default: the task's primary metric)")
    num_fewshot: int | None = Field(None, ge=0, description="overrides the task's default")
    limit: float | None = Field(None, gt=0, description="rows per (sub)task: an integer count or a fraction < 1")


class EvalSpec(Strict):
    tasks: list[TaskSpec] = Field(
        default_factory=list, description="tasks scored on every variant (empty: a throughput-only recipe)"
    )
    num_fewshot: int | None = Field(None, ge=0, description="default n-shot for every task (else the task's own)")
    limit: float | None = Field(None, gt=0, description="default rows per (sub)task (None: all)")
    batch_size: Union[int, Literal["auto"]] = Field("auto", description="lm-eval batch size")
    data_dir: str = Field(
        "../tasks/data",
        description="folder the tasks/ YAMLs read (layout of ../shared/data); relative to the recipe",
    )
    allow_code_execution: bool = Field(
        False, description="required for HumanEval: runs model-written code in a sandboxed subprocess"
    )
    max_gen_toks: int | None = Field(None, gt=0, description="cap on generated tokens per request")
    seed: int = 1234

    @field_validator("tasks", mode="before")
    @classmethod
    def _strings_are_names(cls, v):
        return [{"name": t} if isinstance(t, str) else t for t in v] if isinstance(v, list) else v


class ThroughputSpec(Strict):
    """The serving workload, as `vllm bench serve` runs it (random dataset, ignore_eos)."""

    input_len: int = Field(512, gt=0, description="--random-input-len")
    output_len: int = Field(256, gt=0, description="--random-output-len")
    num_prompts: int = Field(1000, gt=0, description="--num-prompts per load point")
    workload: Literal["random", "tasks"] = Field(
        "random",
        description="'random': random token prompts of exactly input_len tokens; 'tasks': the accuracy tasks' own "
        "prompts from eval.data_dir (GSM8K, HumanEval, MMLU, C-Eval), output_len tokens each",
    )
    request_rates: list[Union[float, Literal["inf"]]] = Field(
        default_factory=list, description="Poisson request rates (req/s) to run; 'inf' sends all at once"
    )
    concurrencies: list[int] = Field(default_factory=list, description="--max-concurrency values to run")
    api_server_count: int = Field(1, ge=1, description="vllm serve --api-server-count")
    max_api_server_count: int | None = Field(
        None, ge=1, description="when a point is frontend-bound (suite.bottleneck), restart the server with twice the "
        "API servers, up to this many, and measure again (the earlier points are kept in scaled_from)",
    )
    repetitions: int = Field(3, ge=1, description="runs per load point; the median is reported, with the spread")
    warmup_requests: int = Field(16, ge=0, description="vllm bench serve --num-warmups before each run")
    slo: SloSpec | None = Field(
        None, description="latency SLO (p99 TTFT/TPOT): search the highest sustainable Poisson rate under it"
    )
    offline_ceiling: bool = Field(
        False, description="also run the workload through offline LLM.generate (one more engine start) as a ceiling"
    )
    metrics_interval_s: float = Field(1.0, gt=0, description="how often /metrics and CPU use are sampled")
    point_timeout_s: int = Field(1800, gt=0, description="a load point still running after this fails")
    gpu: str | None = Field(None, description="GPU for the roofline (H100, H200, ...; default: nvidia-smi's)")
    headline: Literal["max", "last"] = Field(
        "max", description="which load point's numbers become tput.* metrics: the best output tok/s, or the last"
    )
    server_timeout_s: int = Field(900, gt=0, description="time allowed for vllm serve to become healthy")
    seed: int = 0

    @model_validator(mode="after")
    def _some_load(self) -> "ThroughputSpec":
        if not self.request_rates and not self.concurrencies:
            raise ValueError("give at least one of request_rates or concurrencies")
        return self


class GateSpec(Strict):
    max_drop: dict[str, float] = Field(
        default_factory=dict,
        description="task -> largest allowed accuracy drop (baseline minus variant, in metric units, e.g. 0.02)",
    )
    default_max_drop: float | None = Field(None, description="for tasks not named in max_drop")
    min_throughput_gain: float | None = Field(
        None, gt=0, description="smallest allowed variant/baseline output tok/s ratio (e.g. 1.2)"
    )
    max_relative_drop: dict[str, float] = Field(
        default_factory=dict, description="task -> largest allowed drop as a share of the baseline (0.01 = 1%)"
    )
    default_max_relative_drop: float | None = Field(None, description="for tasks not named in max_relative_drop")
    non_inferiority_margin: dict[str, float] = Field(
        default_factory=dict,
        description="task -> margin m: passes when the lower bound of the paired 95% CI of the delta is >= -m "
        "(non-inferiority shown by the data, not just a small point estimate)",
    )
    default_non_inferiority_margin: float | None = Field(None, description="for tasks not named above")
    min_recovery_lower_bound: dict[str, float] = Field(
        default_factory=dict,
        description="task -> smallest allowed lower bound of recovery, (baseline + CI low) / baseline (e.g. 0.99)",
    )
    max_ttft_p99_ms: float | None = Field(None, gt=0, description="largest allowed p99 TTFT at the headline point")
    max_tpot_p99_ms: float | None = Field(None, gt=0, description="largest allowed p99 TPOT at the headline point")
    min_sustainable_rate_gain: float | None = Field(
        None, gt=0, description="smallest allowed variant/baseline ratio of the sustainable rate under the SLO"
    )


class TrackingSpec(Strict):
    uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite file in the run folder)")
    experiment: str | None = Field(None, description="MLflow experiment (default: the recipe name)")

    @field_validator("uri")
    @classmethod
    def _no_credentials(cls, v: str | None) -> str | None:
        from urllib.parse import urlsplit

        if v and "://" in v and urlsplit(v).password is not None:
            raise ValueError("the URI holds a password; recipes end up in MLflow and in logs: set "
                             "MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials) instead")
        return v


class RuntimeSpec(Strict):
    env: dict[str, str] = Field(default_factory=dict, description="environment variables for stage processes")


class Recipe(Strict):
    schema_version: Literal[1] = 1
    name: str = Field(pattern=_NAME, description="recipe name: MLflow experiment and tag suite.recipe")
    description: str = ""
    model: ModelSpec
    baseline: VariantSpec
    variants: list[VariantSpec] = Field(min_length=1)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    throughput: ThroughputSpec | None = Field(
        None, description="the serving workload (absent: an accuracy-only recipe, no benchmark stage)"
    )
    gates: GateSpec = Field(default_factory=GateSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    output_dir: str = Field("../runs", description="run folders are made under this (relative to the recipe)")

    @model_validator(mode="after")
    def _consistent(self) -> "Recipe":
        if self.baseline.quantization is not None:
            raise ValueError("baseline: the baseline is the unquantized model; remove its 'quantization'")
        names = [self.baseline.name] + [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variant names must be unique; repeated: {', '.join(dupes)}")
        if self.throughput is None:
            if not self.eval.tasks:
                raise ValueError("nothing to measure: give eval.tasks, a throughput section, or both")
            g = self.gates
            serving_gates = [n for n, v in [("min_throughput_gain", g.min_throughput_gain),
                                            ("max_ttft_p99_ms", g.max_ttft_p99_ms),
                                            ("max_tpot_p99_ms", g.max_tpot_p99_ms),
                                            ("min_sustainable_rate_gain", g.min_sustainable_rate_gain)] if v is not None]
            if serving_gates:
                raise ValueError(f"gates.{serving_gates[0]} needs a throughput section (this recipe has none): "
                                 "add one or remove the gate")
        return self

    def all_variants(self) -> list[VariantSpec]:
        return [self.baseline, *self.variants]


# --------------------------------------------------------------------------------------------------
# Loading


class LoadedRecipe(BaseModel):
    """A validated recipe and where it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    recipe: Recipe
    path: Path
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.path.parent / p).resolve()

    def model_path(self) -> str:
        """Local folder (absolute) for a local model; the hub id unchanged otherwise."""
        m = self.recipe.model.id
        return str(self.resolve(m)) if is_local_model(m) else m


def is_local_model(model_id: str) -> bool:
    return model_id.startswith((".", "/", "~")) or not re.fullmatch(r"[\w.-]+/[\w.-]+", model_id)


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or str(part).startswith(("function-", "literal[", "union[")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def validation_problems(file: str, err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors():
        field = _field_path(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        fix = ""
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
            fix = "remove it or check its spelling (`suite schema` lists every field)"
        elif e["type"] == "missing":
            msg = "required field is missing"
            fix = "add it (`suite schema` describes it)"
        elif e["type"] == "literal_error":
            fix = "use one of the allowed values"
        problems.append(Problem(file, field, msg, fix))
    return problems


def load_recipe(path: str | Path, serving: bool = True, text: str | None = None) -> LoadedRecipe:
    """Parse and validate a recipe file, then check what it refers to (files, calibration, tasks) and,
    with ``serving``, whether the installed vLLM can serve every variant (commands that only quantize or
    analyse pass False). ``text``: the recipe as it was (a run folder's copy), placed at ``path`` (where it
    was, for its relative paths)."""
    path = Path(path)
    if text is None:
        if not path.is_file():
            raise SuiteError(Problem(str(path), "", "recipe file not found", "check the path"))
        text = path.read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SuiteError(Problem(str(path), "", f"not valid YAML: {e}", "fix the YAML syntax")) from None
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", "a recipe is a YAML mapping (name:, model:, ...)", ""))
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        raise SuiteError(validation_problems(str(path), e)) from None
    loaded = LoadedRecipe(recipe=recipe, path=path.resolve(), text=text)
    problems = check_references(loaded, serving)
    if problems:
        raise SuiteError(problems)
    return loaded


def check_references(loaded: LoadedRecipe, serving: bool = True) -> list[Problem]:
    """Checks that need the file system: model folder, data dir, calibration sets, task names."""
    from suite import calibration, tasks  # local: both read small YAML registries

    r, f = loaded.recipe, str(loaded.path)
    problems: list[Problem] = []
    if is_local_model(r.model.id) and not (loaded.resolve(r.model.id) / "config.json").is_file():
        problems.append(
            Problem(f, "model.id", f"no model folder with config.json at {loaded.resolve(r.model.id)}",
                    "run scripts/setup.sh (demo model) or give a Hugging Face id / an existing folder")
        )
    known_sets = calibration.available()
    for i, v in enumerate(r.variants):
        q = v.quantization
        for ref, _ in calibration.mix_parts(q.calibration) if q and q.calibration else []:
            fld = f"variants[{i}].quantization.calibration"
            if calibration.is_file_ref(ref):
                path = loaded.resolve(ref)
                try:
                    spec, _ = calibration.resolve(str(path))
                    files = calibration.data_files(spec, path)
                    if spec.path and not all(p.is_file() for p in files) or spec.path and not files:
                        problems.append(Problem(f, fld, f"{path}: data file(s) {spec.path!r} not found",
                                                "fix 'path' in the set YAML (relative to it)"))
                except (OSError, ValueError) as e:
                    problems.append(Problem(f, fld, f"{path}: not a calibration set: {str(e).splitlines()[0]}",
                                            "see calibration/*.yaml for the format"))
            elif ref not in known_sets:
                problems.append(Problem(f, fld, f"unknown calibration set {ref!r}",
                                        f"use one of: {', '.join(sorted(known_sets)) or '(none found)'}, "
                                        f"add calibration/{ref}.yaml, or give a set YAML path"))
    if r.model.weights == "random" and r.eval.tasks:
        problems.append(Problem(f, "eval.tasks", "model.weights is 'random': accuracy on random weights means nothing",
                                "remove eval.tasks (a throughput-only recipe) or use real weights"))
    data_dir = loaded.resolve(r.eval.data_dir)
    if r.eval.tasks and not data_dir.is_dir():
        problems.append(Problem(f, "eval.data_dir", f"folder not found: {data_dir}",
                                "point it at a folder laid out like ../shared/data"))
    local = tasks.available()
    for i, t in enumerate(r.eval.tasks):
        if t.name not in local and not tasks.is_standard_name(t.name):
            near = tasks.suggest(t.name, local)
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"unknown task {t.name!r}" + (f"; did you mean {near!r}?" if near else ""),
                        "use a task from tasks/ (`suite tasks`) or a standard lm-eval task name")
            )
        elif t.name in local and not local[t.name].higher_is_better:
            problems.append(Problem(f, f"eval.tasks[{i}].name", "its metric is not 'higher is better'", "pick another task"))
        missing = [f for f in tasks.data_files(t.name) if not (data_dir / f).is_file()] if data_dir.is_dir() else []
        if missing:
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"{t.name}: {len(missing)} data file(s) missing under {data_dir}, "
                        f"e.g. {missing[0]}", "point eval.data_dir at a folder laid out like ../shared/data "
                        "(`suite data check DIR`)"))
        if tasks.needs_code_execution(t.name) and not r.eval.allow_code_execution:
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"{t.name} runs model-written code",
                        "set eval.allow_code_execution: true to allow it (sandboxed subprocess), or drop the task")
            )
    for task in r.gates.max_drop:
        if task not in {t.name for t in r.eval.tasks}:
            problems.append(Problem(f, f"gates.max_drop.{task}", "gate on a task that is not evaluated",
                                    "add the task to eval.tasks or remove the gate"))
    if serving:
        problems += serving_problems(loaded)
    return problems


def serving_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Variants the installed vLLM build cannot serve (suite.environments.platform_problems), as Problems."""
    from suite.environments import platform_problems

    return [Problem(str(loaded.path), fld, msg, fix) for fld, msg, fix in platform_problems(loaded.recipe)]
