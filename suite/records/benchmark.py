"""The benchmark stage's config and result: load points, server statistics, the SLO search (pydantic only).

With ``eval.engine: served`` the config carries the variant's ``EvaluateConfig`` and the result its
``EvaluateResult``: the tasks are scored on this stage's server before its load points.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from suite.records.base import JobStamp, Record
from suite.records.engine import EngineStart
from suite.records.evaluate import EngineConfig, EvaluateConfig, EvaluateResult


class SloSpec(BaseModel):
    """A latency SLO and how to search the highest Poisson rate that meets it (stages.benchmark.slo).

    Not ``Strict``: as before the move, its numbers are validated the lax way (it was a stage record)."""

    model_config = ConfigDict(extra="forbid")

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
    steady_windows: float = Field(
        3.0, ge=0, description="a probe measures a sustained rate only if its arrivals (num_prompts / rate seconds) span "
        "at least this many median request lifetimes (e2e latency); a shorter one is a burst (a few hundred prompts "
        "at a high rate can all be in flight at once) and is run again with enough prompts (up to 3 times, each sized from "
        "the last run's lifetime). 0: no check")
    max_num_prompts: Optional[int] = Field(
        None, gt=0, description="most prompts a resized probe may have (default: 20 x the probe's num_prompts)")


# throughput gate -> the LoadPoint figure whose variant/baseline ratio it judges (AdaptiveRepetitions.limits' keys)
GATED_FIGURES = {"min_throughput_gain": "output_tok_s", "min_goodput_gain": "goodput_req_s"}


class AdaptiveRepetitions(BaseModel):
    """throughput.adaptive_repetitions for a variant: its gated load points (the headline candidates) are repeated
    until the variant/baseline ratio's interval decides each throughput gate, at least 2 and at most
    ``repetitions`` times (suite.runtime.repeats), against the baseline's headline point in ``baseline_result``."""

    model_config = ConfigDict(extra="forbid")

    limits: dict[str, float] = Field(description="gated figure (output_tok_s: min_throughput_gain; goodput_req_s: "
                                     "min_goodput_gain) -> the gate's least variant/baseline ratio")
    headline: Literal["max", "last"] = Field(description="throughput.headline: which points the gates can judge "
                                             "(max: every point of the first workload; last: its last)")
    baseline_result: str = Field(description="the baseline's benchmark.result.json, run before this one (plan.dag)")
    baseline_sha256: Optional[str] = Field(
        None, description="the baseline as the recipe states it (the model, the baseline's entry, the throughput "
        "section), hashed: part of the variant's content key, so another baseline is another key")


class BenchmarkConfig(Record):
    engine: EngineConfig
    api_server_count: int = 1
    input_len: int
    output_len: int
    num_prompts: int
    request_rates: list[Any] = Field(default_factory=list)
    concurrencies: list[int] = Field(default_factory=list)
    workload: Union[str, list[str]] = Field(
        "random", description="'random' token prompts, or 'tasks': the accuracy tasks' prompts; a list: each, the "
        "first for the SLO search and the offline ceiling")
    data_dir: Optional[str] = Field(None, description="task data for workload 'tasks'")
    dataset: Optional[dict[str, Any]] = Field(None, description="workload 'dataset': {path (absolute), format, "
                                              "sha256 (its content)}")
    bench_args: dict[str, Any] = Field(default_factory=dict, description="throughput.bench_args: more vllm bench "
                                       "serve options")
    chat_template: bool = False
    repetitions: int = 1
    warmup_requests: int = 0
    slo: Optional[SloSpec] = None
    offline_ceiling: bool = False
    metrics_interval_s: float = 1.0
    point_timeout_s: int = 1800
    max_api_server_count: Optional[int] = None
    gpu: Optional[str] = Field(None, description="GPU name for the roofline (default: NVML's, GPU 0)")
    seed: int = 0
    server_timeout_s: int = 900
    adaptive: Optional[AdaptiveRepetitions] = Field(
        None, description="throughput.adaptive_repetitions: repeat the gated points until the throughput gates are "
        "decided (None: every point runs ``repetitions`` times)")
    evaluate: Optional[EvaluateConfig] = Field(
        None, description="eval.engine: served: score these tasks on this stage's server (lm-eval local-completions) "
        "before the load points, then reset its prefix cache")
    output_dir: str

    def engine_starts(self) -> tuple[int, int]:
        """The vLLM engine starts this benchmark makes, (least, most): the offline ceiling's engine when asked for, one
        server, and one more server each time a frontend-bound round doubles the API servers up to
        ``max_api_server_count`` (suite.stages.benchmark.stage.next_api_server_count)."""
        least, count, more = int(self.offline_ceiling) + 1, self.api_server_count, 0
        while self.max_api_server_count is not None and count < self.max_api_server_count:
            count, more = min(2 * count, self.max_api_server_count), more + 1
        return least, least + more

    @property
    def workloads(self) -> list[str]:
        return self.workload if isinstance(self.workload, list) else [self.workload]


