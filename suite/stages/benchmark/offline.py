"""The offline ceiling: the same workload through ``vllm.LLM.generate``, no HTTP server, no client.

``python -m suite.stages.benchmark.offline BENCHMARK_CONFIG.json OUT.json`` (run by the benchmark stage, in a process of
its own before the server starts, so the two never share the accelerator). Prompts are random token
ids of exactly ``input_len`` tokens (as ``vllm bench serve --dataset-name random`` makes them), or the
tasks' prompts (``workload: tasks``), each generating ``output_len`` tokens with ``ignore_eos``. Served throughput far below this ceiling means
the front end or the client, not the engine, set the pace. The engine is built as ``vllm serve`` builds it: the
server's batch limits (``suite.runtime.engine.batching``) and per-step stats on; ``offline.json`` says which limits it ran with.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from suite.records.benchmark import BenchmarkConfig
from suite.runtime.vllm_alias import install_vllm_version_alias
from suite.runtime.engine.batching import serve_engine_limits
from suite.stages.benchmark.workload import task_prompts


def measure(config: BenchmarkConfig) -> dict:
    install_vllm_version_alias()
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    e = config.engine
    # the engine `vllm serve` builds, without its HTTP front end: vLLM gives LLM and the OpenAI server different batch
    # defaults (e.g. 16,384 batched tokens offline against 8,192 served) and LLM logs no stats, which the server
    # does every step for /metrics: with LLM's defaults the "ceiling" would measure another engine.
    limits = serve_engine_limits(e.engine_args, e.max_model_len)
    args = {**e.engine_args, **limits, "disable_log_stats": bool(e.engine_args.get("disable_log_stats", False))}
    t0, started_at = time.perf_counter(), time.time()
    llm = LLM(model=e.model, dtype=e.dtype, max_model_len=e.max_model_len, kv_cache_dtype=e.kv_cache_dtype,
              seed=config.seed, **args)
    load_s = time.perf_counter() - t0
    if config.workloads[0] == "tasks":
        texts = task_prompts(Path(config.data_dir or "."), config.seed)
        prompts = [f"[offline-{i}] {texts[i % len(texts)]}" for i in range(config.num_prompts)]
        if config.chat_template:
            tok = llm.get_tokenizer()
            prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                               tokenize=False) for p in prompts]
    else:
        vocab = llm.get_tokenizer().vocab_size
        rng = random.Random(config.seed + 7919)
        special = 1000  # stay clear of the special tokens at the ends of the vocabulary
        prompts = [TokensPrompt(prompt_token_ids=[rng.randrange(special, vocab - special) for _ in range(config.input_len)])
                   for _ in range(config.num_prompts)]
    params = SamplingParams(max_tokens=config.output_len, min_tokens=config.output_len, ignore_eos=True,
                            temperature=0.0)
    warm = max(1, min(8, config.num_prompts // 10))
    llm.generate(prompts[:warm], params, use_tqdm=False)
    t1 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    gen_s = time.perf_counter() - t1
    out_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    preemptions = None
    try:  # an overflowing KV cache preempts: the figure is then no ceiling (the report says so)
        preemptions = sum(float(getattr(m, "value", 0) or 0) for m in llm.get_metrics()
                          if m.name == "vllm:num_preemptions")
    except Exception:  # noqa: BLE001 - an engine without the metrics API: not recorded
        pass
    try:  # what the engine ran with, not what it was given
        sched = llm.llm_engine.vllm_config.scheduler_config
        limits = {"max_num_batched_tokens": int(sched.max_num_batched_tokens), "max_num_seqs": int(sched.max_num_seqs)}
    except AttributeError:
        pass
    return {"output_tok_s": out_tokens / gen_s, "req_s": len(outs) / gen_s, "generate_s": gen_s,
            "load_s": load_s, "started_at": started_at, "num_prompts": len(outs), "output_tokens": out_tokens, "batch_limits": limits,
            "log_stats": not args["disable_log_stats"], "preemptions": preemptions}


if __name__ == "__main__":
    cfg_path, out_path = sys.argv[1:3]
    result = measure(BenchmarkConfig.read(Path(cfg_path)))
    Path(out_path).write_text(json.dumps(result, indent=2))
