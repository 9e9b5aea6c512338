"""The recipe: a YAML file naming a model, its BF16 baseline, FP8 variants, and how to judge them.

Every model is pydantic with ``extra="forbid"`` (an unknown key is an error, not a silent no-op, the
way llmcompressor's modifiers behave). ``load_recipe`` turns every problem into a ``SuiteError`` that
names the file, the field, what is allowed and the fix, before any model is loaded.

Relative paths in a recipe are relative to the recipe file's folder.
"""

from __future__ import annotations

import hashlib
import math
import re
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

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
# an engine argument: a scalar, a list (kv_cache_dtype_skip_layers: [0, 1]), a mapping (compilation_config),
# or null (vLLM's default); its name and type are checked against the serve environment's EngineArgs
EngineValue = Union[Scalar, None, list[Union[Scalar, dict[str, Any]]], dict[str, Any]]
SEED_MAX = 2**32 - 1  # numpy's seed range (lm-eval seeds numpy with it)
# runtime.env names that hold credentials: they come from the environment, never from a recipe (a recipe
# is copied into the run folder, logged to MLflow and printed by `suite plan`)
SECRET_ENV = re.compile(r"(_PASSWORD|_PASSWD|_PASS|_SECRET|_TOKEN|_API_KEY|_ACCESS_KEY|_PRIVATE_KEY|_CREDENTIALS)$"
                        r"|^HF_TOKEN$", re.IGNORECASE)
URL_PASSWORD = re.compile(r"://[^/@\s:]*:[^/@\s]+@")  # scheme://user:password@host


def bad(what: str, fix: str) -> PydanticCustomError:
    """A validation error that carries its fix (validation_problems prints it)."""
    return PydanticCustomError("suite", "{what}", {"what": what, "fix": fix})


class Strict(BaseModel):
    # strict: a YAML `true` is not the number 1, "4" is not 4, 1.5 is not an integer
    model_config = ConfigDict(extra="forbid", frozen=False, strict=True)


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
    weight: float = Field(1.0, gt=0, allow_inf_nan=False,
                          description="share of num_calibration_samples, relative to the others")


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
        None, gt=0, lt=1, allow_inf_nan=False, description="run llmcompressor's SmoothQuantModifier with this strength before static FP8 "
        "(moves activation outliers into the weights; e.g. 0.8)",
    )
    num_calibration_samples: int = Field(512, gt=0, description="calibration rows used")
    max_seq_length: int = Field(2048, gt=0, description="calibration rows are cut to this many tokens")

    @field_validator("scheme")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None and v not in SCHEMES:
            raise bad(f"unsupported scheme {v!r}", f"use one of: {', '.join(SCHEMES)}")
        return v

    @model_validator(mode="after")
    def _data_when_needed(self) -> "QuantizationSpec":
        if self.scheme is None and self.kv_cache is None:
            raise bad("nothing to quantize", "give 'scheme', 'kv_cache: fp8', or both; or remove 'quantization'")
        if (self.scheme in SCHEMES_NEEDING_DATA or self.kv_cache) and not self.calibration:
            why = f"scheme {self.scheme}" if self.scheme in SCHEMES_NEEDING_DATA else "kv_cache: fp8"
            raise bad(f"{why} needs calibration data",
                      "set 'calibration' to a set in calibration/ (e.g. chat-demo) or a set YAML of your own")
        if self.smoothing_strength is not None and self.scheme != "FP8":
            raise bad("smoothing_strength (SmoothQuant) only helps static activation scales",
                      "use scheme FP8 or remove smoothing_strength")
        return self


