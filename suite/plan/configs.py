"""The built-in stages' config builders: each registry entry (``StageSpec.config_builder``) names one of these.

A builder is ``build(ctx, spec) -> config | None``: ``ctx`` is the planner's ``VariantContext`` for one variant (the
recipe, the variant, the model it is served from, its engine, the other stages' configs through ``ctx.config``),
``spec`` the stage's ``StageSpec``; None: the variant does not run the stage. The helpers below are what they share
with other callers (`suite sensitivity` builds a kvcheck config, tests read the throughput mapping).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from suite.runtime import safeio, envs
from suite.recipe import LoadedRecipe, VariantSpec, kv
from suite.records.benchmark import GATED_FIGURES, AdaptiveRepetitions, BenchmarkConfig
from suite.records.evaluate import EngineConfig, EvaluateConfig, SequentialConfig
from suite.records.kvcheck import KVCheckConfig
from suite.records.quantize import QuantizeConfig
from suite.plan.keys import checkpoint_key
from suite.runtime.errors import SuiteError
from suite.stages.evaluate.tasks import TASKS_DIR
from suite.stages.registry import BENCHMARK, ENGINE_CHECKS, EVALUATE, STAGES, StageSpec
from suite.stages.quantize import calibration
from suite.runtime.engine.args import check_engine_args

if TYPE_CHECKING:
    from suite.plan.planner import VariantContext


def quantize(ctx: VariantContext, spec: StageSpec) -> QuantizeConfig | None:
    """The variant's checkpoint, named by content, not by variant: two variants with the same quantization share
    one (``suite.plan.keys.checkpoint_key``)."""
    q, r, variant, loaded = ctx.variant.quantization, ctx.recipe, ctx.variant, ctx.loaded
    if q is None:
        return None
    calib = absolute_calibration(loaded, q.calibration)
    calib_sha = calibration.content_hash(calib) if calib else None  # reads the data once: key + provenance
    base_model, quantizer = ctx.plan.base_model, ctx.plan.quantizer
    key = checkpoint_key(base_model, r.model.revision, variant, r.model.weights, calib_sha, quantizer)
    per_head = q.kv_cache and variant.kv_scales == "per-head"
    kv_tag = ("-kvhead" if per_head else "-kv") if q.kv_cache else ""
    folder = ctx.plan.checkpoints_dir / f"{(q.scheme or 'bf16').lower()}{kv_tag}-{key}"
    return QuantizeConfig(
        model=base_model, revision=r.model.revision, random_weights=r.model.weights == "random",
        scheme=q.scheme, ignore=q.ignore,
        kv_cache=q.kv_cache, kv_cache_strategy=kv.PER_HEAD_STRATEGY if per_head else None, calibration=calib,
        smoothing_strength=q.smoothing_strength, num_calibration_samples=q.num_calibration_samples,
        max_seq_length=q.max_seq_length, checkpoint_dir=str(folder), key=key,
        provenance={"recipe": r.name, "recipe_sha256": loaded.sha256, "variant": variant.model_dump(),
                    "model": r.model.model_dump(),
                    "calibration_sha256": calib_sha, "quantizer": quantizer},
    )


def kvcheck(ctx: VariantContext, spec: StageSpec) -> KVCheckConfig | None:
    """The KV-scale check of a variant with an FP8 KV cache, where the recipe asks for it (``kv.kv_check_enabled``)."""
    if not (kv.fp8_kv(ctx.variant) and ctx.plan.kv_check):
        return None
    return kvcheck_config(ctx.loaded, ctx.variant, ctx.model_path)


def evaluate(ctx: VariantContext, spec: StageSpec) -> EvaluateConfig | None:
    """The variant's evaluation (``evaluation``), as the server that serves it after it needs it."""
    planned = evaluation(ctx)
    if planned is None:
        return None
    bench = ctx.config(BENCHMARK)
    if bench is None:  # no server starts this variant: FlashInfer's sampler JIT would be the engine's alone
        return planned.model_copy(update={"flashinfer_sampler": False})
    if bench.evaluate is not None:  # eval.engine: served: scored on the benchmark's server, one engine start
        return None
    if not planned.engine.engine_args.get("enforce_eager"):
        # the server after it reads this engine's compile cache (an eager engine compiles nothing)
        return planned.model_copy(update={"batch_limits": "serve"})
    return planned


