"""Typed configs and results that cross process boundaries (stage jobs, summary.json).

Only pydantic here: every stage environment (the quantize one too) can import it. Each stage reads
its config from a JSON file and writes its result to another; the parent reads the results back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

M = TypeVar("M", bound=BaseModel)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(path)
        return path

    @classmethod
    def read(cls: type[M], path: Path) -> M:
        return cls.model_validate_json(Path(path).read_text())


# ------------------------------------------------------------------ quantize


class QuantizeConfig(Record):
    model: str = Field(description="base model folder or hub id")
    revision: Optional[str] = None
    random_weights: bool = Field(False, description="build the model from config.json with random weights")
    scheme: Optional[str] = None
    ignore: list[str] = Field(default_factory=list)
    kv_cache: Optional[str] = None
    calibration: Optional[Any] = Field(None, description="a set reference, or [{set, weight}, ...] (suite.calibration)")
    smoothing_strength: Optional[float] = None
    num_calibration_samples: int = 512
    max_seq_length: int = 2048
    checkpoint_dir: str = Field(description="where the finished checkpoint is (content-addressed)")
    key: str = Field(description="content key of the checkpoint (see plan.checkpoint_key)")
    provenance: dict[str, Any] = Field(default_factory=dict, description="recipe fragment etc., saved with it")


class QuantizeResult(Record):
    checkpoint: str
    key: str
    cache_hit: bool
    wall_s: float
    calibration_s: float = 0.0
    peak_rss_mb: float = 0.0
    quantization_config: dict[str, Any] = Field(default_factory=dict)
    kv_cache_scales: int = Field(0, description="k_scale/v_scale tensors found in the saved weights")
    ignored_modules: list[str] = Field(default_factory=list, description="modules left unquantized")
    versions: dict[str, str] = Field(default_factory=dict)


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


# ------------------------------------------------------------------ evaluate


class EngineConfig(Record):
    """How vLLM loads one variant (shared by evaluate and benchmark)."""

    model: str
    dtype: str = "auto"
    max_model_len: int = 4096
    kv_cache_dtype: str = "auto"
    engine_args: dict[str, Any] = Field(default_factory=dict)


class TaskRun(Record):
    name: str
    metric: Optional[str] = None
    num_fewshot: Optional[int] = None
    limit: Optional[float] = None


class EvaluateConfig(Record):
    engine: EngineConfig
    tasks: list[TaskRun]
    batch_size: Any = "auto"
    data_dir: str
    include_path: str
    apply_chat_template: bool = False
    allow_code_execution: bool = False
    code_sandbox: str = "namespaces"
    max_gen_toks: Optional[int] = None
    seed: int = 1234
    output_dir: str


class TaskScore(Record):
    task: str
    metric: str
    value: float
    stderr: Optional[float] = None
    n: Optional[int] = None
    all_metrics: dict[str, float] = Field(default_factory=dict, description="every 'metric,filter' lm-eval gave")


class EvaluateResult(Record):
    scores: list[TaskScore]
    cache_hit: bool = False
    cache_key: Optional[str] = None
    results_file: str
    samples_files: dict[str, str] = Field(default_factory=dict)
    wall_s: float
    engine_load_s: float
    versions: dict[str, str] = Field(default_factory=dict)
    config_hash: dict[str, Any] = Field(default_factory=dict, description="lm-eval task hashes / chat template")
    code_sandbox: Optional[str] = Field(None, description="the suite.sandbox mode model-written code ran under "
                                        "(None: no code ran)")


# ------------------------------------------------------------------ benchmark


class SloSpec(Record):
    """A latency SLO and how to search the highest Poisson rate that meets it (suite.slo)."""

    ttft_p99_ms: Optional[float] = Field(None, gt=0, description="largest allowed p99 time to first token")
    tpot_p99_ms: Optional[float] = Field(None, gt=0, description="largest allowed p99 time per output token")
    keep_up: Optional[float] = Field(
        None, gt=0, le=1, description="also require served req/s >= this share of the offered rate (long probes only: "
        "a short probe's served rate is diluted by its last requests' latency)")
    start_rate: float = Field(4.0, gt=0, description="first rate probed (req/s)")
    min_rate: float = Field(0.25, gt=0, description="lowest rate probed when even the start fails")
    max_rate: float = Field(256.0, gt=0, description="highest rate probed")
    tolerance: float = Field(0.1, gt=0, lt=1, description="stop when the bracket is this narrow (relative)")
    max_probes: int = Field(7, ge=1, description="at most this many probes")
    num_prompts: Optional[int] = Field(None, gt=0, description="prompts per probe (default: throughput.num_prompts)")


class BenchmarkConfig(Record):
    engine: EngineConfig
    api_server_count: int = 1
    input_len: int
    output_len: int
    num_prompts: int
    request_rates: list[Any] = Field(default_factory=list)
    concurrencies: list[int] = Field(default_factory=list)
    workload: str = Field("random", description="'random' token prompts, or 'tasks': the accuracy tasks' prompts")
    data_dir: Optional[str] = Field(None, description="task data for workload 'tasks'")
    chat_template: bool = False
    repetitions: int = 1
    warmup_requests: int = 0
    slo: Optional[SloSpec] = None
    offline_ceiling: bool = False
    metrics_interval_s: float = 1.0
    point_timeout_s: int = 1800
    max_api_server_count: Optional[int] = None
    gpu: Optional[str] = Field(None, description="GPU name for the roofline (default: nvidia-smi's)")
    seed: int = 0
    server_timeout_s: int = 900
    output_dir: str


class ServerStats(Record):
    """What /metrics and the process table showed during one load point (suite.bottleneck)."""

    samples: int = 0
    scrape_failures: int = 0
    running_mean: Optional[float] = None
    running_max: Optional[float] = None
    waiting_mean: Optional[float] = None
    waiting_max: Optional[float] = None
    queued_at_peak_frac: Optional[float] = Field(
        None, description="of the samples with requests waiting, the share where running sat at its peak")
    kv_usage_max: Optional[float] = None
    preemptions: Optional[float] = None
    api_server_cpu_pct: Optional[float] = None
    engine_core_cpu_pct: Optional[float] = None
    client_cpu_pct: Optional[float] = None


class LoadPoint(Record):
    label: str
    request_rate: Optional[Any] = None
    max_concurrency: Optional[int] = None
    ok: bool = True
    error: Optional[str] = None
    completed: int = 0
    failed: int = 0
    duration_s: float = 0.0
    output_tok_s: float = 0.0
    input_tok_s: Optional[float] = None
    mean_input_len: Optional[float] = None
    req_s: float = 0.0
    ttft_p50_ms: float = 0.0
    ttft_p99_ms: float = 0.0
    tpot_p50_ms: float = 0.0
    tpot_p99_ms: float = 0.0
    result_file: Optional[str] = None
    repetitions: list[dict[str, Any]] = Field(default_factory=list, description="each repetition's figures")
    output_tok_s_min: Optional[float] = None
    output_tok_s_max: Optional[float] = None
    server: Optional[ServerStats] = None
    bottleneck: Optional[str] = None
    bottleneck_reason: Optional[str] = None
    ceiling_fraction: Optional[float] = Field(None, description="output tok/s / the offline engine's")
    roofline: dict[str, float] = Field(default_factory=dict)


class SloResult(Record):
    sustainable_rate: Optional[float] = Field(None, description="highest probed rate that met the SLO")
    bracket_high: Optional[float] = Field(None, description="lowest probed rate that did not")
    output_tok_s: Optional[float] = None
    req_s: Optional[float] = None
    ttft_p99_ms: Optional[float] = None
    tpot_p99_ms: Optional[float] = None
    probes: list[dict[str, Any]] = Field(default_factory=list)
    note: Optional[str] = None


class BenchmarkResult(Record):
    points: list[LoadPoint]
    kv_cache_tokens: Optional[int] = None
    max_concurrency_at_max_len: Optional[float] = None
    peak_concurrency: Optional[float] = Field(None, description="KV tokens / (input_len + output_len)")
    offline_tok_s: Optional[float] = Field(None, description="offline LLM.generate on the same workload")
    offline_s: Optional[float] = None
    slo: Optional[SloResult] = None
    gpu: Optional[str] = None
    api_server_count: Optional[int] = Field(None, description="API servers of the reported points")
    scaled_from: list[dict[str, Any]] = Field(
        default_factory=list, description="earlier, frontend-bound measurements with fewer API servers")
    client_s: Optional[float] = Field(None, description="wall time of the benchmark client processes")
    overhead_s: Optional[float] = Field(
        None, description="the suite's own time while a server was up: neither server start/stop nor a client running")
    server_start_s: float
    wall_s: float
    server_log: str
    server_command: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)


# ------------------------------------------------------------------ the run


class VariantSummary(Record):
    name: str
    is_baseline: bool
    scheme: Optional[str] = None
    kv_cache: Optional[str] = None
    kv_cache_dtype: str = "auto"
    engine_args: dict[str, Any] = Field(default_factory=dict)
    model_path: str
    quantize: Optional[QuantizeResult] = None
    evaluate: Optional[EvaluateResult] = None
    benchmark: Optional[BenchmarkResult] = None
    metrics: dict[str, float] = Field(default_factory=dict, description="acc.*, acc.*.delta, tput.*, time.*")
    paired: list[dict[str, Any]] = Field(default_factory=list, description="per-task paired comparison with the baseline")
    tokenizer: dict[str, Any] = Field(default_factory=dict, description="BOS handling and chat template (suite.preflight)")
    errors: list[str] = Field(default_factory=list)


class TrackingInfo(Record):
    uri: str
    experiment: str
    experiment_id: str
    parent_run_id: str
    variant_run_ids: dict[str, str]


class RunSummary(Record):
    suite_version: str
    recipe_name: str
    recipe_path: str
    recipe_sha256: str
    recipe: dict[str, Any]
    run_dir: str
    started: str
    finished: Optional[str] = None
    platform: str
    versions: dict[str, str] = Field(default_factory=dict)
    tasks: list[str] = Field(default_factory=list)
    variants: list[VariantSummary]
    stage_wall_s: dict[str, float] = Field(default_factory=dict)
    artifacts: dict[str, str] = Field(default_factory=dict)
    tracking: Optional[TrackingInfo] = None
    tracking_pending: Optional[str] = Field(None, description="why MLflow logging was deferred (`suite sync`)")
    warnings: list[str] = Field(default_factory=list, description="pre-flight findings (suite.preflight) and notes on stages that succeeded oddly")

    def baseline(self) -> VariantSummary:
        return next(v for v in self.variants if v.is_baseline)
