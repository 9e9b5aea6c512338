"""The start-up ledger: every vLLM engine start a run made, from its stage results, into summary.json and the metrics.

Each row is one ``EngineStart`` (suite.records.engine) with the variant and the part of it that made the start
(``part``: evaluation, engine_check LABEL, serving): the evaluation's in-process engine (and eval.engine_check's),
the serving benchmark's offline ceiling and each of its servers. An
evaluation served from the evaluation cache made no start in this run and has no row. Two starts of one engine
configuration (one ``engine_key``) whose KV-cache capacity differs are flagged: throughput compared across them is
confounded by the capacity (vLLM gives a cold first start a smaller cache, vLLM issue #54122). Each variant gets
``time.engine_starts`` (how many), ``time.engine_starts_s`` (their seconds) and ``time.engine_starts_cold``.
"""

from __future__ import annotations

from suite.records.summary import RunSummary, VariantSummary
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult


def variant_starts(v: VariantSummary) -> list[tuple[str, object]]:
    """(part, EngineStart) for each start the variant's stages made in this run, in the order they made them."""
    out = []
    evaluations = ([("evaluation", ev)] if (ev := v.result(EvaluateResult)) else []) + [
        (f"engine_check {label}", ev) for label, ev in v.engine_checks.items()] + (
        [("served check", check)] if (check := v.check_result(EvaluateResult)) else [])
    for part, ev in evaluations:
        if not ev.cache_hit and ev.engine_start is not None:
            out.append((part, ev.engine_start))
    if (b := v.result(BenchmarkResult)) is not None:
        out += [("serving", s) for s in (b.engine_starts or ([b.engine_start] if b.engine_start else []))]
    return out


def add_ledger(summary: RunSummary) -> list[str]:
    """Fill ``summary.engine_starts`` and each variant's start metrics; returns the warnings (KV capacity that
    differs between starts of one engine configuration)."""
    rows, by_key = [], {}
    for v in summary.variants:
        starts = variant_starts(v)
        for part, s in starts:
            rows.append({"variant": v.name, "part": part, **s.model_dump(exclude_none=True)})
            if s.engine_key and s.kv_cache_tokens is not None:
                by_key.setdefault(s.engine_key, []).append((f"{v.name} {part} {s.role or ''}".strip(),
                                                            s.kv_cache_tokens))
        v.metrics["time.engine_starts"] = float(len(starts))
        v.metrics["time.engine_starts_s"] = sum(s.total_s or 0.0 for _, s in starts)
        v.metrics["time.engine_starts_cold"] = float(sum(s.compile_cache == "cold" for _, s in starts))
    summary.engine_starts = rows
    warnings = []
    for seen in by_key.values():
        if len({tokens for _, tokens in seen}) > 1:
            listed = ", ".join(f"{who}: {tokens:,}" for who, tokens in seen)
            warnings.append(f"KV-cache capacity differs between starts of one engine configuration ({listed} "
                            "tokens): throughput measured on them is confounded by the capacity")
    return warnings