def engine_check(ctx: VariantContext, spec: StageSpec) -> EvaluateConfig | None:
    """eval.engine_check: the variant's evaluation once more under the i-th override (over its engine arguments),
    for the baseline and the FP8-KV variants, writing to its own folder (variants/<name>/evaluate-check-<i>). An
    override changes the config and so the evaluation cache key; its label goes into ``ctx.labels``."""
    i = ENGINE_CHECKS.index(spec.name)
    checked = ctx.config(spec.check_of)
    if checked is None or i >= len(ctx.plan.check_overrides) or not (ctx.is_baseline or kv.fp8_kv(ctx.variant)):
        return None
    override = ctx.plan.check_overrides[i]
    ctx.labels[spec.name] = check_label(override)
    engine = checked.engine.model_copy(update={"engine_args": {**checked.engine.engine_args, **override}})
    return checked.model_copy(update={"engine": engine, "output_dir": str(ctx.vdir / spec.output_dirs[0])})


def served_check(ctx: VariantContext, spec: StageSpec) -> EvaluateConfig | None:
    """eval.served_check_items: the served evaluation's first N items of each task scored by the in-process engine,
    configured as the evaluate stage would be with eval.engine: vllm (the server's batch limits), in its own folder
    (variants/<name>/evaluate-served-check). lm-eval's ``limit`` takes a task's first rows, so the items pair."""
    n = ctx.recipe.eval.served_check_n()
    bench = ctx.config(BENCHMARK)
    if not n or bench is None or bench.evaluate is None:
        return None
    tasks = [t.model_copy(update={"limit": float(min(n, t.limit) if t.limit and t.limit >= 1 else n)})
             for t in bench.evaluate.tasks]
    checked = bench.evaluate.model_copy(update={"backend": "vllm", "base_url": None, "tasks": tasks,
                                                "output_dir": str(ctx.vdir / spec.output_dirs[0])})
    if not checked.engine.engine_args.get("enforce_eager"):
        return checked.model_copy(update={"batch_limits": "serve"})
    return checked


def benchmark(ctx: VariantContext, spec: StageSpec) -> BenchmarkConfig | None:
    """The serving benchmark, from the recipe's throughput section (None: an accuracy-only recipe); with
    eval.engine: served it carries the variant's evaluation, scored on its server."""
    r, loaded = ctx.recipe, ctx.loaded
    if (t := r.throughput) is None:
        return None
    t = t.model_copy(update={"bench_args": t.goodput_args(r.gates.min_goodput_gain is not None)})
    return benchmark_config(t, engine(ctx), dataset_file=loaded.resolve(t.dataset.path) if t.dataset else None,
                            data_dir=str(loaded.resolve(r.eval.data_dir)), chat_template=r.model.chat_template,
                            output_dir=str(ctx.vdir / spec.output_dirs[0]),
                            evaluate=evaluation(ctx) if r.eval.engine == "served" else None,
                            adaptive=adaptive_repetitions(ctx, spec))


def adaptive_repetitions(ctx: VariantContext, spec: StageSpec) -> AdaptiveRepetitions | None:
    """throughput.adaptive_repetitions for a variant (not the baseline, which runs its fixed count first): the
    throughput gates' limits by the figure their ratio is of, the headline rule, and the baseline's benchmark
    result, which its benchmark waits for (plan.dag). None: switched off, no throughput gate, or fewer than 3
    repetitions (at least 2 are run, so 2 leave nothing to decide)."""
    r = ctx.recipe
    t = r.throughput
    if ctx.is_baseline or not t.adaptive_repetitions or t.repetitions <= 2:
        return None
    limits = {figure: limit for gate, figure in GATED_FIGURES.items() if (limit := getattr(r.gates, gate)) is not None}
    if not limits:
        return None
    base = ctx.plan.run_dir / "variants" / r.baseline.name / f"{spec.name}.result.json"
    stated = json.dumps({"model": r.model.model_dump(mode="json"), "baseline": r.baseline.model_dump(mode="json"),
                         "throughput": t.model_dump(mode="json")}, sort_keys=True, default=str)
    return AdaptiveRepetitions(limits=limits, headline=t.headline, baseline_result=str(base),
                               baseline_sha256=hashlib.sha256(stated.encode()).hexdigest())


def engine(ctx: VariantContext) -> EngineConfig:
    """The engine every stage that serves the variant starts (evaluate, benchmark): its model folder, dtype, KV
    cache and engine arguments (typed as vLLM takes them), with what its revision and KV options add."""
    return ctx.shared("engine", lambda: _engine(ctx))


