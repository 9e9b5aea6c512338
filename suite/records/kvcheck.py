"""The kvcheck stage's config and result (pydantic only: the quantize environment reads them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic import Field

from suite.records.base import JobStamp, Record

# an E4M3 value's largest relative rounding error (half its 3-bit mantissa's ulp)
FP8_E4M3_MAX_REL_ROUNDING = 2.0 ** -4


@dataclass(frozen=True)
class Thresholds:
    max_clipped_frac: float = 1e-4
    max_rel_err: float = FP8_E4M3_MAX_REL_ROUNDING
    max_rel_err_vs_median: float = 2.0
    max_bias_vs_median: float = 8.0
    max_attn_err_vs_dynamic: float = 1.5


class KVCheckConfig(Record):
    model: str = Field(description="the checkpoint the variant is served from (its k/v scales), or the base model")
    texts_file: str = Field(description="held-out texts, JSON lines with a 'text' field (tasks/data/longtext/docs.jsonl)")
    num_texts: int = 2
    max_tokens: int = 512
    kv_scales: str = Field(description="the recipe's scale option the variant serves with (calibrated, unit, "
                           "dynamic, per-head), or auto: choose among the candidates")
    candidates: list[str] = Field(default_factory=list, description="recipe scale options the installed backend "
                                  "can serve for this variant: the recommendation is chosen among them")
    skip_layers: list[int] = Field(default_factory=list, description="layers kept in BF16 (kv_skip_layers)")
    auto_skip: bool = Field(False, description="kv_skip_layers: auto: choose the layers (greedy by measured KL)")
    sweep: bool = Field(False, description="rank every layer (one layer's KV in FP8 at a time) even without auto")
    kl_target_vs_unit: float = Field(1.25, description="auto: bring the all-layer KL to <= this x unit scale's KL")
    kl_target_floor: float = Field(0.005, description="auto: ... or to <= this many nats/token, whichever is larger")
    max_auto_layers: Optional[int] = Field(None, description="auto keeps at most this many layers (default L/4)")


class KVCheckResult(Record):
    kv_scales: str = Field(description="the recipe scale option checked (the one the variant serves with; "
                           "with kv_scales: auto, the one chosen)")
    kv_scales_auto: bool = Field(False, description="kv_scales: auto: kv_scales is the choice (= recommended)")
    option: str = Field(description="the kvcheck option that simulates it (suite.stages.kvcheck.measure)")
    options: list[str] = Field(description="kvcheck options measured (dynamic: the ideal per-tensor reference)")
    num_layers: int
    num_texts: int
    tokens: int
    rows: list[dict[str, Any]] = Field(description="per layer x option x tensor (k, v, attn): clipped, underflow, rel err, flags")
    flagged: list[dict[str, Any]] = Field(default_factory=list, description="rows of the option in use with a flag")
    flagged_layers: list[int] = Field(default_factory=list,
                                      description="layers flagged under the option in use, less those kept in BF16")
    kl: dict[str, dict[str, float]] = Field(default_factory=dict,
                                            description="recipe option -> {kl, ppl, ppl_bf16, top1_agree}, all layers in FP8")
    recommended: Optional[str] = Field(None, description="unit, unless a candidate's KL is 1.25x lower "
                                       "(stage.choose_scales)")
    recommended_reason: str = ""
    ranked: list[dict[str, Any]] = Field(default_factory=list,
                                         description="{layer, kl, ppl, ppl_delta}: that layer's KV alone in FP8, most harmful first")
    skip_layers: list[int] = Field(default_factory=list, description="layers kept in BF16 (given, or chosen by auto)")
    auto: bool = False
    kl_target: Optional[float] = None
    kl_with_skip: Optional[float] = None
    capacity_vs_bf16: Optional[float] = Field(None, description="2L/(L+s): KV capacity against a BF16 cache, less page padding")
    wall_s: float
    versions: dict[str, str] = Field(default_factory=dict)
    key: Optional[str] = Field(None, description="the content key it was made under (suite.plan.keys), written by the "
                               "stage process; None: a result from before keys were recorded")
    job: Optional[JobStamp] = Field(None, description="the job that made it (records.base.JobStamp), written by the "
                                    "stage process; None: a result from before jobs were recorded (not judged)")
