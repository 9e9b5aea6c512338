"""The planner: a validated recipe -> the stage jobs of one run, in order, with their typed configs.

Nothing here runs a model. ``make_plan`` decides, per variant, which checkpoint it is served from
(the base model, or a content-addressed quantized checkpoint: ``suite.plan.keys``), and builds the
configs that the stage processes will read. The runner executes the plan; ``suite plan`` prints it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from suite.runtime.errors import SuiteError
from suite.recipe import LoadedRecipe, VariantSpec, kv
from suite.records.benchmark import BenchmarkConfig
from suite.records.evaluate import EngineConfig
from suite.records.evaluate import EvaluateConfig, TaskRun
from suite.records.kvcheck import KVCheckConfig
from suite.records.quantize import QuantizeConfig
from suite.plan import dag
from suite.plan.dag import Job
from suite.plan.keys import checkpoint_key, quantizer_versions
from suite.recipe.executor import ExecutorSpec
from suite.stages.evaluate.tasks import TASKS_DIR
from suite.stages.registry import ENGINE_CHECKS, RUN_ORDER

@dataclass
class VariantPlan:
    variant: VariantSpec
    is_baseline: bool
    model_path: str
    quantize: QuantizeConfig | None
    evaluate: EvaluateConfig | None
    benchmark: BenchmarkConfig | None
    kvcheck: KVCheckConfig | None = None
    checkpoint: dict | None = None  # variants[].model: what its config.json says of its quantization (suite.recipe.checkpoint)
    # eval.engine_check: (label, evaluate config with the override), one per configuration, the i-th run as the
    # registry's ENGINE_CHECKS[i] stage (the baseline and FP8-KV variants only; empty: no check)
    engine_checks: list[tuple[str, EvaluateConfig]] = field(default_factory=list)

    def config(self, stage: str):
        """The config of ``stage`` for this variant (None: the variant does not run it)."""
        if stage in ENGINE_CHECKS:
            i = ENGINE_CHECKS.index(stage)
            return self.engine_checks[i][1] if i < len(self.engine_checks) else None
        return getattr(self, stage)

    def check_label(self, stage: str) -> str | None:
        """The engine-check configuration's label (e.g. 'max_num_seqs=64') that ``stage`` scores; None: not a check."""
        if stage not in ENGINE_CHECKS:
            return None
        i = ENGINE_CHECKS.index(stage)
        return self.engine_checks[i][0] if i < len(self.engine_checks) else None


@dataclass
class Plan:
    run_dir: Path
    checkpoints_dir: Path
    variants: list[VariantPlan] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    dag: list[Job] = field(default_factory=list)  # suite.plan.dag: dependencies and resources, publish last

    def jobs(self) -> list[tuple[str, str]]:
        """(stage, variant) of every stage job, in a valid order (RUN_ORDER: quantize first, then kvcheck,
        evaluate, benchmark); ``dag`` has what each waits for and asks for."""
        return [(stage, v.variant.name) for stage in RUN_ORDER for v in self.variants if v.config(stage)]


def absolute_calibration(loaded: LoadedRecipe, calib):
    """Set YAML paths in a recipe's calibration made absolute (they are relative to the recipe)."""
    from suite.stages.quantize import calibration

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
    from suite.runtime.engine.args import check_engine_args
    from suite.runtime.envs import engine_args_facts

    typed, _ = check_engine_args(engine_args, engine_args_facts())
    return {k: typed.get(k, v) for k, v in engine_args.items()}