class VariantSpec(Strict):
    """One served configuration of the model. The baseline has no quantization."""

    name: str = Field(pattern=_NAME, description="short name, used in run names and metric tags")
    quantization: QuantizationSpec | None = Field(None, description="absent: serve the model as it is")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="vLLM kv_cache_dtype (fp8 reads calibrated scales from the checkpoint when present)"
    )
    engine_args: dict[str, EngineValue] = Field(
        default_factory=dict,
        description="extra vLLM engine arguments, snake_case (enforce_eager, gpu_memory_utilization, "
        "kv_cache_dtype_skip_layers: [0, 1], compilation_config: {...}); names and types are checked against "
        "the EngineArgs of the serve environment's vLLM",
    )


def _check_limit(v: float | None) -> float | None:
    """lm-eval's ``limit``: below 1.0 a fraction of each (sub)task's rows, else a row count (int(limit))."""
    if v is not None and not (0 < v < 1 or (v >= 1 and float(v).is_integer())):
        raise bad(f"{v!r} is neither a row count (an integer >= 1) nor a fraction of the rows (0 < x < 1)",
                  f"write {math.floor(v)} rows or a fraction such as 0.5" if v > 1 else "write an integer >= 1 "
                  "or a fraction 0 < x < 1")
    return v


Limit = Annotated[Union[float, None], Field(allow_inf_nan=False)]


class TaskSpec(Strict):
    name: str = Field(description="task or group name: one of tasks/ or a standard lm-eval task")
    metric: str | None = Field(None, description="headline 'metric,filter' (default: the task's primary metric)")
    num_fewshot: int | None = Field(None, ge=0, le=1000, description="overrides the task's default")
    limit: Limit = Field(None, description="rows per (sub)task: an integer count >= 1 or a fraction 0 < x < 1")

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        return _check_limit(v)


