"""The recipe's throughput section: the serving workload, its load points, the latency SLO search and the GPU-hour price."""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from suite.recipe import guards
from suite.recipe.base import SEED_MAX, Strict, bad
from suite.records.benchmark import SloSpec
from suite.records import bench_argv




class GpuHourCost(Strict):
    """What one GPU hour costs: a labelled assumption of the recipe (there is no built-in price). The summary
    turns it into cost per 1M output tokens (suite.analysis.summary); absent, no cost figure is made."""

    amount: float = Field(gt=0, allow_inf_nan=False, description="price of one GPU hour (e.g. 3.5)")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217-like code, e.g. USD, EUR")
    source: str = Field(min_length=1, pattern=r"\S", description="where the price came from (a quote, a price list "
                        "and its date, an internal rate): shown with every cost figure as the assumption it is")

    @model_validator(mode="before")
    @classmethod
    def _a_price_says_where_from(cls, v):
        if isinstance(v, dict) and not (isinstance(v.get("source"), str) and v["source"].strip()):
            raise bad("gpu_hour_cost has no source: a price is an assumption, and a figure made from it needs its origin",
                      "add source: where the price came from (e.g. 'on-demand list price, <provider>, <date>')")
        return v


class DatasetSpec(Strict):
    """Serving traffic from a file of the team's own (``workload: dataset``)."""

    path: str = Field(description="the file, relative to the recipe")
    format: Literal["sharegpt", "jsonl"] = Field(
        description="sharegpt: a JSON list of {conversations: [{from, value}, ...]} (the first turn is the prompt, the "
        "second's token count the output length; vllm bench serve --dataset-name sharegpt); jsonl: one "
        "{prompt, output_len} per line (vllm bench serve's custom dataset with each row's output length)")


BenchValue = Union[str, int, float, bool, list[Union[str, int, float]]]


