"""The quantize and sensitivity stages' configs and results (pydantic only: the quantize environment reads them)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from suite.records.base import JobStamp, Record


class QuantizeConfig(Record):
    model: str = Field(description="base model folder or hub id")
    revision: Optional[str] = None
    random_weights: bool = Field(False, description="build the model from config.json with random weights")
    scheme: Optional[str] = None
    ignore: list[str] = Field(default_factory=list)
    kv_cache: Optional[str] = None
    kv_cache_strategy: Optional[str] = Field(None, description="kv_cache_scheme strategy instead of 'tensor' (attn_head: per KV head)")
    calibration: Optional[Any] = Field(None, description="a set reference, or [{set, weight}, ...] (suite.stages.quantize.calibration)")
    smoothing_strength: Optional[float] = None
    num_calibration_samples: int = 512
    max_seq_length: int = 2048
    checkpoint_dir: str = Field(description="where the finished checkpoint is (content-addressed)")
    key: str = Field(description="content key of the checkpoint (see suite.plan.keys.checkpoint_key)")
    provenance: dict[str, Any] = Field(default_factory=dict, description="recipe fragment etc., saved with it")


class QuantizeResult(Record):
    checkpoint: str
    key: str
    job: Optional[JobStamp] = Field(None, description="the job that made it (records.base.JobStamp), written by the "
                                    "stage process; None: a result from before jobs were recorded (not judged)")
    cache_hit: bool
    wall_s: float
    calibration_s: float = 0.0
    peak_rss_mb: float = 0.0
    quantization_config: dict[str, Any] = Field(default_factory=dict)
    kv_cache_scales: int = Field(0, description="k_scale/v_scale tensors found in the saved weights")
    ignored_modules: list[str] = Field(default_factory=list, description="modules left unquantized")
    versions: dict[str, str] = Field(default_factory=dict)
    content_sha256: Optional[str] = Field(None, description="SHA-256 of the checkpoint's files as written (weights, "
                                          "configs, tokenizer; not provenance.json): a rebuild on another machine "
                                          "that differs from it invalidates the results made with the old one")


class SensitivityConfig(Record):
    model: str
    revision: Optional[str] = None
    random_weights: bool = False
    scheme: str = "FP8"
    calibration: str = "chat-demo"
    skip_samples: int = Field(0, description="rows calibration uses; the sweep measures on the rows after them")
    num_samples: int = 8
    max_seq_length: int = 256
    block: int = Field(1, ge=1, description="decoder layers quantized together")
    suggest: int = Field(3, ge=0, description="at most this many blocks suggested for BF16")


class SensitivityResult(Record):
    scheme: str
    num_texts: int
    tokens: int
    baseline_ppl: float
    baseline_kl: float = Field(description="KL of the BF16 model against itself: 0 up to rounding")
    all_layers_kl: float
    all_layers_ppl: float
    ranked: list[dict[str, Any]] = Field(description="{layers, kl, ppl, ppl_delta}, most sensitive first")
    suggested_ignore: list[str]
    wall_s: float