class EvalSpec(Strict):
    tasks: list[TaskSpec] = Field(
        default_factory=list, description="tasks scored on every variant (empty: a throughput-only recipe)"
    )
    num_fewshot: int | None = Field(None, ge=0, le=1000,
                                    description="default n-shot for every task (else the task's own)")
    limit: Limit = Field(None, description="default rows per (sub)task (None: all): a count >= 1 or a fraction 0 < x < 1")
    batch_size: Union[Annotated[int, Field(ge=1)], Literal["auto"]] = Field("auto", description="lm-eval batch size")
    data_dir: str = Field(
        "../tasks/data",
        description="folder the tasks/ YAMLs read (layout of ../shared/data); relative to the recipe",
    )
    allow_code_execution: bool = Field(
        False, description="required for HumanEval: runs model-written code in a sandboxed subprocess"
    )
    code_sandbox: Literal["namespaces", "process"] = Field(
        "namespaces", description="how model-written code runs: namespaces (fresh PID/net/mount/IPC/UTS "
        "namespaces, uid 65534, read-only system, capped scratch, cgroup memory/pids limits; refuses to run where "
        "the kernel does not allow it) or process (weaker: own session and rlimits only, no network, file or "
        "process isolation). Recorded in the evaluate result, the report and MLflow"
    )
    max_gen_toks: int | None = Field(None, gt=0, description="cap on generated tokens per request")
    seed: int = Field(1234, ge=0, le=SEED_MAX, description="lm-eval's random, numpy, torch and few-shot seeds")

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        return _check_limit(v)

    @field_validator("tasks", mode="before")
    @classmethod
    def _strings_are_names(cls, v):
        return [{"name": t} if isinstance(t, str) else t for t in v] if isinstance(v, list) else v

    @field_validator("tasks")
    @classmethod
    def _each_task_once(cls, v):
        names = [t.name for t in v]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise bad(f"task(s) listed twice: {', '.join(dup)} (one evaluation would overwrite the other's samples)",
                      "list each task once")
        return v


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
        default_factory=list, description="Poisson request rates (req/s) to run, each > 0; 'inf' sends all at once"
    )
    concurrencies: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list, description="--max-concurrency values to run, each >= 1")
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
    metrics_interval_s: float = Field(1.0, gt=0, allow_inf_nan=False,
                                      description="how often /metrics and CPU use are sampled")
    point_timeout_s: int = Field(1800, gt=0, description="a load point still running after this fails")
    gpu: str | None = Field(None, description="GPU for the roofline (H100, H200, ...; default: nvidia-smi's)")
    headline: Literal["max", "last"] = Field(
        "max", description="which load point's numbers become tput.* metrics: the best output tok/s, or the last"
    )
    server_timeout_s: int = Field(900, gt=0, description="time allowed for vllm serve to become healthy")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="vllm bench serve --seed of the first run")

    @field_validator("request_rates", mode="before")
    @classmethod
    def _positive_rates(cls, v):
        if not isinstance(v, list):
            return v
        for i, rate in enumerate(v):
            if rate == "inf" or (isinstance(rate, float) and rate == math.inf):
                continue
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or not math.isfinite(rate):
                raise bad(f"[{i}] = {rate!r}: a Poisson rate is a number of requests per second > 0",
                          "give rates > 0, or 'inf' to send every request at once")
        return ["inf" if r == math.inf else r for r in v]

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_numbers(cls, v):
        for key, value in (v or {}).items() if isinstance(v, dict) else ():
            if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
                raise bad(f"{key} = {value!r} is not a finite number", "give a number")
        return v

    @model_validator(mode="after")
    def _some_load(self) -> "ThroughputSpec":
        for name in ("request_rates", "concurrencies"):
            values = getattr(self, name)
            if len(set(map(str, values))) != len(values):
                raise bad(f"{name} lists a load point twice: {values}", "list each load point once")
        if not self.request_rates and not self.concurrencies:
            raise bad("no load point: both request_rates and concurrencies are empty",
                      "give at least one of request_rates (e.g. [inf]) or concurrencies (e.g. [8])")
        if self.max_api_server_count is not None and self.max_api_server_count < self.api_server_count:
            raise bad(f"max_api_server_count {self.max_api_server_count} is below api_server_count "
                      f"{self.api_server_count}", f"make it >= {self.api_server_count}, or remove it")
        if self.slo is not None:
            s = self.slo
            if s.ttft_p99_ms is None and s.tpot_p99_ms is None:
                raise bad("slo sets no latency limit: every rate would meet it",
                          "set slo.ttft_p99_ms, slo.tpot_p99_ms or both")
            if s.min_rate > s.max_rate:
                raise bad(f"slo.min_rate {s.min_rate:g} is above slo.max_rate {s.max_rate:g}",
                          "make min_rate <= start_rate <= max_rate")
            if not s.min_rate <= s.start_rate <= s.max_rate:
                raise bad(f"slo.start_rate {s.start_rate:g} is outside [min_rate {s.min_rate:g}, max_rate {s.max_rate:g}]",
                          "make min_rate <= start_rate <= max_rate")
        return self


Drop = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class GateSpec(Strict):
    max_drop: dict[str, Drop] = Field(
        default_factory=dict,
        description="task -> largest allowed accuracy drop (baseline minus variant, in metric units, e.g. 0.02)",
    )
    default_max_drop: Drop | None = Field(None, description="for tasks not named in max_drop")
    min_throughput_gain: Ratio | None = Field(
        None, description="smallest allowed variant/baseline output tok/s ratio (e.g. 1.2)"
    )
    max_relative_drop: dict[str, Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] = Field(
        default_factory=dict, description="task -> largest allowed drop as a share of the baseline (0.01 = 1%)"
    )
    default_max_relative_drop: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="for tasks not named in max_relative_drop")
    non_inferiority_margin: dict[str, Drop] = Field(
        default_factory=dict,
        description="task -> margin m: passes when the lower bound of the paired 95% CI of the delta is >= -m "
        "(non-inferiority shown by the data, not just a small point estimate)",
    )
    default_non_inferiority_margin: Drop | None = Field(None, description="for tasks not named above")
    min_recovery_lower_bound: dict[str, Ratio] = Field(
        default_factory=dict,
        description="task -> smallest allowed lower bound of recovery, (baseline + CI low) / baseline (e.g. 0.99)",
    )
    max_ttft_p99_ms: Ratio | None = Field(None, description="largest allowed p99 TTFT at the headline point")
    max_tpot_p99_ms: Ratio | None = Field(None, description="largest allowed p99 TPOT at the headline point")
    min_sustainable_rate_gain: Ratio | None = Field(
        None, description="smallest allowed variant/baseline ratio of the sustainable rate under the SLO"
    )