class ServerStats(Record):
    """What /metrics and the process table showed during one load point (suite.stages.benchmark.bottleneck)."""

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
    loaded_samples: int = Field(0, description="samples with at least half the point's peak of running + waiting")
    loaded_engine_core_cpu_pct: Optional[float] = Field(None, description="the engine core's CPU over the loaded samples")
    loaded_client_cpu_pct: Optional[float] = Field(None, description="the benchmark client's CPU over the loaded samples")
    gpu_samples: int = Field(0, description="loaded samples with NVML readings (suite.stages.benchmark.gpumon); 0: no NVML")
    gpu_count: Optional[int] = None
    gpu_util_mean: Optional[float] = Field(None, description="NVML utilisation, %: the share of time any kernel ran")
    gpu_util_min: Optional[float] = Field(None, description="the least busy GPU's mean utilisation, %")
    gpu_sm_clock_mhz_mean: Optional[float] = None
    gpu_power_w_mean: Optional[float] = None
    gpu_power_limit_w: Optional[float] = None
    gpu_mem_used_gib_max: Optional[float] = Field(None, description="peak memory used on the server's GPUs (all processes)")
    gpu_idle_host_frac: Optional[float] = Field(
        None, description="of the GPUs' idle time over the loaded samples (100 - utilisation), the share in host-bound "
        "phases (3 or more samples in a row with the GPU under 90% busy and the engine-core process at a full core; "
        "older records: single samples under 70% busy): how much of the idle GPU the host loop explains")
    host_bound_samples: int = Field(0, description="loaded samples in those host-bound phases (older records: "
                                    "single samples with the GPU under 70% busy and the engine core at a full core)")
    engine_core_shared_core_samples: Optional[int] = Field(
        None, description="samples of the host-bound phases in which the engine-core process ran on the same physical "
        "core as the client, the busiest API server or another at half a core or more (SMT siblings count); None where "
        "placement was not recorded")
    frontend_drain_s: Optional[float] = Field(
        None, description="seconds after the engine's last work during which an API-server process was still at a "
        "full core: the front end delivering replies the engine had finished, inside the client's timed window")


class LoadPoint(Record):
    label: str
    workload: Optional[str] = Field(None, description="set when the stage ran several workloads")
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
    e2el_p50_ms: Optional[float] = Field(None, description="median end-to-end request latency (a request's lifetime)")
    max_concurrent_requests: Optional[int] = Field(None, description="most requests in flight at once (vllm bench "
                                                   "serve's count)")
    goodput_req_s: Optional[float] = Field(
        None, description="requests per second that met every goodput SLO (vllm bench serve --goodput: its "
        "request_goodput); None: the point ran without --goodput")
    goodput_slo: Optional[dict[str, float]] = Field(
        None, description="the SLOs the goodput was measured against, ms per request (--goodput KEY:VALUE: ttft, "
        "tpot, e2el)")
    result_file: Optional[str] = None
    argv: Optional[list[str]] = Field(None, description="the `vllm bench serve` arguments (after 'bench serve') of the "
                                      "repetition behind result_file; each repetition row records its own")
    repetitions: list[dict[str, Any]] = Field(default_factory=list, description="each repetition's figures and argv")
    repetitions_max: Optional[int] = Field(
        None, description="a gated point (throughput.adaptive_repetitions): the most repetitions it could run "
        "(throughput.repetitions); None: a fixed count")
    stopped: Optional[str] = Field(None, description="why a gated point stopped repeating: 'decided after N' (every "
                                   "throughput gate decided) or 'at the maximum'; None: a fixed count")
    repetition_looks: list[dict[str, Any]] = Field(
        default_factory=list, description="a gated point's look after each repetition from the 2nd: per gated "
        "figure the gate's interval, the interim one and their decisions (suite.runtime.repeats.Look)")
    output_tok_s_min: Optional[float] = None
    output_tok_s_max: Optional[float] = None
    output_tok_s_reps: Optional[int] = Field(None, description="repetitions behind the interval (None: a point from "
                                             "before intervals were kept; the summary derives them from its rows)")
    output_tok_s_ci_low: Optional[float] = Field(None, description="interval of output tok/s over the repetitions "
                                                 "(suite.runtime.spread)")
    output_tok_s_ci_high: Optional[float] = None
    ci_method: Optional[str] = Field(None, description="'t': 95% t interval over >= 3 repetitions (log scale); "
                                     "'range': min-max of 2 repetitions, no confidence interval; None: 1 repetition")
    ttft_p99_ms_ci_low: Optional[float] = None
    ttft_p99_ms_ci_high: Optional[float] = None
    tpot_p99_ms_ci_low: Optional[float] = None
    tpot_p99_ms_ci_high: Optional[float] = None
    goodput_req_s_ci_low: Optional[float] = Field(None, description="interval of goodput over the repetitions")
    goodput_req_s_ci_high: Optional[float] = None
    stable: Optional[bool] = Field(None, description="the stability rule (suite.runtime.spread): False when "
                                   "max/min of the repetitions > 1.25 or the interval is wider than +-10% of the "
                                   "median; None: fewer than 2 repetitions, not judged")
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
    steady: Optional[bool] = Field(
        None, description="the probes that decided the rate (the one that met the SLO, the one above it that did not) "
        "each had arrivals spanning at least slo.steady_windows median request lifetimes: a sustained rate, not a "
        "burst. None: not checked (no e2e latency recorded, or steady_windows 0)")
    note: Optional[str] = None


