"""The kvcheck stage: per-layer FP8 KV scale check, KL per scale option, and the greedy kv_skip_layers: auto choice.

Everything is a fake quant (quantize-dequantize to E4M3) in Hugging Face attention
(``suite.stages.kvcheck.measure``), on held-out text the calibration mixes do not contain (the first
``max_tokens`` tokens of the first ``num_texts`` documents of ``tasks/data/longtext/docs.jsonl``).

The flags are kvcheck's (its docstring states each threshold and why): clipping > 1e-4 of values,
rel err > 2**-4 or > 2x the median layer's, and the attention output error > 1.5x the same layer's under
the ideal per-tensor scale. ``kv_skip_layers: auto`` ranks the layers by the KL of one layer's KV in FP8
(every other layer BF16) and keeps in BF16 the fewest top-ranked layers that bring the all-layer KL to at
most max(1.25 x unit scale's all-layer KL, 0.005 nats/token): unit scale (vLLM's default) was within the
noise of BF16 on a GPU (GSM8K within a point at twice the KV capacity), so it is the measured
reference of "harmless"; the 25 % margin covers the KL's spread over a few thousand tokens; the floor
stops the greedy from chasing rounding noise when unit's KL is itself tiny.
"""

from __future__ import annotations

import logging
import time

from suite.records.kvcheck import KVCheckConfig, KVCheckResult
from suite.runtime import safeio
from suite.runtime.envs import package_versions
from suite.stages.kvcheck import measure as kc

log = logging.getLogger(__name__)

KVCHECK_OPTION = {"calibrated": "calibrated", "unit": "unit", "dynamic": "vllm-calc", "per-head": "per-head"}
CHECKED_TENSORS = ("k", "v", "attn")  # Q is FP8 only on FlashAttention-3, at scale 1.0 for every option
# kv_scales: auto (and the recommendation): unit scale, vLLM's default, unless another option's measured KL
# is this many times lower. Unit was within the noise of BF16 on a GPU
# (studies/2026-12-01-fp8-kv-cache); vLLM's run-time scales had 0.91x unit's KL on CPU (0.0163 vs
# 0.0179, docs/kv-scales.md) yet lost 1.44 GSM8K points on the GPU against unit's 0.83: a KL difference of
# ~10% over a few thousand tokens does not predict accuracy, so only a clear win (the 25% margin
# kv_skip_layers: auto uses) moves off the default.
AUTO_KL_MARGIN = 1.25


def choose_scales(kl: dict[str, float], candidates: list[str], margin: float = AUTO_KL_MARGIN) -> str | None:
    """The scale option kv_scales: auto serves with (and kvcheck recommends), from ``kl`` (option -> KL of
    every layer in FP8): 'unit' when it is a candidate, unless another candidate's KL is more than
    ``margin`` times lower (then the lowest); without 'unit', the lowest. None without a measured candidate."""
    measured = [o for o in candidates if o in kl]
    if not measured:
        return None
    best = min(measured, key=lambda o: kl[o])
    if "unit" in measured and best != "unit" and not kl[best] * margin < kl["unit"]:
        return "unit"
    return best


def read_texts(path: str, n: int) -> list[str]:
    out = []
    for row in safeio.iter_jsonl(path, "dataset"):
        out.append(row["text"])
        if len(out) >= n:
            break
    if not out:
        raise ValueError(f"{path}: no texts")
    return out


def capacity(num_layers: int, kept: int) -> float:
    """KV capacity against a BF16 cache with ``kept`` of ``num_layers`` layers in BF16: 2L/(L+s)."""
    return 2 * num_layers / (num_layers + kept)


def _kl_row(r) -> dict[str, float]:
    return {"kl": r.kl, "ppl": r.ppl, "ppl_bf16": r.ppl_bf16, "top1_agree": r.top1_agree, "tokens": float(r.tokens)}