class TrackingSpec(Strict):
    uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite file in the run folder)")
    experiment: str | None = Field(None, description="MLflow experiment (default: the recipe name)")

    @field_validator("uri")
    @classmethod
    def _no_credentials(cls, v: str | None) -> str | None:
        from urllib.parse import urlsplit

        if v and "://" in v and urlsplit(v).password is not None:
            raise bad("the URI holds a password; recipes end up in MLflow and in logs",
                      "remove it from the URI and set MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD "
                      "(or ~/.mlflow/credentials) instead")
        return v


class RuntimeSpec(Strict):
    env: dict[str, str] = Field(
        default_factory=dict, description="environment variables for stage processes (no credentials: names "
        "ending in _PASSWORD, _SECRET, _TOKEN, _API_KEY, _ACCESS_KEY and HF_TOKEN are refused; set them in the "
        "environment that runs `suite`, which the stages inherit)")

    @field_validator("env", mode="before")  # before the types: a secret of the wrong type is still refused
    @classmethod
    def _no_secrets(cls, v):
        for name in v if isinstance(v, dict) else ():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise bad(f"{name!r} is not an environment variable name", "use letters, digits and '_' only")
            if SECRET_ENV.search(name):  # the value is never repeated: it is the secret
                raise bad(f"{name} looks like a credential; a recipe is copied into the run folder, logged to "
                          "MLflow and printed by `suite plan`",
                          f"remove it here and export {name} in the environment that runs `suite` "
                          "(stage processes get only Hugging Face's tokens from there)")
            if isinstance(v[name], str) and URL_PASSWORD.search(v[name]):
                raise bad(f"{name} holds a URL with a password in it; a recipe is copied into the run folder, "
                          "logged to MLflow and printed by `suite plan`",
                          "remove the password from the URL and give it through the tool's own credential "
                          "variable, exported in the environment that runs `suite`")
        return v


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
            raise bad("baseline: the baseline is the unquantized model", "remove baseline.quantization")
        names = [self.baseline.name] + [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise bad(f"variant names must be unique; repeated: {', '.join(dupes)}", "rename one of them")
        t, m = self.throughput, self.model
        if t is not None and t.workload == "random" and t.input_len + t.output_len > m.max_model_len:
            raise bad(f"throughput.input_len + output_len = {t.input_len + t.output_len} tokens exceed "
                      f"model.max_model_len {m.max_model_len}: vLLM refuses every request",
                      "shorten input_len/output_len or raise model.max_model_len")
        if t is not None and t.output_len >= m.max_model_len:
            raise bad(f"throughput.output_len {t.output_len} leaves no room for a prompt in model.max_model_len "
                      f"{m.max_model_len}", "lower output_len or raise model.max_model_len")
        if self.eval.max_gen_toks is not None and self.eval.max_gen_toks >= m.max_model_len:
            raise bad(f"eval.max_gen_toks {self.eval.max_gen_toks} leaves no room for a prompt in model.max_model_len "
                      f"{m.max_model_len}", "lower eval.max_gen_toks or raise model.max_model_len")
        if self.throughput is None:
            if not self.eval.tasks:
                raise bad("nothing to measure", "give eval.tasks, a throughput section, or both")
            g = self.gates
            serving_gates = [n for n, v in [("min_throughput_gain", g.min_throughput_gain),
                                            ("max_ttft_p99_ms", g.max_ttft_p99_ms),
                                            ("max_tpot_p99_ms", g.max_tpot_p99_ms),
                                            ("min_sustainable_rate_gain", g.min_sustainable_rate_gain)] if v is not None]
            if serving_gates:
                raise bad(f"gates.{serving_gates[0]} needs a throughput section (this recipe has none)",
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


def _strip(t):
    """The type under Optional[...] / Annotated[...] (one level of each)."""
    import typing

    if typing.get_origin(t) is Annotated:
        t = typing.get_args(t)[0]
    if typing.get_origin(t) in (Union, getattr(__import__("types"), "UnionType", Union)):
        members = [a for a in typing.get_args(t) if a is not type(None)]
        if len(members) == 1:
            return _strip(members[0])
    return t


def _walk(root, loc: tuple) -> tuple[str, object]:
    """(the field path as a recipe writes it, the type there) for a pydantic error location; the union
    member tags pydantic puts in locations ('int', "literal['inf']", 'list[CalibrationMix]') are dropped."""
    import typing

    out, t = "", root
    for part in loc:
        t = _strip(t)
        origin, args = typing.get_origin(t), typing.get_args(t)
        if isinstance(part, int) and origin in (list, tuple):
            out, t = out + f"[{part}]", args[0] if args else Any
        elif isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(t, type) and issubclass(t, BaseModel) and part in t.model_fields:
            out, t = out + ("." if out else "") + part, t.model_fields[part].annotation
        elif origin is dict:
            out, t = out + ("." if out else "") + str(part), args[1] if args else Any
        elif origin is Union:  # a member tag: follow the member it names, if one does
            named = [a for a in args if str(part).startswith((getattr(typing.get_origin(a), "__name__", "") or "~")
                                                             + "[") or getattr(a, "__name__", None) == part]
            t = named[0] if named else t
        elif t is root or t is Any or isinstance(t, type) and issubclass(t, BaseModel):
            out += ("." if out else "") + str(part)  # a key the schema does not know (extra_forbidden)
    return out, t


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a string",
               "dict": "a mapping (key: value)", "model": "a mapping (key: value)", "list": "a list"}


def _describe(e: dict, quiet: bool) -> tuple[str, str]:
    """(what is wrong, the fix) for one pydantic error."""
    kind, ctx = e["type"], e.get("ctx") or {}
    got = "" if quiet or kind == "missing" else f"; got {_show(e.get('input'))}"
    if kind == "suite":
        return ctx["what"], ctx["fix"]
    if kind == "missing":
        return "required field is missing", "add it (`suite schema` describes it)"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}", f"use one of {ctx.get('expected')}"
    bounds = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
              "less_than_equal": ("<=", "le")}
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {ctx.get(key)}{got}", f"give a value {op} {ctx.get(key)}"
    if kind == "finite_number":
        return f"must be a finite number{got}", "give a finite number (not .inf or .nan)"
    if kind == "int_from_float":
        return f"must be a whole number{got}", "give an integer"
    for prefix, words in _TYPE_WORDS.items():
        if kind.startswith(prefix + "_") and kind.endswith(("_type", "_parsing", "_attributes_type")):
            return f"must be {words}{got}", {"string": "quote it ('...')", "list": "write [a, b] or one '- item' per line",
                                             "dict": "write key: value lines under it",
                                             "model": "write key: value lines under it (`suite schema` lists them)",
                                             }.get(prefix, f"give {words}, without quotes")
    if kind == "string_pattern_mismatch":
        return f"not a valid name{got}", "use letters, digits, '_', '.' and '-', starting with a letter or digit"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)", "add one"
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} item(s)", "remove some"
    if kind == "value_error":
        return e["msg"].removeprefix("Value error, "), "see `suite schema` for what this field takes"
    return e["msg"] + got, "see `suite schema` for what this field takes"


