"""The kvcheck stage: per-layer FP8 KV scale check, KL per scale option, and the greedy kv_skip_layers: auto choice.

Everything is a fake quant (quantize-dequantize to E4M3) in Hugging Face attention
(``suite.stages.quantize.kvcheck``), on held-out text the calibration mixes do not contain (the first
``max_tokens`` tokens of the first ``num_texts`` documents of ``tasks/data/longtext/docs.jsonl``).

The flags are kvcheck's (its docstring states each threshold and why): clipping > 1e-4 of values,
rel err > 2**-4 or > 2x the median layer's, and the attention output error > 1.5x the same layer's under
the ideal per-tensor scale. ``kv_skip_layers: auto`` ranks the layers by the KL of one layer's KV in FP8
(every other layer BF16) and keeps in BF16 the fewest top-ranked layers that bring the all-layer KL to at
most max(1.25 x unit scale's all-layer KL, 0.005 nats/token): unit scale (vLLM's default) was within the
noise of BF16 on the H200 (GSM8K -0.8 / +0.1 points at 2.00x KV capacity), so it is the measured
reference of "harmless"; the 25 % margin covers the KL's spread over a few thousand tokens; the floor
stops the greedy from chasing rounding noise when unit's KL is itself tiny.
"""

from __future__ import annotations

import json
import time

from suite.stages.kvcheck.records import KVCheckConfig, KVCheckResult

KVCHECK_OPTION = {"calibrated": "calibrated", "unit": "unit", "dynamic": "vllm-calc", "per-head": "per-head"}
CHECKED_TENSORS = ("k", "v", "attn")  # Q is FP8 only on FlashAttention-3, at scale 1.0 for every option


def read_texts(path: str, n: int) -> list[str]:
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line)["text"])
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
    from suite.stages.quantize import kvcheck as kc

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
    from suite.stages.quantize import kvcheck as kc

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
    start = time.perf_counter()
    from suite.orchestrate.envs import package_versions
    from suite.stages.quantize import kvcheck as kc

    texts = read_texts(config.texts_file, config.num_texts)
    calibrated = kc.read_kv_scales(config.model)
    if config.kv_scales in ("calibrated", "per-head") and not calibrated:
        raise ValueError(f"{config.model}: kv_scales {config.kv_scales} but the checkpoint has no k/v scales")
    model = kc.load_hooked_model(config.model)
    cfg = getattr(model.config, "text_config", model.config)
    num_layers = int(cfg.num_hidden_layers)
    in_use = KVCHECK_OPTION[config.kv_scales]
    recipe_opts = list(dict.fromkeys([config.kv_scales, *config.candidates, "unit"]))
    recipe_opts = [o for o in recipe_opts if o not in ("calibrated", "per-head") or calibrated]
    # 'dynamic' (kvcheck's): the ideal per-tensor scale, the reference of the attention-error flag
    options = list(dict.fromkeys([KVCHECK_OPTION[o] for o in recipe_opts] + ["dynamic"]))
    rows = kc.kv_scale_report(config.model, texts, options, max_tokens=config.max_tokens, model=model)
    skip = sorted(set(config.skip_layers))
    flagged = [r for r in rows if r.option == in_use and r.tensor in CHECKED_TENSORS and r.flags]
    reference = kc.bf16_reference(model, config.model, texts, config.max_tokens)
    kl = {}
    for o in recipe_opts:
        kl[o] = _kl_row(kc.kv_fake_quant_kl(config.model, texts, KVCHECK_OPTION[o], model=model, reference=reference,
                                            max_tokens=config.max_tokens))
    tokens = int(kl[config.kv_scales]["tokens"])
    candidates = [o for o in (config.candidates or recipe_opts) if o in kl]
    best = min(candidates, key=lambda o: kl[o]["kl"]) if candidates else None
    reason = (f"lowest KL(BF16 || FP8 KV) with every layer in FP8 over {tokens} held-out tokens among "
              + ", ".join(f"{o} {kl[o]['kl']:.4f}" for o in candidates) + " (nats/token)") if best else ""
    ranked: list[dict] = []
    target = kl_with_skip = None
    if config.auto_skip or config.sweep:
        ranked = sweep(model, config.model, texts, in_use, num_layers, reference, config.max_tokens)
        for i, row in enumerate(ranked, 1):
            row["capacity_if_top_kept"] = capacity(num_layers, i)
    if config.auto_skip:
        target = max(config.kl_target_vs_unit * kl["unit"]["kl"], config.kl_target_floor)
        skip, kl_with_skip = greedy_skip(model, config.model, texts, in_use, ranked, kl[config.kv_scales]["kl"],
                                         target, config.max_auto_layers or max(1, num_layers // 4), reference,
                                         config.max_tokens)
        skip = sorted(skip)
    elif skip:
        kl_with_skip = kc.kv_fake_quant_kl(config.model, texts, in_use, skip_layers=skip, model=model,
                                           reference=reference, max_tokens=config.max_tokens).kl
    flagged_layers = sorted({r.layer for r in flagged} - set(skip))
    return KVCheckResult(
        kv_scales=config.kv_scales, option=in_use, options=options, num_layers=num_layers, num_texts=len(texts),
        tokens=tokens, rows=[vars(r) for r in rows], flagged=[vars(r) for r in flagged], flagged_layers=flagged_layers,
        kl=kl, recommended=best, recommended_reason=reason, ranked=ranked, skip_layers=skip, auto=config.auto_skip,
        kl_target=target, kl_with_skip=kl_with_skip, capacity_vs_bf16=capacity(num_layers, len(skip)),
        wall_s=time.perf_counter() - start, versions=package_versions())
