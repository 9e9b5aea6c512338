"""The recipe's gates section: the release policy `suite gate` judges a run by (pydantic)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from suite.recipe.base import Strict

Drop = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(gt=0, allow_inf_nan=False)]

# the gates that name tasks, and their defaults for tasks not named (suite.analysis.gate reads the same lists)
PER_TASK = ("max_drop", "max_relative_drop", "non_inferiority_margin", "min_recovery_lower_bound")
DEFAULTS = ("default_max_drop", "default_max_relative_drop", "default_non_inferiority_margin")


class GateSpec(Strict):
    max_drop: dict[str, Drop] = Field(
        default_factory=dict,
        description="task -> largest allowed accuracy drop (baseline minus variant, in metric units, e.g. 0.02)",
    )
    default_max_drop: Drop | None = Field(None, description="for tasks not named in max_drop")
    min_throughput_gain: Ratio | None = Field(
        None, description="smallest allowed variant/baseline output tok/s ratio (e.g. 1.2)"
    )
    min_goodput_gain: Ratio | None = Field(
        None, description="smallest allowed variant/baseline goodput ratio at the headline point (requests/s that met "
        "every SLO of vllm bench serve --goodput: throughput.bench_args.goodput, else throughput.slo's limits; e.g. 1.1)"
    )
    max_relative_drop: dict[str, Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] = Field(
        default_factory=dict, description="task -> largest allowed drop as a share of the baseline (0.01 = 1%)"
    )
    default_max_relative_drop: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="for tasks not named in max_relative_drop")
    non_inferiority_margin: dict[str, Drop] = Field(
        default_factory=dict,
        description="task -> margin m: passes when the lower bound of the paired 95% CI of the delta is >= -m "
        "(non-inferiority shown by the data, not just a small point estimate)",
    )
    default_non_inferiority_margin: Drop | None = Field(None, description="for tasks not named above")
    min_recovery_lower_bound: dict[str, Ratio] = Field(
        default_factory=dict,
        description="task -> smallest allowed lower bound of recovery, (baseline + CI low) / baseline (e.g. 0.99)",
    )
    max_ttft_p99_ms: Ratio | None = Field(None, description="largest allowed p99 TTFT at the headline point")
    max_tpot_p99_ms: Ratio | None = Field(None, description="largest allowed p99 TPOT at the headline point")
    min_sustainable_rate_gain: Ratio | None = Field(
        None, description="smallest allowed variant/baseline ratio of the sustainable rate under the SLO"
    )
    max_kv_flagged_layers: Annotated[int, Field(ge=0)] | None = Field(
        None, description="largest allowed number of decoder layers the kvcheck stage flags under the scale "
        "option a variant serves with (layers kept in BF16 do not count); applies to variants with an FP8 KV "
        "cache, and needs the kvcheck stage (eval.kv_check)"
    )
    max_perplexity_increase: Drop | None = Field(
        None, description="largest allowed rise of token perplexity on every perplexity task evaluated "
        "(suite_longppl*; absolute, e.g. 0.2): passes when the upper bound of the paired 95% CI of the mean "
        "per-document delta (variant minus baseline) is <= it; a run with no perplexity task is refused"
    )