class ThroughputSpec(Strict):
    """The serving workload, as `vllm bench serve` runs it (random dataset, ignore_eos)."""

    input_len: int = Field(512, gt=0, description="--random-input-len")
    output_len: int = Field(256, gt=0, description="--random-output-len")
    num_prompts: int = Field(1000, gt=0, le=guards.MAX_NUM_PROMPTS, description="--num-prompts per load point")
    workload: Union[Literal["random", "tasks", "dataset"], list[Literal["random", "tasks", "dataset"]]] = Field(
        "random",
        description="'random': random token prompts of exactly input_len tokens; 'tasks': the accuracy tasks' own "
        "prompts from eval.data_dir (GSM8K, HumanEval, MMLU, C-Eval), output_len tokens each; 'dataset': the file in "
        "'dataset' (ShareGPT conversations or a JSONL of prompts with output lengths); a list runs every "
        "load point on each (labels '<workload>-<point>'): the first is the headline's, the SLO search's and the "
        "offline ceiling's",
    )
    dataset: DatasetSpec | None = Field(None, description="the file of workload 'dataset' (content-hashed into "
                                        "the benchmark's config): {path: ..., format: sharegpt | jsonl}")
    bench_args: dict[str, BenchValue] = Field(
        default_factory=dict, description="more `vllm bench serve` options, snake_case (goodput: [\"ttft:200\", "
        "\"tpot:50\"], percentile_metrics: \"ttft,tpot,itl,e2el\", metric_percentiles: \"50,90,99\"), checked against "
        "its parser in the serve environment; true is a bare flag. Those the suite sets itself and those that change "
        "what a load point measures or where its load goes (URL, model, rate, arrivals, prompts, lengths, dataset, "
        "seed, result files, ...) are refused, even by a prefix, as is a value starting with '-'; percentile_metrics "
        "and metric_percentiles are merged "
        "with the suite's own (it reads p50/p99)")
    request_rates: list[Union[float, Literal["inf"]]] = Field(
        default_factory=list, description="Poisson request rates (req/s) to run, each > 0; 'inf' sends all at once"
    )
    concurrencies: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list, description="--max-concurrency values to run, each >= 1")
    api_server_count: int = Field(1, ge=1, description="vllm serve --api-server-count")
    max_api_server_count: int | None = Field(
        None, ge=1, description="when a point is frontend-bound (suite.stages.benchmark.bottleneck), restart the server with twice the "
        "API servers, up to this many, and measure again (the earlier points are kept in scaled_from)",
    )
    repetitions: int = Field(3, ge=1, le=guards.MAX_REPETITIONS, description="runs per load point; the median is "
                             "reported, with the spread; with adaptive_repetitions, the most a gated point runs")
    adaptive_repetitions: bool = Field(
        True, description="with a throughput gate (min_throughput_gain, min_goodput_gain) and repetitions >= 3: each "
        "load point the gates can judge (throughput.headline's candidates) is repeated until the variant/baseline "
        "ratio's interval decides every such gate, at least 2 and at most repetitions times; the baseline, the "
        "ungated points and the SLO probes keep their fixed counts (suite.runtime.repeats; the variants' benchmarks "
        "then wait for the baseline's). false: every point runs repetitions times")
    warmup_requests: int = Field(16, ge=0, description="vllm bench serve --num-warmups before each run")
    slo: SloSpec | None = Field(
        None, description="latency SLO (p99 TTFT/TPOT): search the highest sustainable Poisson rate under it"
    )
    offline_ceiling: bool = Field(
        False, description="also run the workload through offline LLM.generate (one more engine start) as a ceiling"
    )
    metrics_interval_s: float = Field(1.0, gt=0, allow_inf_nan=False,
                                      description="how often /metrics and CPU use are sampled")
    point_timeout_s: int = Field(1800, gt=0, description="a load point still running after this fails")
    gpu: str | None = Field(None, description="GPU for the roofline (H100, H200, ...; default: NVML's name for GPU 0)")
    headline: Literal["max", "last"] = Field(
        "max", description="which load point's numbers become tput.* metrics: the best output tok/s, or the last"
    )
    server_timeout_s: int = Field(900, gt=0, description="time allowed for vllm serve to become healthy")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="vllm bench serve --seed of the first run")
    gpu_hour_cost: GpuHourCost | None = Field(
        None, description="price of one GPU hour with its currency and source: the summary reports cost per 1M output "
        "tokens (GPU time only, x tensor x pipeline parallel size); absent: no cost figures")

    def goodput_args(self, gated: bool) -> dict[str, BenchValue]:
        """bench_args as the benchmark stage passes them: with a goodput gate set (``gated``) and no goodput of their
        own, ``goodput`` from the SLO's limits (each request's TTFT within slo.ttft_p99_ms, TPOT within tpot_p99_ms:
        vllm bench serve --goodput ttft:MS tpot:MS)."""
        if not gated or self.slo is None or any(k.replace("-", "_") == "goodput" for k in self.bench_args):
            return self.bench_args
        limits = [f"{k}:{v:g}" for k, v in (("ttft", self.slo.ttft_p99_ms), ("tpot", self.slo.tpot_p99_ms)) if v]
        return {**self.bench_args, "goodput": limits} if limits else self.bench_args

    @field_validator("request_rates", mode="before")
    @classmethod
    def _positive_rates(cls, v):
        if not isinstance(v, list):
            return v
        for i, rate in enumerate(v):
            if rate == "inf" or (isinstance(rate, float) and rate == math.inf):
                continue
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or not math.isfinite(rate):
                raise bad(f"[{i}] = {rate!r}: a Poisson rate is a number of requests per second > 0",
                          "give rates > 0, or 'inf' to send every request at once")
        return ["inf" if r == math.inf else r for r in v]

    @field_validator("bench_args", mode="before")
    @classmethod
    def _bench_args_add_no_option(cls, v):
        """Each key an option a recipe may set (not one the suite owns, nor a prefix of one) and each value no
        option of its own: vllm bench serve's parser reads the argv they are spliced into (records.bench_argv)."""
        for key, value in v.items() if isinstance(v, dict) else ():
            if (why := bench_argv.key_problem(key) or bench_argv.value_problem(key, value)) is not None:
                raise bad(*why)
        return v

    @field_validator("workload", mode="after")
    @classmethod
    def _workloads(cls, v):
        if isinstance(v, list):
            if not v or len(set(v)) != len(v):
                raise bad(f"workload {v}: list each workload once, at least one", "e.g. [random, tasks]")
            return v[0] if len(v) == 1 else v
        return v

    @property
    def workloads(self) -> list[str]:
        return self.workload if isinstance(self.workload, list) else [self.workload]

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_numbers(cls, v):
        for key, value in (v or {}).items() if isinstance(v, dict) else ():
            if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
                raise bad(f"{key} = {value!r} is not a finite number", "give a number")
        return v

    @model_validator(mode="after")
    def _some_load(self) -> "ThroughputSpec":
        for name in ("request_rates", "concurrencies"):
            values = getattr(self, name)
            if len(set(map(str, values))) != len(values):
                raise bad(f"{name} lists a load point twice: {values}", "list each load point once")
        if not self.request_rates and not self.concurrencies:
            raise bad("no load point: both request_rates and concurrencies are empty",
                      "give at least one of request_rates (e.g. [inf]) or concurrencies (e.g. [8])")
        if ("dataset" in self.workloads) != (self.dataset is not None):
            raise bad("workload 'dataset' and the 'dataset' section go together" + (
                      "" if self.dataset is None else ": a dataset is given, and no workload uses it"),
                      "add 'dataset' to workload" if self.dataset is not None else
                      "add dataset: {path: FILE, format: sharegpt | jsonl}")
        if self.max_api_server_count is not None and self.max_api_server_count < self.api_server_count:
            raise bad(f"max_api_server_count {self.max_api_server_count} is below api_server_count "
                      f"{self.api_server_count}", f"make it >= {self.api_server_count}, or remove it")
        if self.slo is not None:
            s = self.slo
            if s.ttft_p99_ms is None and s.tpot_p99_ms is None:
                raise bad("slo sets no latency limit: every rate would meet it",
                          "set slo.ttft_p99_ms, slo.tpot_p99_ms or both")
            if s.min_rate > s.max_rate:
                raise bad(f"slo.min_rate {s.min_rate:g} is above slo.max_rate {s.max_rate:g}",
                          "make min_rate <= start_rate <= max_rate")
            if not s.min_rate <= s.start_rate <= s.max_rate:
                raise bad(f"slo.start_rate {s.start_rate:g} is outside [min_rate {s.min_rate:g}, max_rate {s.max_rate:g}]",
                          "make min_rate <= start_rate <= max_rate")
            probe = s.num_prompts or self.num_prompts
            if s.max_num_prompts is not None and s.max_num_prompts < probe:
                raise bad(f"slo.max_num_prompts {s.max_num_prompts} is below the {probe} prompts of a probe "
                          "(slo.num_prompts, else num_prompts): no burst could be run again longer",
                          f"make it >= {probe} (e.g. {20 * probe}), or remove it")
        return self