def sweep(model, model_dir: str, texts, option: str, num_layers: int, reference, max_tokens: int) -> list[dict]:
    """One layer's KV in FP8 at a time (every other layer BF16): {layer, kl, ppl, ppl_delta}, most harmful first."""
    rows = []
    for layer in range(num_layers):
        others = [i for i in range(num_layers) if i != layer]
        r = kc.kv_fake_quant_kl(model_dir, texts, option, skip_layers=others, model=model, reference=reference,
                                max_tokens=max_tokens)
        rows.append({"layer": layer, "kl": r.kl, "ppl": r.ppl, "ppl_delta": r.ppl - r.ppl_bf16})
    return sorted(rows, key=lambda x: -x["kl"])


def greedy_skip(model, model_dir: str, texts, option: str, ranked: list[dict], kl_all: float, target: float,
                max_layers: int, reference, max_tokens: int) -> tuple[list[int], float]:
    """The fewest top-ranked layers whose KV kept in BF16 brings the all-layer KL to ``target`` or below
    (at most ``max_layers``; the best reached when the target is not). Each step's KL is written into its row."""
    kept: list[int] = []
    kl = kl_all
    for row in ranked[:max_layers]:
        if kl <= target:
            break
        kept.append(row["layer"])
        kl = kc.kv_fake_quant_kl(model_dir, texts, option, skip_layers=kept, model=model, reference=reference,
                                 max_tokens=max_tokens).kl
        row["kl_all_with_top_kept"] = kl
    return kept, kl


def run(config: KVCheckConfig) -> KVCheckResult:
    """Check the variant's scale option against the checkpoint, measure each recipe option's KL against BF16 and the
    per-layer report, choose the scales (``kv_scales: auto``), then the layers kept in BF16."""
    start = time.perf_counter()
    texts = read_texts(config.texts_file, config.num_texts)
    calibrated = kc.read_kv_scales(config.model)
    auto = config.kv_scales == "auto"
    _check_scales_against_checkpoint(config, calibrated, auto)
    model = kc.load_hooked_model(config.model)
    cfg = getattr(model.config, "text_config", model.config)
    num_layers = int(cfg.num_hidden_layers)
    recipe_opts, options = _options(config, auto, calibrated)
    rows = kc.kv_scale_report(config.model, texts, options, max_tokens=config.max_tokens, model=model)
    reference = kc.bf16_reference(model, config.model, texts, config.max_tokens)
    kl = {}
    for o in recipe_opts:
        kl[o] = _kl_row(kc.kv_fake_quant_kl(config.model, texts, KVCHECK_OPTION[o], model=model, reference=reference,
                                            max_tokens=config.max_tokens))
    scales, best, reason = _choose(config, kl, recipe_opts, auto)
    in_use = KVCHECK_OPTION[scales]
    log.info("%s: KV scales %s%s; %s", config.model, scales, " (auto)" if auto else "", reason or "no candidates")
    flagged = [r for r in rows if r.option == in_use and r.tensor in CHECKED_TENSORS and r.flags]
    tokens = int(kl[scales]["tokens"])
    skip, ranked, target, kl_with_skip = _skip_layers(config, model, texts, in_use, num_layers, reference, kl, scales)
    flagged_layers = sorted({r.layer for r in flagged} - set(skip))
    log.info("layers kept in BF16: %s; flagged: %s", skip or "none", flagged_layers or "none")
    return KVCheckResult(
        kv_scales=scales, kv_scales_auto=auto, option=in_use, options=options, num_layers=num_layers,
        num_texts=len(texts),
        tokens=tokens, rows=[vars(r) for r in rows], flagged=[vars(r) for r in flagged], flagged_layers=flagged_layers,
        kl=kl, recommended=best, recommended_reason=reason, ranked=ranked, skip_layers=skip, auto=config.auto_skip,
        kl_target=target, kl_with_skip=kl_with_skip, capacity_vs_bf16=capacity(num_layers, len(skip)),
        wall_s=time.perf_counter() - start, versions=package_versions())


