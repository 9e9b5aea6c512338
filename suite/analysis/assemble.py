"""The summary's analysis assembled: ``finish`` makes the finished summary from the one ``summarize`` filed the stage
results into, each step of ``suite.analysis.summary`` (metrics, cost, deltas, paired and perplexity comparisons)
returning its figures and the step after it reading copies of the variants with them added."""

from __future__ import annotations

from typing import Any

from suite.analysis import ledger
from suite.analysis.engine_spread import add_engine_spread
from suite.analysis.served_check import add_served_check
from suite.analysis.summary import (Comparison, Figures, cost_metrics, delta_metrics, headline_rule, kv_warnings,
                                    metric_name, paired_comparisons, perplexity_comparisons, slo_warnings,
                                    variant_metrics)
from suite.records.evaluate import EvaluateResult
from suite.records.kvcheck import KVCheckResult
from suite.records.summary import RunSummary, VariantSummary


def finish(summary: RunSummary, recipe, versions: dict[str, str], stage_wall_s: dict[str, float]) -> RunSummary:
    """After the last stage, a new summary: versions, the weak-sandbox warnings, every variant's metrics (cost per 1M
    output tokens too when the recipe prices a GPU hour), and (with a baseline that has metrics) the deltas and
    paired comparisons (accuracy and perplexity) against it; each step's figures added to copies of the variants."""
    rule, seed = headline_rule(recipe), recipe.eval.seed
    warnings = [f"{v.name}: model-written code ran in the weaker 'process' sandbox (eval.code_sandbox: process): no "
                "network, file-system or process isolation" for v in summary.variants
                if (ev := v.result(EvaluateResult)) is not None and ev.code_sandbox == "process"]
    variants = []
    for v in map(_with_kv_choice, summary.variants):
        warnings += (kv_warnings(v) if v.result(KVCheckResult) is not None else []) + slo_warnings(v)
        variants.append(v.model_copy(update={"metrics": variant_metrics(v, rule)}))
    basis, costs = cost_metrics(variants, recipe.throughput.gpu_hour_cost if recipe.throughput else None)
    variants = with_metrics(variants, costs)
    if any(v.is_baseline and v.metrics for v in variants):
        variants = with_metrics(variants, delta_metrics(variants, rule))
        variants = with_comparisons(variants, paired_comparisons(variants, seed), "paired", keep=True)
        found, said = perplexity_comparisons(variants, seed)
        variants, warnings = with_comparisons(variants, found, "perplexity"), warnings + said
    done = summary.model_copy(update={"versions": versions, "variants": variants, "cost": basis,
                                      "stage_wall_s": stage_wall_s, "warnings": summary.warnings + warnings})
    # eval.engine_check (each variant against itself), eval.served_check_items (served against in-process) and the
    # start-up ledger: added to the new summary's variants
    done.warnings += (add_engine_spread(done.variants, metric_name) + add_served_check(done.variants, metric_name)
                      + ledger.add_ledger(done))
    return done


def _with_kv_choice(v: VariantSummary) -> VariantSummary:
    """A copy of ``v`` with the KV layers and scale option kvcheck chose where the recipe said auto."""
    kvc, update = v.result(KVCheckResult), {}
    if v.kv_skip_layers_auto and kvc is not None:
        update["kv_skip_layers"] = list(kvc.skip_layers)
    if v.kv_scales == "auto" and kvc is not None and kvc.kv_scales_auto:
        update.update(kv_scales=kvc.kv_scales, kv_scales_auto=True)
    return v.model_copy(update=update)


def with_metrics(variants: list[VariantSummary], figures: Figures) -> list[VariantSummary]:
    """Copies of ``variants`` with each one's ``figures`` added to its metrics."""
    return [v.model_copy(update={"metrics": {**v.metrics, **figures.get(v.name, {})}}) for v in variants]


def with_comparisons(variants: list[VariantSummary], found: dict[str, Comparison], field: str,
                     keep: bool = False) -> list[VariantSummary]:
    """Copies of ``variants`` with what a comparison ``found`` for each: its metrics added, its records in ``field``
    (``paired`` or ``perplexity``; ``keep``: after those already there)."""
    out = []
    for v in variants:
        c = found.get(v.name)
        if c is None:
            out.append(v)
            continue
        update: dict[str, Any] = {"metrics": {**v.metrics, **c.metrics}}
        if c.records is not None:
            update[field] = [*getattr(v, field), *c.records] if keep else list(c.records)
        out.append(v.model_copy(update=update))
    return out
