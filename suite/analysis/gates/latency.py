"""Gates max_ttft_p99_ms and max_tpot_p99_ms: the variant's p99 at the headline point, judged on
``tput.<x>_p99_ms.ci_high`` (pass) / ``.ci_low`` (fail) (rules: ``gates.serving``)."""

from __future__ import annotations

from suite.analysis.gates.registry import register_gate
from suite.analysis.gates.serving import judged


def _latency(ctx, key: str, limit, name: str) -> None:
    if limit is None:
        return
    if (value := ctx.r.get(ctx.v, key, name, nonneg=True)) is not None:
        ctx.add(judged(ctx, key, name, value, limit, True))


@register_gate("max_ttft_p99_ms", reads=("tput.ttft_p99_ms", "tput.ttft_p99_ms.ci_low", "tput.ttft_p99_ms.ci_high"))
def max_ttft(ctx) -> None:
    _latency(ctx, "tput.ttft_p99_ms", ctx.policy.max_ttft_p99_ms, "max TTFT p99 ms")


@register_gate("max_tpot_p99_ms", reads=("tput.tpot_p99_ms", "tput.tpot_p99_ms.ci_low", "tput.tpot_p99_ms.ci_high"))
def max_tpot(ctx) -> None:
    _latency(ctx, "tput.tpot_p99_ms", ctx.policy.max_tpot_p99_ms, "max TPOT p99 ms")