def _check_scales_against_checkpoint(config: KVCheckConfig, calibrated, auto: bool) -> None:
    """Refuse a scale option the checkpoint cannot serve: calibrated or per-head scales without k/v scales in it,
    or ``auto`` (which chooses among the options of a checkpoint without them) on one that has them."""
    if config.kv_scales in ("calibrated", "per-head") and not calibrated:
        raise ValueError(f"{config.model}: kv_scales {config.kv_scales} but the checkpoint has no k/v scales")
    if auto and calibrated:
        raise ValueError(f"{config.model}: kv_scales auto chooses among the options of a checkpoint without k/v "
                         "scales, and this one has calibrated scales")


def _options(config: KVCheckConfig, auto: bool, calibrated) -> tuple[list[str], list[str]]:
    """(the recipe's options whose KL is measured: the given one, the candidates and unit, those needing k/v scales
    only where the checkpoint has them; kvcheck's options of the per-layer report, with 'dynamic')."""
    given = [] if auto else [config.kv_scales]
    recipe_opts = list(dict.fromkeys([*given, *config.candidates, "unit"]))
    recipe_opts = [o for o in recipe_opts if o not in ("calibrated", "per-head") or calibrated]
    # 'dynamic' (kvcheck's): the ideal per-tensor scale, the reference of the attention-error flag
    options = list(dict.fromkeys([KVCHECK_OPTION[o] for o in recipe_opts] + ["dynamic"]))
    return recipe_opts, options


def _choose(config: KVCheckConfig, kl: dict[str, dict], recipe_opts: list[str],
            auto: bool) -> tuple[str, str | None, str]:
    """(the scales served: the recommendation under ``auto``, else the given option; the recommendation among the
    candidates, ``choose_scales``; why, in words)."""
    candidates = [o for o in (config.candidates or recipe_opts) if o in kl]
    best = choose_scales({o: kl[o]["kl"] for o in candidates}, candidates)
    reason = (f"KL(BF16 || FP8 KV) with every layer in FP8 over {int(kl[best]['tokens'])} held-out tokens: "
              + ", ".join(f"{o} {kl[o]['kl']:.4f}" for o in candidates) + " (nats/token); unit scale unless "
              f"another option's KL is {AUTO_KL_MARGIN:g}x lower") if best else ""
    scales = best if auto else config.kv_scales
    if scales is None:
        raise ValueError(f"{config.model}: kv_scales auto has no option to choose from (candidates "
                         f"{config.candidates})")
    return scales, best, reason


def _skip_layers(config: KVCheckConfig, model, texts, in_use: str, num_layers: int, reference, kl: dict[str, dict],
                 scales: str) -> tuple[list[int], list[dict], float | None, float | None]:
    """(the layers kept in BF16, the layers ranked by their one-layer KL, the KL target, the KL with those layers
    kept): ``kv_skip_layers: auto`` chooses them greedily (``greedy_skip``); given layers are measured as given."""
    skip = sorted(set(config.skip_layers))
    ranked: list[dict] = []
    target = kl_with_skip = None
    if config.auto_skip or config.sweep:
        ranked = sweep(model, config.model, texts, in_use, num_layers, reference, config.max_tokens)
        for i, row in enumerate(ranked, 1):
            row["capacity_if_top_kept"] = capacity(num_layers, i)
    if config.auto_skip:
        target = max(config.kl_target_vs_unit * kl["unit"]["kl"], config.kl_target_floor)
        skip, kl_with_skip = greedy_skip(model, config.model, texts, in_use, ranked, kl[scales]["kl"],
                                         target, config.max_auto_layers or max(1, num_layers // 4), reference,
                                         config.max_tokens)
        skip = sorted(skip)
    elif skip:
        kl_with_skip = kc.kv_fake_quant_kl(config.model, texts, in_use, skip_layers=skip, model=model,
                                           reference=reference, max_tokens=config.max_tokens).kl
    return skip, ranked, target, kl_with_skip
