"""Grouped against lm-eval's per-request loglikelihood scoring on one engine: wall time and agreement.

    python studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py MODEL --tasks suite_mmlu_anatomy,suite_ceval_accountant \
        --num-fewshot 5 --limit 8 [--engine-arg enforce_eager=true ...] --out result.json

Builds one lm-eval vLLM model (``suite.stages.evaluate.grouped.GroupedVLLM``), runs ``simple_evaluate`` on
the tasks (their loglikelihood pairs go through the grouped path), then scores the same pairs with lm-eval's
own ``VLLM._loglikelihood_tokens`` on the same engine, and writes one JSON object (``--out``; vLLM logs to stdout): both wall times (the
grouped one is the loglikelihood call inside simple_evaluate, timed around it), the pair and request counts,
the largest logprob difference and how many is_greedy flags and per-item argmaxes agree. Serve environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--num-fewshot", type=int, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--dtype", default="bfloat16", help="the engine's dtype (float32 is far faster on a CPU without "
                    "AVX-512 BF16)")
    ap.add_argument("--data-dir", default=str(ROOT / "tasks" / "data"))
    ap.add_argument("--engine-arg", action="append", default=[], help="KEY=VALUE (JSON value), repeatable")
    ap.add_argument("--noise-floor", action="store_true",
                    help="score the pairs through lm-eval's path a second time, one request per vLLM call "
                    "(batch_size 1): how far lm-eval's own numbers move with the batch on this engine")
    ap.add_argument("--out", required=True, help="the JSON file to write")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from suite.runtime.vllm_alias import install_vllm_version_alias

    install_vllm_version_alias()
    import lm_eval
    from lm_eval.models.vllm_causallms import VLLM
    from lm_eval.tasks import TaskManager

    from suite.stages.evaluate.grouped import GroupedVLLM

    engine_args = {}
    for kv in args.engine_arg:
        k, _, v = kv.partition("=")
        try:
            engine_args[k] = json.loads(v)
        except json.JSONDecodeError:
            engine_args[k] = v
    t0 = time.perf_counter()
    lm = GroupedVLLM(pretrained=args.model, dtype=args.dtype, max_model_len=args.max_model_len, batch_size="auto",
                     seed=1234, **engine_args)
    load_s = time.perf_counter() - t0
    timed = {"grouped_s": 0.0}
    inner = lm._loglikelihood_tokens

    def timed_tokens(requests, disable_tqdm=False):
        t = time.perf_counter()
        try:
            return inner(requests, disable_tqdm=disable_tqdm)
        finally:
            timed["grouped_s"] += time.perf_counter() - t

    lm._loglikelihood_tokens = timed_tokens
    tm = TaskManager(include_path=str(ROOT / "tasks"), include_defaults=False)
    os.chdir(args.data_dir)
    res = lm_eval.simple_evaluate(model=lm, tasks=args.tasks.split(","), num_fewshot=args.num_fewshot,
                                  limit=args.limit, log_samples=True, task_manager=tm, random_seed=1234,
                                  numpy_random_seed=1234, torch_random_seed=1234, fewshot_random_seed=1234)
    samples = [s for rows in res["samples"].values() for s in rows]
    pairs = [tuple(a) for s in samples for a in s["arguments"]]
    grouped = [tuple(r[0]) for s in samples for r in s["resps"]]
    requests = [((c, k), *lm._encode_pair(c, k)) for c, k in pairs]  # lm-eval's own tokenization, once
    t = time.perf_counter()
    reference = VLLM._loglikelihood_tokens(lm, requests)
    reference_s = time.perf_counter() - t

    def same_picks(a, b) -> int:
        """Items whose chosen answer (argmax over its choices, as acc reads it) is the same in both."""
        same, i = 0, 0
        for s in samples:
            n = len(s["arguments"])
            x, y = [v[0] for v in a[i:i + n]], [v[0] for v in b[i:i + n]]
            same += x.index(max(x)) == y.index(max(y))
            i += n
        return same

    def compare(a, b) -> dict:
        return {"max_abs_logprob_diff": max(abs(x[0] - y[0]) for x, y in zip(a, b)),
                "is_greedy_same": sum(x[1] == y[1] for x, y in zip(a, b)), "items_same_choice": same_picks(a, b)}

    floor = None
    if args.noise_floor:
        lm.batch_size = 1  # lm-eval's VLLM chunks its requests by batch_size ("auto": all in one call)
        t = time.perf_counter()
        again = VLLM._loglikelihood_tokens(lm, requests)
        floor = {"per_request_batch1_s": round(time.perf_counter() - t, 2), **compare(reference, again)}
    Path(args.out).write_text(json.dumps({
        "model": args.model, "tasks": args.tasks, "num_fewshot": args.num_fewshot, "limit": args.limit,
        "dtype": args.dtype, "engine_args": engine_args, "engine_load_s": round(load_s, 1), "counts": lm.counts,
        "items": len(samples),
        "grouped_s": round(timed["grouped_s"], 2), "per_request_s": round(reference_s, 2),
        "speedup": round(reference_s / timed["grouped_s"], 2) if timed["grouped_s"] else None,
        **compare(grouped, reference), "pairs": len(pairs),
        "noise_floor": floor,  # lm-eval's path against itself, batch_size auto against 1 (--noise-floor)
        "values": {"grouped": grouped, "per_request": reference},
    }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