def validation_problems(file: str, err: ValidationError, root=None) -> list[Problem]:
    """Every pydantic error as `FILE: FIELD: what (fix: ...)`; a value that fits no member of a union is
    one problem naming what each member wanted. ``root``: the model validated (default: by the error's
    title, else Recipe)."""
    import difflib

    root = root or {"GateSpec": GateSpec}.get(err.title, Recipe)
    grouped: dict[str, list[tuple[str, str]]] = {}
    for e in err.errors():
        field, _ = _walk(root, e["loc"])
        quiet = field.startswith(("runtime", "tracking"))  # never echo what may be a credential
        if e["type"] == "extra_forbidden":
            parent = _strip(_walk(root, e["loc"][:-1])[1])
            known = list(parent.model_fields) if isinstance(parent, type) and issubclass(parent, BaseModel) else []
            near = difflib.get_close_matches(str(e["loc"][-1]), known, n=1, cutoff=0.6)
            what = "unknown key" + (f"; did you mean {near[0]!r}?" if near else "")
            fix = f"rename it to {near[0]!r}" if near else "remove it or check its spelling (`suite schema` lists every field)"
            grouped.setdefault(field, []).append((what, fix))
        else:
            grouped.setdefault(field, []).append(_describe(e, quiet))
    problems = []
    for field, found in grouped.items():
        if field and any(other.startswith((field + ".", field + "[")) for other in grouped):
            # a union member took the value's shape and reported what is wrong inside it: the other
            # members' "must be a string" for the whole value is noise
            found = [(w, f) for w, f in found if not w.startswith("must be")]
            if not found:
                continue
        if len(found) > 1 and len({w for w, _ in found}) > 1 and all(w.startswith("must be") for w, _ in found):
            # one value, several union members refusing it
            wants = " or ".join(dict.fromkeys(w.removeprefix("must be ").split("; got")[0] for w, _ in found))
            got = next((w.split("; got", 1)[1] for w, _ in found if "; got" in w), "")
            problems.append(Problem(file, field, f"must be {wants}" + (f"; got{got}" if got else ""), f"give {wants}"))
        else:
            problems += [Problem(file, field, w, f) for w, f in dict.fromkeys(found)]
    return problems


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    continue
                if first is not key_node:  # (also two keys on one line, in a flow mapping {a: 1, a: 2})
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (lines {first.start_mark.line + 1} and "
                        f"{key_node.start_mark.line + 1}); the later one would silently replace the first",
                        key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, file: str):
    """YAML text -> data, refusing duplicate keys; a SuiteError naming the file and line otherwise."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        dup = "appears twice" in str(what)
        raise SuiteError(Problem(file, where, f"{'' if dup else 'not valid YAML: '}{what}",
                                 "keep one of the two keys" if dup else "fix the YAML syntax at that line")) from None


def read_text(path: Path) -> str:
    """A recipe or policy file's text: a SuiteError (not a traceback) when it is missing, unreadable or
    not UTF-8."""
    if not path.is_file():
        raise SuiteError(Problem(str(path), "", "file not found" if not path.exists() else "not a file",
                                 "check the path"))
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise SuiteError(Problem(str(path), "", f"not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})",
                                 "save the file as UTF-8")) from None
    except OSError as e:
        raise SuiteError(Problem(str(path), "", f"cannot be read: {e.strerror or e}", "check its permissions")) from None


def load_recipe(path: str | Path, serving: bool = True, text: str | None = None) -> LoadedRecipe:
    """Parse and validate a recipe file, then check what it refers to (files, calibration, tasks) and,
    with ``serving``, whether the serve environment's vLLM can serve every variant and takes its engine
    arguments (commands that only quantize or analyse pass False). ``text``: the recipe as it was (a run
    folder's copy), placed at ``path`` (where it was, for its relative paths)."""
    path = Path(path)
    if text is None:
        if not path.is_file() and not path.exists():
            raise SuiteError(Problem(str(path), "", "recipe file not found", "check the path"))
        text = read_text(path)
    data = load_yaml(text, str(path))
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", f"a recipe is a YAML mapping (name:, model:, ...), not "
                                 f"{type(data).__name__ if data is not None else 'an empty file'}",
                                 "start from recipes/demo-cpu.yaml (`suite schema` lists every field)"))
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
    hub_names = None
    if any(t.name not in local for t in r.eval.tasks):  # asked of the serve environment's lm-eval, once
        from suite.environments import lm_eval_task_names

        try:
            hub_names = lm_eval_task_names()
        except SuiteError as e:
            problems += [Problem(f, "eval.tasks", f"standard lm-eval task names could not be listed: {p.message}",
                                 p.fix) for p in e.problems]
    for i, t in enumerate(r.eval.tasks):
        standard = (t.name in tasks.STANDARD_PRIMARY_METRIC) if hub_names is None else t.name in hub_names
        if t.name not in local and not standard:
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
    from suite.gate import DEFAULTS, PER_TASK  # the gate's own lists: `suite gate` refuses the same

    evaluated = {t.name for t in r.eval.tasks}
    for gate in PER_TASK:
        for task, value in getattr(r.gates, gate).items():
            if task not in evaluated:
                problems.append(Problem(f, f"gates.{gate}.{task}", "gate on a task that is not evaluated",
                                        "add the task to eval.tasks or remove the gate"))
            elif not math.isfinite(value):
                problems.append(Problem(f, f"gates.{gate}.{task}", f"threshold {value} is not a finite number",
                                        "give a finite threshold"))
    for gate, value in r.gates.model_dump().items():
        if gate in DEFAULTS and value is not None and not evaluated:
            problems.append(Problem(f, f"gates.{gate}", "an accuracy gate, but eval.tasks is empty: it checks nothing",
                                    "add eval.tasks or remove the gate"))
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(Problem(f, f"gates.{gate}", f"threshold {value} is not a finite number",
                                    "give a finite threshold"))
    problems += output_dir_problems(loaded)
    if serving:
        problems += serving_problems(loaded)
    return problems