def _engine(ctx: VariantContext) -> EngineConfig:
    r, variant, q = ctx.recipe, ctx.variant, ctx.variant.quantization
    engine_args = engine_args_as_vllm_takes_them(variant.engine_args)
    if variant.model is not None:  # its own revision (in the evaluation cache key through engine_args)
        if variant.model.revision:
            engine_args.update(revision=variant.model.revision, tokenizer_revision=variant.model.revision)
    elif q is None and r.model.weights == "random":
        engine_args.setdefault("load_format", "dummy")  # config.json only: vLLM fills random weights
    elif q is None and r.model.revision:  # the hub revision the checkpoints were built from, served and scored too
        # (and so in the evaluation cache key); lm-eval loads its own tokenizer by tokenizer_revision
        engine_args.update(revision=r.model.revision, tokenizer_revision=r.model.revision)
    if variant.kv_scales == "dynamic":
        engine_args[kv.DYNAMIC_ARG] = True
    if isinstance(variant.kv_skip_layers, list):
        engine_args.update(kv.skip_layer_args(variant.kv_skip_layers))
    # a quantized checkpoint's dtype is its own (as a built variant's); an unquantized one is served as the base
    own_dtype = q is not None or bool(ctx.checkpoint and ctx.checkpoint.get("quant_method"))
    return EngineConfig(model=ctx.model_path, dtype="auto" if own_dtype else r.model.dtype,
                        max_model_len=r.model.max_model_len, kv_cache_dtype=variant.kv_cache_dtype,
                        engine_args=engine_args, batch_invariant=r.eval.deterministic)


def evaluation(ctx: VariantContext) -> EvaluateConfig | None:
    """The variant's evaluation as the recipe's eval section describes it (None: no tasks), on its engine with
    eval.engine_args over it: the evaluate stage's config before it knows what serves the variant after it, and
    what a served benchmark scores."""
    return ctx.shared("evaluation", lambda: _evaluation(ctx))


def _evaluation(ctx: VariantContext) -> EvaluateConfig | None:
    r, loaded = ctx.recipe, ctx.loaded
    if not ctx.plan.tasks:
        return None
    served_by = engine(ctx)
    if ctx.plan.eval_only_args:  # eval.engine_args, typed once
        served_by = served_by.model_copy(update={"engine_args": {**served_by.engine_args, **ctx.plan.eval_only_args}})
    return EvaluateConfig(
        engine=served_by, tasks=ctx.plan.tasks, batch_size=r.eval.batch_size,
        data_dir=str(loaded.resolve(r.eval.data_dir)),
        include_path=str(TASKS_DIR), extra_include_paths=include_paths(loaded), apply_chat_template=r.model.chat_template,
        allow_code_execution=r.eval.allow_code_execution, code_sandbox=r.eval.code_sandbox,
        max_gen_toks=r.eval.max_gen_toks, backend="served" if r.eval.engine == "served" else "vllm",
        seed=r.eval.seed, loglikelihood=r.eval.loglikelihood, output_dir=str(ctx.vdir / STAGES[EVALUATE].output_dirs[0]),
        sequential=sequential(ctx),
    )


def sequential(ctx: VariantContext) -> SequentialConfig | None:
    """eval.sequential for one variant: the baseline scores every look; a variant carries each task's margin (the
    smallest of its max_drop and non_inferiority_margin: both pass when the paired delta's lower bound is above
    minus it) and the baseline's result, which its evaluation waits for (plan.dag). A task that another accuracy gate
    judges on all items (max_relative_drop, min_recovery_lower_bound) gets no margin: it is scored in full."""
    r = ctx.recipe
    if (seq := r.eval.sequential) is None:
        return None
    if ctx.is_baseline:
        return SequentialConfig(looks=seq.looks, seed=seq.seed)
    g, margins = r.gates, {}
    for t in ctx.plan.tasks:
        if (g.max_relative_drop.get(t.name, g.default_max_relative_drop) is not None
                or t.name in g.min_recovery_lower_bound):
            continue
        limits = [x for x in (g.max_drop.get(t.name, g.default_max_drop),
                              g.non_inferiority_margin.get(t.name, g.default_non_inferiority_margin)) if x is not None]
        if limits:
            margins[t.name] = min(limits)
    base = ctx.plan.run_dir / "variants" / r.baseline.name / f"{EVALUATE}.result.json"
    return SequentialConfig(looks=seq.looks, seed=seq.seed, margins=margins, baseline_result=str(base))


def absolute_calibration(loaded: LoadedRecipe, calib):
    """Set YAML paths in a recipe's calibration made absolute (they are relative to the recipe)."""
    if calib is None:
        return None
    fix = lambda ref: str(loaded.resolve(ref)) if calibration.is_file_ref(ref) else ref  # noqa: E731
    if isinstance(calib, str):
        return fix(calib)
    return [{"set": fix(ref), "weight": w} for ref, w in calibration.mix_parts(calib)]