def make_plan(loaded: LoadedRecipe, run_dir: Path, checkpoints_dir: Path | None = None) -> Plan:
    from suite.stages.quantize import calibration

    r = loaded.recipe
    base_model = loaded.model_path()
    checkpoints_dir = checkpoints_dir or loaded.resolve(r.output_dir) / "checkpoints"
    plan = Plan(run_dir=run_dir, checkpoints_dir=checkpoints_dir, env=dict(r.runtime.env))
    tasks = [TaskRun(name=t.name, metric=t.metric,
                     num_fewshot=t.num_fewshot if t.num_fewshot is not None else r.eval.num_fewshot,
                     limit=t.limit if t.limit is not None else r.eval.limit) for t in r.eval.tasks]
    quantizer = quantizer_versions() if any(v.quantization for v in r.variants) else None
    kv_check = kv.kv_check_enabled(r)
    eval_only_args = engine_args_as_vllm_takes_them(r.eval.engine_args)  # eval.engine_args, typed once
    check_overrides = [engine_args_as_vllm_takes_them(c) for c in r.eval.engine_check_configs()]
    for variant in r.all_variants():
        is_baseline = variant is r.baseline
        q = variant.quantization
        quantize = None
        model_path = base_model
        checkpoint = None
        if variant.model is not None:  # an existing checkpoint, served as it is: no quantize job
            model_path, checkpoint = existing_checkpoint(loaded, variant)
        if q is not None:
            calib = absolute_calibration(loaded, q.calibration)
            calib_sha = calibration.content_hash(calib) if calib else None  # reads the data once: key + provenance
            key = checkpoint_key(base_model, r.model.revision, variant, r.model.weights, calib_sha, quantizer)
            per_head = q.kv_cache and variant.kv_scales == "per-head"
            kv_tag = ("-kvhead" if per_head else "-kv") if q.kv_cache else ""
            # named by content, not by variant: two variants with the same quantization share one checkpoint
            model_path = str(checkpoints_dir / f"{(q.scheme or 'bf16').lower()}{kv_tag}-{key}")
            quantize = QuantizeConfig(
                model=base_model, revision=r.model.revision, random_weights=r.model.weights == "random",
                scheme=q.scheme, ignore=q.ignore,
                kv_cache=q.kv_cache, kv_cache_strategy=kv.PER_HEAD_STRATEGY if per_head else None, calibration=calib, smoothing_strength=q.smoothing_strength,
                num_calibration_samples=q.num_calibration_samples,
                max_seq_length=q.max_seq_length, checkpoint_dir=model_path, key=key,
                provenance={"recipe": r.name, "recipe_sha256": loaded.sha256, "variant": variant.model_dump(),
                            "model": r.model.model_dump(),
                            "calibration_sha256": calib_sha, "quantizer": quantizer},
            )
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
        own_dtype = q is not None or bool(checkpoint and checkpoint.get("quant_method"))
        engine = EngineConfig(model=model_path, dtype="auto" if own_dtype else r.model.dtype,
                              max_model_len=r.model.max_model_len, kv_cache_dtype=variant.kv_cache_dtype,
                              engine_args=engine_args, batch_invariant=r.eval.deterministic)
        vdir = run_dir / "variants" / variant.name
        eval_engine = engine if not eval_only_args else engine.model_copy(
            update={"engine_args": {**engine.engine_args, **eval_only_args}})
        evaluate = None if not tasks else EvaluateConfig(
            engine=eval_engine, tasks=tasks, batch_size=r.eval.batch_size, data_dir=str(loaded.resolve(r.eval.data_dir)),
            include_path=str(TASKS_DIR), extra_include_paths=include_paths(loaded), apply_chat_template=r.model.chat_template,
            allow_code_execution=r.eval.allow_code_execution, code_sandbox=r.eval.code_sandbox,
            max_gen_toks=r.eval.max_gen_toks, backend="served" if r.eval.engine == "served" else "vllm",
            seed=r.eval.seed, loglikelihood=r.eval.loglikelihood, output_dir=str(vdir / "evaluate"),
        )
        benchmark = None  # an accuracy-only recipe has no throughput section
        if (t := r.throughput) is not None:
            served = evaluate if r.eval.engine == "served" else None  # scored on the benchmark's server
            benchmark = benchmark_config(t, engine, dataset_file=loaded.resolve(t.dataset.path) if t.dataset else None,
                                         data_dir=str(loaded.resolve(r.eval.data_dir)),
                                         chat_template=r.model.chat_template, output_dir=str(vdir / "benchmark"),
                                         evaluate=served)
            if served is not None:
                evaluate = None  # one engine start per variant: no evaluate job
            elif evaluate is not None and not evaluate.engine.engine_args.get("enforce_eager"):
                # the server after it reads this engine's compile cache (an eager engine compiles nothing)
                evaluate = evaluate.model_copy(update={"batch_limits": "serve"})
        elif evaluate is not None:  # no server starts this variant: FlashInfer's sampler JIT would be the engine's alone
            evaluate = evaluate.model_copy(update={"flashinfer_sampler": False})
        kvcheck = kvcheck_config(loaded, variant, model_path) if kv.fp8_kv(variant) and kv_check else None
        checks = engine_check_configs(evaluate, check_overrides, vdir) if is_baseline or kv.fp8_kv(variant) else []
        plan.variants.append(VariantPlan(variant, is_baseline, model_path, quantize, evaluate, benchmark, kvcheck,
                                         checkpoint, checks))
    dag.share_gpus(plan, r.executor)
    plan.executor, plan.dag = r.executor, dag.build(plan, r.executor)
    return plan


def check_label(override: dict) -> str:
    """An engine-check configuration's label: its overrides, 'name=value' joined by ', '."""
    return ", ".join(f"{k}={v}" for k, v in override.items())