def output_dir_problems(loaded: LoadedRecipe) -> list[Problem]:
    """output_dir must be a folder this user can write in, or creatable as one (nothing is created here:
    a probe file is made and removed in the folder, or in its nearest existing parent)."""
    out = loaded.resolve(loaded.recipe.output_dir)
    f, fld = str(loaded.path), "output_dir"
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "is a file, not a folder" if existing == out else f"cannot be made: {existing} is a file"
        return [Problem(f, fld, f"{out} {what}", "point output_dir at a folder (it is made if missing)")]
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".suite-write-check-"):
            pass
    except OSError as e:
        what = "is not writable" if existing == out else f"cannot be made: {existing} is not writable"
        return [Problem(f, fld, f"{out} {what} ({e.strerror or e})",
                        "point output_dir at a folder you can write in (run folders, checkpoints and the "
                        "evaluation cache go there)")]
    return []


def serving_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Variants the serve environment's vLLM build cannot serve (suite.environments.platform_problems), and
    engine arguments its ``EngineArgs`` does not take (name, type, choices), as Problems."""
    from suite.environments import check_engine_args, engine_args_facts, platform_problems

    f = str(loaded.path)
    problems = [Problem(f, fld, msg, fix) for fld, msg, fix in platform_problems(loaded.recipe)]
    r = loaded.recipe
    sections = [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)]
    if any(v.engine_args for _, v in sections):
        try:
            facts = engine_args_facts()
        except SuiteError as e:
            return problems + [Problem(f, "engine_args", f"cannot check engine arguments: {p.message}", p.fix)
                               for p in e.problems]
        for where, v in sections:
            problems += [Problem(f, f"{where}.engine_args.{key}", msg, fix)
                         for key, msg, fix in check_engine_args(v.engine_args, facts)[1]]
    return problems