class BenchmarkResult(Record):
    points: list[LoadPoint]
    kv_cache_tokens: Optional[int] = None
    max_concurrency_at_max_len: Optional[float] = None
    # a capacity, not a measurement (the measured peak of running requests is each point's server.running_max);
    # results written before the rename call it peak_concurrency, which still loads
    kv_capacity_requests: Optional[float] = Field(
        None, description="KV tokens / (input_len + output_len): how many requests of the workload's length the KV "
        "cache holds at once", validation_alias=AliasChoices("kv_capacity_requests", "peak_concurrency"))
    offline_tok_s: Optional[float] = Field(None, description="offline LLM.generate on the same workload")
    offline_s: Optional[float] = None
    offline_preemptions: Optional[float] = Field(
        None, description="vllm:num_preemptions of the offline run (its KV cache overflowed); None: not recorded")
    offline_batch_limits: Optional[dict[str, int]] = Field(
        None, description="the batch limits the offline engine ran with, the server's (suite.runtime.engine.batching."
        "serve_engine_limits); None: a ceiling measured before the suite gave it them (LLM's own defaults)")
    slo: Optional[SloResult] = None
    gpu: Optional[str] = None
    host_cpu: Optional[str] = Field(None, description="the host's CPU model and how many logical CPUs and cores it "
                                    "shows (suite.stages.benchmark.host.host_cpu): engine-cpu-bound points "
                                    "move with it")
    workload: Optional[str] = Field(None, description="with several workloads: the headline's (the first)")
    gpu_sampling: Optional[str] = Field(None, description="where the load points' GPU readings came from, or why none")
    api_server_count: Optional[int] = Field(None, description="API servers of the reported points")
    scaled_from: list[dict[str, Any]] = Field(
        default_factory=list, description="earlier, frontend-bound measurements with fewer API servers")
    client_s: Optional[float] = Field(None, description="wall time of the benchmark client processes")
    overhead_s: Optional[float] = Field(
        None, description="the suite's own time while a server was up: neither server start/stop nor a client running")
    server_start_s: float
    engine_start: Optional[EngineStart] = Field(None, description="where the reported server's engine start went "
                                                "(vLLM's log lines in server.log)")
    engine_starts: list[EngineStart] = Field(
        default_factory=list, description="every engine start of the stage in order (the start-up ledger): the "
        "offline ceiling's, then each server's (one per API-server round); empty: a result from before the ledger")
    evaluate: Optional[EvaluateResult] = Field(None, description="eval.engine: served: the scores, from this server")
    wall_s: float
    server_log: str
    server_command: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    key: Optional[str] = Field(None, description="the content key it was made under (suite.plan.keys), written by the "
                               "stage process; None: a result from before keys were recorded")
    job: Optional[JobStamp] = Field(None, description="the job that made it (records.base.JobStamp), written by the "
                                    "stage process; None: a result from before jobs were recorded (not judged)")

    def headline_point(self, rule: str) -> Optional[LoadPoint]:
        """The load point behind the tput.* metrics and the throughput gates (of the first workload where the stage
        ran several): the best output tok/s (``rule`` max) or the last (last); None: no point ran."""
        ok = [p for p in self.points if p.ok and (self.workload is None or p.workload == self.workload)]
        if not ok:
            return None
        return max(ok, key=lambda p: p.output_tok_s) if rule == "max" else ok[-1]