def engine_check_configs(evaluate: EvaluateConfig | None, overrides: list[dict],
                         vdir: Path) -> list[tuple[str, EvaluateConfig]]:
    """eval.engine_check: the variant's evaluation once more per override (over its engine arguments), each
    writing to its own folder (variants/<name>/evaluate-check-<i>): (label, config) in ENGINE_CHECKS order. An
    override changes the config and so the evaluation cache key."""
    if evaluate is None:
        return []
    out = []
    for stage, override in zip(ENGINE_CHECKS, overrides):
        engine = evaluate.engine.model_copy(update={"engine_args": {**evaluate.engine.engine_args, **override}})
        out.append((check_label(override), evaluate.model_copy(update={
            "engine": engine, "output_dir": str(vdir / stage)})))
    return out


def include_paths(loaded: LoadedRecipe) -> list[str]:
    """eval.include_path as absolute folders (relative to the recipe)."""
    ip = loaded.recipe.eval.include_path
    return [str(loaded.resolve(p)) for p in ([ip] if isinstance(ip, str) else ip or [])]


def existing_checkpoint(loaded: LoadedRecipe, variant: VariantSpec) -> tuple[str, dict]:
    """(the path or hub id the engine is given, what its config.json says of its quantization) for a variant
    served from an existing checkpoint (``variants[].model``); `suite validate` has checked it can be read."""
    from suite.recipe import checkpoint

    path = checkpoint.model_path(loaded, variant.model)
    try:
        info = checkpoint.describe(path, variant.model.revision)
    except (OSError, ValueError) as e:
        info = {"summary": f"config.json unreadable: {e}"}
    return path, {"model": path, "revision": variant.model.revision, **info}


def kvcheck_config(loaded: LoadedRecipe, variant: VariantSpec, model_path: str, **over) -> KVCheckConfig:
    """The kvcheck stage's config for a variant with an FP8 KV cache: its scale option, the options the
    serve environment can serve instead (the recommendation is chosen among them), its kept layers."""
    r = loaded.recipe
    scales = kv.effective_kv_scales(variant)
    q = variant.quantization
    candidates = ([] if scales == "auto" else [scales]) + ["unit"] + (["calibrated"] if q is not None and q.kv_cache else [])
    try:
        from suite.runtime.envs import engine_args_facts

        if kv.DYNAMIC_ARG in engine_args_facts().get("fields", {}) and not (q is not None and q.kv_cache):
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


def with_results(vp: VariantPlan, vs) -> VariantPlan:
    """The variant's plan with what its finished stages decided passed on to the later ones: the layers
    kvcheck chose for ``kv_skip_layers: auto`` and the scale option it chose for ``kv_scales: auto`` go into
    its evaluate and benchmark engine arguments (and so into their configs, the evaluation cache key and
    the summary). ``vs``: its ``VariantSummary``."""
    chk = getattr(vs, "kvcheck", None)
    extra: dict = {}
    if chk is not None and chk.auto and vp.variant.kv_skip_layers == "auto":
        extra.update(kv.skip_layer_args(chk.skip_layers))
    if chk is not None and chk.kv_scales_auto and vp.variant.kv_scales == "auto":
        extra.update(kv.scale_args(chk.kv_scales))
    if not extra:
        return vp
    update = {}
    def keep(cfg):
        engine = cfg.engine.model_copy(update={"engine_args": {**cfg.engine.engine_args, **extra}})
        return cfg.model_copy(update={"engine": engine})

    for stage in ("evaluate", "benchmark"):
        if (cfg := vp.config(stage)) is not None:
            update[stage] = keep(cfg)
    if vp.engine_checks:  # eval.engine_check: scored as the main evaluation is
        update["engine_checks"] = [(label, keep(cfg)) for label, cfg in vp.engine_checks]
    if update.get("benchmark") is not None and update["benchmark"].evaluate is not None:  # eval.engine: served
        update["benchmark"] = update["benchmark"].model_copy(update={"evaluate": keep(update["benchmark"].evaluate)})
    return dataclasses.replace(vp, **update)


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
                         "gpu_hour_cost": "the price the summary turns into cost per 1M output tokens "
                                          "(suite.analysis.summary), not a stage setting"}


def benchmark_config(t, engine: EngineConfig, dataset_file: Path | None = None, **rest) -> BenchmarkConfig:
    """The benchmark stage's config from the recipe's throughput section (``t``) through THROUGHPUT_TO_BENCHMARK."""
    dumped = t.model_dump()
    if dataset_file is not None and dumped.get("dataset"):  # workload 'dataset': the file by path and content
        import hashlib

        dumped["dataset"] = {**dumped["dataset"], "path": str(dataset_file),
                             "sha256": hashlib.sha256(dataset_file.read_bytes()).hexdigest()}
    return BenchmarkConfig(engine=engine, **{dst: dumped[src] for src, dst in THROUGHPUT_TO_BENCHMARK.items()}, **rest)
