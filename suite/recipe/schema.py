"""The recipe: a YAML file naming a model, its BF16 baseline, FP8 variants, and how to judge them.

Every model is pydantic with ``extra="forbid"`` (an unknown key is an error, not a silent no-op, the
way llmcompressor's modifiers behave). ``load_recipe`` turns every problem into a ``SuiteError`` that
names the file, the field, what is allowed and the fix, before any model is loaded.

Relative paths in a recipe are relative to the recipe file's folder.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import Field, field_validator, model_validator

from suite.recipe.base import _NAME, EngineValue, Strict, bad
from suite.recipe import guards, kv
from suite.runtime.secrets import SECRET_ENV, URL_PASSWORD, uri_credential
from suite.recipe.throughput import ThroughputSpec
from suite.recipe.executor import ExecutorSpec

from suite.records.schemes import SCHEMES as SCHEME_TABLE  # the one table of schemes (suite/records/schemes.py)

# name -> description and the names that need calibration data, read from the table (kept for importers)
SCHEMES = {name: s.description for name, s in SCHEME_TABLE.items()}
SCHEMES_NEEDING_DATA = {name for name, s in SCHEME_TABLE.items() if s.needs_calibration}


class ModelSpec(Strict):
    """The model under test, as the baseline is served."""

    id: str = Field(description="Hugging Face model id (org/name) or a local folder (relative to the recipe)")
    revision: str | None = Field(None, description="hub revision (commit, tag or branch) for a hub id")
    dtype: Literal["bfloat16", "float16", "auto"] = Field("bfloat16", description="unquantized weights' dtype")
    max_model_len: int = Field(4096, gt=0, description="vLLM max_model_len for evaluation and serving")
    chat_template: bool = Field(
        False, description="apply the tokenizer's chat template in evaluation (lm-eval apply_chat_template)"
    )
    allow_remote_code: bool = Field(
        False, description="lets engine_args.trust_remote_code (vLLM, lm-eval and the quantize stage's loaders run the "
        "model folder's own .py files), bench_args.trust_remote_code (the benchmark client's tokenizer) and the "
        "engine arguments that name Python for vLLM to import (worker_cls, logits_processors, a "
        "distributed_executor_backend class, ...) run that code with the stages' rights (docs/07). Without it they "
        "are refused")
    weights: Literal["pretrained", "random"] = Field(
        "pretrained",
        description="'random': the folder holds config.json + tokenizer only; the baseline is served with vLLM's "
        "dummy loader and quantized variants are built from a randomly initialised model (throughput studies "
        "at a scale you have no weights for; accuracy tasks are refused)",
    )

    @field_validator("id")
    @classmethod
    def _no_credentials_in_id(cls, v: str) -> str:
        if isinstance(v, str) and (what := uri_credential(v)):
            raise bad(f"the model URL holds {what}; recipes end up in MLflow and in logs",
                      "remove it and give the credential through the environment that runs `suite` (HF_TOKEN)")
        return v


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
    num_calibration_samples: int = Field(512, gt=0, le=guards.MAX_CALIBRATION_SAMPLES,
                                         description="calibration rows used")
    max_seq_length: int = Field(2048, gt=0, description="calibration rows are cut to this many tokens")

    @field_validator("ignore")
    @classmethod
    def _patterns_compile(cls, v: list[str]) -> list[str]:
        for entry in v:
            if (why := guards.ignore_pattern_problem(entry)) is not None:
                raise bad(why, "fix the pattern after 're:' (Python's re syntax)")
        return v

    @field_validator("scheme")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None and v not in SCHEME_TABLE:
            raise bad(f"unsupported scheme {v!r}", f"use one of: {', '.join(SCHEME_TABLE)}")
        return v

    @model_validator(mode="after")
    def _data_when_needed(self) -> "QuantizationSpec":
        if self.scheme is None and self.kv_cache is None:
            raise bad("nothing to quantize", "give 'scheme', 'kv_cache: fp8', or both; or remove 'quantization'")
        needs_data = self.scheme is not None and SCHEME_TABLE[self.scheme].needs_calibration
        if (needs_data or self.kv_cache) and not self.calibration:
            why = f"scheme {self.scheme}" if needs_data else "kv_cache: fp8"
            raise bad(f"{why} needs calibration data",
                      "set 'calibration' to a set in calibration/ (e.g. chat-demo) or a set YAML of your own")
        if self.smoothing_strength is not None and not needs_data:
            raise bad("smoothing_strength (SmoothQuant) only helps static activation scales",
                      "use scheme FP8 or remove smoothing_strength")
        return self


class CheckpointSpec(Strict):
    """An existing checkpoint a variant is served from as it is (no quantize stage): a hub id or a local folder."""

    id: str = Field(description="Hugging Face model id (org/name) or a local folder (relative to the recipe)")
    revision: str | None = Field(None, description="hub revision (commit, tag or branch) for a hub id")


class VariantSpec(Strict):
    """One served configuration of the model. The baseline has no quantization."""

    name: str = Field(pattern=_NAME, max_length=guards.MAX_NAME_LEN,
                      description="short name, used in run names and metric tags")
    quantization: QuantizationSpec | None = Field(None, description="absent: serve the model as it is")
    model: CheckpointSpec | None = Field(
        None, description="serve this existing checkpoint instead of the recipe's model (no quantize stage): "
        "{id: org/name or folder, revision: ...}, or just the id; its quantization is read from its config.json "
        "(quantization_config) and shown by `suite plan` and the report. Excludes 'quantization'")

    @field_validator("model", mode="before")
    @classmethod
    def _model_shorthand(cls, v):
        return {"id": v} if isinstance(v, str) else v
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="vLLM kv_cache_dtype (fp8 reads calibrated scales from the checkpoint when present)"
    )
    engine_args: dict[str, EngineValue] = Field(
        default_factory=dict,
        description="extra vLLM engine arguments, snake_case (enforce_eager, gpu_memory_utilization, "
        "kv_cache_dtype_skip_layers: [0, 1], compilation_config: {...}); names and types are checked against "
        "the EngineArgs of the serve environment's vLLM",
    )
    kv_scales: Literal["calibrated", "unit", "dynamic", "per-head", "auto"] | None = Field(
        None, description="FP8 KV-cache scales (needs kv_cache_dtype fp8*; default: calibrated with "
        "quantization.kv_cache, else unit): calibrated (llmcompressor per-tensor k/v scales in the checkpoint), "
        "unit (no scales: vLLM's 1.0), dynamic (vLLM's calculate_kv_scales engine argument), per-head "
        "(llmcompressor strategy attn_head; vLLM's FlashAttention backend only), auto (the kvcheck stage "
        "chooses unit or dynamic by measured KL before evaluation: unit unless dynamic's KL is 1.25x lower). "
        "docs/kv-scales.md",
    )
    kv_skip_layers: Union[list[Annotated[int, Field(ge=0)]], Literal["auto"], None] = Field(
        None, description="decoder layers whose KV stays in the model dtype (vLLM kv_cache_dtype_skip_layers): "
        "layer indices, or 'auto' (the kvcheck stage's greedy choice by measured KL: `suite sensitivity --kv`)",
    )

    @model_validator(mode="after")
    def _kv_options(self) -> "VariantSpec":
        if self.model is not None and self.quantization is not None:
            raise bad("both 'model' (an existing checkpoint, served as it is) and 'quantization' (a checkpoint "
                      "built from the recipe's model) are given",
                      "remove 'quantization' to serve the checkpoint, or 'model' to build one from the recipe's model")

        if (why := kv.variant_kv_problem(self)) is not None:
            raise bad(*why)
        return self


from suite.recipe.evalspec import EvalSpec  # noqa: E402  (the eval section)
from suite.recipe.gatespec import GateSpec  # noqa: E402


class TrackingSpec(Strict):
    uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite file in the run folder)")
    experiment: str | None = Field(None, description="MLflow experiment (default: the recipe name)")

    @field_validator("uri")
    @classmethod
    def _no_credentials(cls, v: str | None) -> str | None:
        if v and (what := uri_credential(v)):
            raise bad(f"the URI holds {what}; recipes end up in MLflow and in logs",
                      "remove it from the URI and set MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD "
                      "(or ~/.mlflow/credentials) instead")
        return v


class RuntimeSpec(Strict):
    env: dict[str, str] = Field(
        default_factory=dict, description="environment variables for stage processes, from an allow list: "
        "vLLM's VLLM_* switches (not those that take a path or load code), HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, "
        "TRANSFORMERS_OFFLINE, TOKENIZERS_PARALLELISM, thread counts, CUDA_VISIBLE_DEVICES, "
        "PYTORCH_CUDA_ALLOC_CONF, NCCL_DEBUG and a few more (docs/02-recipes.md); no credentials. Anything else: "
        "set it in the environment that runs `suite`, which the stages inherit")

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
            if (why := guards.env_problem(name, v[name])) is not None:
                raise bad(*why)
        return v


class Recipe(Strict):
    schema_version: Literal[1] = 1
    name: str = Field(pattern=_NAME, max_length=guards.MAX_NAME_LEN,
                      description="recipe name: MLflow experiment and tag suite.recipe")
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
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec, description="where the run's jobs run "
                                   "(suite.recipe.executor)")
    output_dir: str = Field("../runs", description="run folders are made under this (relative to the recipe)")
    store: Optional[str] = Field(
        None, description="the folder of the evaluation cache (eval-cache/) and vLLM's compile caches (compile-cache/), "
        "relative to the recipe; one a team or a CI runner shares or restores (the SUITE_STORE setting wins over it; "
        "absent: output_dir)")

    @model_validator(mode="after")
    def _consistent(self) -> "Recipe":
        if self.baseline.quantization is not None:
            raise bad("baseline: the baseline is served as it is, not built by the quantize stage",
                      "remove baseline.quantization (an existing quantized checkpoint as the baseline: baseline.model)")
        names = [self.baseline.name] + [v.name for v in self.variants]
        folded = [n.casefold() for n in names]  # run folders and MLflow names: unique regardless of case
        dupes = sorted({n for n in names if folded.count(n.casefold()) > 1})
        if dupes:
            raise bad(f"variant names must be unique regardless of case; repeated: {', '.join(dupes)}",
                      "rename one of them")
        t, m = self.throughput, self.model
        if t is not None and "random" in t.workloads and t.input_len + t.output_len > m.max_model_len:
            raise bad(f"throughput.input_len + output_len = {t.input_len + t.output_len} tokens exceed "
                      f"model.max_model_len {m.max_model_len}: vLLM refuses every request",
                      "shorten input_len/output_len or raise model.max_model_len")
        if t is not None and t.output_len >= m.max_model_len:
            raise bad(f"throughput.output_len {t.output_len} leaves no room for a prompt in model.max_model_len "
                      f"{m.max_model_len}", "lower output_len or raise model.max_model_len")
        if t is not None and self.gates.min_goodput_gain is not None and "goodput" not in t.goodput_args(True):
            raise bad("gates.min_goodput_gain: no goodput SLOs to measure goodput against",
                      "set throughput.slo (its ttft_p99_ms / tpot_p99_ms become --goodput) or "
                      "throughput.bench_args.goodput (e.g. [\"ttft:200\", \"tpot:50\"])")
        if self.eval.max_gen_toks is not None and self.eval.max_gen_toks >= m.max_model_len:
            raise bad(f"eval.max_gen_toks {self.eval.max_gen_toks} leaves no room for a prompt in model.max_model_len "
                      f"{m.max_model_len}", "lower eval.max_gen_toks or raise model.max_model_len")
        if self.eval.engine_check is not None:
            if not self.eval.tasks:
                raise bad("eval.engine_check: no eval.tasks, so no score to compare across engine configurations",
                          "add eval.tasks or remove eval.engine_check")
            if not any(v.kv_cache_dtype.startswith("fp8") for v in self.variants):
                raise bad("eval.engine_check: no variant has an FP8 KV cache (kv_cache_dtype fp8*): the check runs for "
                          "the baseline and the FP8-KV variants, so there is no variant whose spread the gate could "
                          "set beside the baseline's", "add an FP8-KV variant or remove eval.engine_check")
        if self.throughput is None:
            if not self.eval.tasks:
                raise bad("nothing to measure", "give eval.tasks, a throughput section, or both")
            g = self.gates
            serving_gates = [n for n, v in [("min_throughput_gain", g.min_throughput_gain),
                                            ("max_ttft_p99_ms", g.max_ttft_p99_ms),
                                            ("max_tpot_p99_ms", g.max_tpot_p99_ms),
                                            ("min_sustainable_rate_gain", g.min_sustainable_rate_gain),
                                            ("min_goodput_gain", g.min_goodput_gain)] if v is not None]
            if serving_gates:
                raise bad(f"gates.{serving_gates[0]} needs a throughput section (this recipe has none)",
                          "add one or remove the gate")
        return self

    def all_variants(self) -> list[VariantSpec]:
        return [self.baseline, *self.variants]