def engine_args_as_vllm_takes_them(engine_args: dict) -> dict:
    """The recipe's engine arguments typed as the serve environment's EngineArgs declares them, so that
    ``LLM(...)`` (evaluate) gets what ``vllm serve``'s parser would make of the same flags (benchmark):
    ``kv_cache_dtype_skip_layers: [0, 1]`` -> ['0', '1'], a list[str] field. Names and types were checked
    by ``suite validate`` (recipe.serving_problems); anything it would refuse is passed on unchanged."""
    if not engine_args:
        return {}

    typed, _ = check_engine_args(engine_args, envs.engine_args_facts())
    return {k: typed.get(k, v) for k, v in engine_args.items()}


def check_label(override: dict) -> str:
    """An engine-check configuration's label: its overrides, 'name=value' joined by ', '."""
    return ", ".join(f"{k}={v}" for k, v in override.items())


def include_paths(loaded: LoadedRecipe) -> list[str]:
    """eval.include_path as absolute folders (relative to the recipe)."""
    ip = loaded.recipe.eval.include_path
    return [str(loaded.resolve(p)) for p in ([ip] if isinstance(ip, str) else ip or [])]


def kvcheck_config(loaded: LoadedRecipe, variant: VariantSpec, model_path: str, **over) -> KVCheckConfig:
    """The kvcheck stage's config for a variant with an FP8 KV cache: its scale option, the options the
    serve environment can serve instead (the recommendation is chosen among them), its kept layers."""
    r = loaded.recipe
    scales = kv.effective_kv_scales(variant)
    q = variant.quantization
    candidates = ([] if scales == "auto" else [scales]) + ["unit"] + (["calibrated"] if q is not None and q.kv_cache else [])
    try:
        if kv.DYNAMIC_ARG in envs.engine_args_facts().get("fields", {}) and not (q is not None and q.kv_cache):
            candidates.append("dynamic")
    except SuiteError:
        pass  # no serve environment to ask: 'dynamic' is not offered
    texts = loaded.resolve(r.eval.data_dir) / "longtext" / "docs.jsonl"
    texts = texts if texts.is_file() else TASKS_DIR / "data" / "longtext" / "docs.jsonl"
    skip = variant.kv_skip_layers
    return KVCheckConfig(**{"model": model_path, "texts_file": str(texts), "num_texts": r.eval.kv_check_texts,
                            "max_tokens": r.eval.kv_check_tokens, "kv_scales": scales,
                            "candidates": list(dict.fromkeys(candidates)),
                            "skip_layers": skip if isinstance(skip, list) else [], "auto_skip": skip == "auto", **over})


# ThroughputSpec field -> BenchmarkConfig field, written out: a field renamed on one side fails
# tests/plan/test_plan.py (every ThroughputSpec field is mapped or in THROUGHPUT_NOT_PASSED) instead of
# being dropped silently
THROUGHPUT_TO_BENCHMARK = {
    "input_len": "input_len", "output_len": "output_len", "num_prompts": "num_prompts", "workload": "workload",
    "request_rates": "request_rates", "concurrencies": "concurrencies", "api_server_count": "api_server_count",
    "max_api_server_count": "max_api_server_count", "repetitions": "repetitions",
    "warmup_requests": "warmup_requests", "slo": "slo", "offline_ceiling": "offline_ceiling",
    "metrics_interval_s": "metrics_interval_s", "point_timeout_s": "point_timeout_s", "gpu": "gpu", "seed": "seed",
    "server_timeout_s": "server_timeout_s", "dataset": "dataset", "bench_args": "bench_args",
}
THROUGHPUT_NOT_PASSED = {"headline": "which load point the summary reports (suite.analysis.summary), not a stage setting",
                         "adaptive_repetitions": "becomes the variant's BenchmarkConfig.adaptive, with the gates' "
                                                 "limits and the baseline's result (adaptive_repetitions above)",
                         "gpu_hour_cost": "the price the summary turns into cost per 1M output tokens "
                                          "(suite.analysis.summary), not a stage setting"}


def benchmark_config(t, engine: EngineConfig, dataset_file: Path | None = None, **rest) -> BenchmarkConfig:
    """The benchmark stage's config from the recipe's throughput section (``t``) through THROUGHPUT_TO_BENCHMARK."""
    dumped = t.model_dump()
    if dataset_file is not None and dumped.get("dataset"):  # workload 'dataset': the file by path and content
        dumped["dataset"] = {**dumped["dataset"], "path": str(dataset_file),
                             "sha256": safeio.sha256(dataset_file, "dataset")}
    return BenchmarkConfig(engine=engine, **{dst: dumped[src] for src, dst in THROUGHPUT_TO_BENCHMARK.items()}, **rest)
