"""Gate max_kv_flagged_layers: at most this many decoder layers flagged by the kvcheck stage (its thresholds:
``suite.stages.quantize.kvcheck``) under the KV scale option the variant serves with, layers kept in BF16 not counted;
checked for every variant with an FP8 KV cache, bad input when the stage did not run."""

from __future__ import annotations

from suite.analysis.gates.base import FIX_SUMMARY, check
from suite.analysis.gates.registry import register_gate
from suite.records.kvcheck import KVCheckResult


@register_gate("max_kv_flagged_layers", reads=("kv.flagged_layers",))
def max_kv_flagged_layers(ctx) -> None:
    limit, v = ctx.policy.max_kv_flagged_layers, ctx.v
    if limit is None or not v.kv_cache_dtype.startswith("fp8"):
        return
    got = ctx.r.get(v, "kv.flagged_layers", "the max_kv_flagged_layers gate (the kvcheck stage: eval.kv_check)",
                    nonneg=True)
    kvc = v.result(KVCheckResult)
    if got is not None and kvc is not None and got != len(kvc.flagged_layers):
        ctx.bad(f"{v.name}: kv.flagged_layers", f"is {got}, but its kvcheck result flags "
                f"{len(kvc.flagged_layers)} layer(s)", FIX_SUMMARY)
    elif got is not None:
        c = ctx.add(check(v.name, "max KV flagged layers", got, limit, True))
        if kvc is not None and kvc.flagged_layers:
            c.detail = f"layers {', '.join(map(str, kvc.flagged_layers))} ({kvc.kv_scales})"
