"""Where an evaluation engine's start goes, and what a cheaper start costs in generation, per model size (issue 15).

Each configuration runs in a process of its own (GPU memory is freed only when a process ends): vLLM's offline
``LLM`` is built (timed; its log parsed by ``suite.runtime.engine.startlog``), then it generates for every GSM8K test
question at once, greedy, a fixed number of tokens each (``ignore_eos``, so that every mode decodes the same
tokens), as lm-eval's vLLM backend submits a generation task. One JSON line per configuration goes to
OUT/start-cost.jsonl as it ends, with the sizes of the JIT caches before and after (what the start compiled).

    python3 studies/2026-12-01-four-variants-gpu-sharing/scripts/start_cost.py --out /tmp/start-cost \
        --config q05-nofi:models/qwen2.5-coder-0.5b-instruct:default:nofi ...

A configuration is NAME:MODEL:MODE:SAMPLER. MODE: default (torch.compile + CUDA graphs), eager (enforce_eager),
graphs (no torch.compile, full CUDA graphs for decode). SAMPLER: fi (vLLM's default, FlashInfer's top-k/top-p
sampler, JIT-compiled on a machine's first engine) or nofi (VLLM_USE_FLASHINFER_SAMPLER=0; greedy requests never
use top-k/top-p). Every configuration gets an empty vLLM cache root of its own (a cold torch.compile, as a variant's
first engine has); FlashInfer's and Triton's JIT caches are the machine's (~/.cache/flashinfer, ~/.triton).
A model folder without weight files is loaded with load_format=dummy (the Llama-3-8B shape).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

MODES = {
    "default": {},
    "eager": {"enforce_eager": True},
    "graphs": {"compilation_config": {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}},
}
JIT_CACHES = {"flashinfer": Path.home() / ".cache" / "flashinfer", "triton": Path.home() / ".triton"}


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def one(args) -> None:
    """In the child: build the engine, generate, print one JSON line."""
    from vllm import LLM, SamplingParams

    model = Path(args.model)
    engine_args = dict(MODES[args.mode])
    if not any(model.glob("*.safetensors")):
        engine_args["load_format"] = "dummy"
    questions = [json.loads(line)["question"] for line in Path(args.data).read_text().splitlines() if line.strip()]
    prompts = [f"Question: {q}\nAnswer:" for q in questions]
    t0 = time.perf_counter()
    llm = LLM(model=str(model), dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.85, seed=1234,
              **engine_args)
    start_s = time.perf_counter() - t0
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    llm.generate(prompts[:32], params, use_tqdm=False)  # the first batch's one-time costs, apart
    t1 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    gen_s = time.perf_counter() - t1
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    print("RESULT " + json.dumps({"start_s": round(start_s, 2), "generate_s": round(gen_s, 2), "prompts": len(prompts),
                                  "output_tokens": tokens, "out_tok_s": round(tokens / gen_s, 1),
                                  "engine_args": engine_args}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", action="append", default=[], help="NAME:MODEL:MODE:SAMPLER")
    ap.add_argument("--data", default="/tmp/shared/data/gsm8k/test.jsonl")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--cache-root", default="/tmp/start-cost-caches", help="each configuration's own VLLM_CACHE_ROOT "
                    "under it (kept out of OUT: compile caches are large)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from suite.runtime.engine.startlog import parse_engine_start

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    specs = [spec.split(":") for spec in args.config]
    for spec, parts in zip(args.config, specs):  # every one checked before the first runs
        if len(parts) != 4 or parts[3] not in ("fi", "nofi") or parts[2] not in MODES:
            ap.error(f"--config {spec}: NAME:MODEL:MODE:SAMPLER, MODE default, eager or graphs, SAMPLER fi or nofi")
    for name, model, mode, sampler in specs:
        cache = Path(args.cache_root) / name
        shutil.rmtree(cache, ignore_errors=True)  # a cold torch.compile, even where a name is run again
        env = dict(os.environ, VLLM_CACHE_ROOT=str(cache))
        env.pop("VLLM_USE_FLASHINFER_SAMPLER", None)  # fi: vLLM's default, whatever this shell has
        if sampler == "nofi":
            env["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
        _wait_for_free_gpu()  # the last configuration's engine processes have let go of the GPU
        before = {k: _size(p) for k, p in JIT_CACHES.items()}
        log = out / f"{name}.log"
        t0 = time.perf_counter()
        with open(log, "w") as fh:
            rc = subprocess.call([sys.executable, __file__, "--one", "--model", model, "--mode", mode, "--data",
                                  args.data, "--max-tokens", str(args.max_tokens), "--out", str(out)],
                                 stdout=fh, stderr=subprocess.STDOUT, env=env)
        wall = time.perf_counter() - t0
        text = log.read_text(errors="replace")
        result = next((json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")), None)
        row = {"name": name, "model": model, "mode": mode, "sampler": sampler, "rc": rc, "wall_s": round(wall, 1),
               "result": result,
               "start": parse_engine_start(text, result and result["start_s"]).model_dump(),
               "jit_cache_bytes_before": before, "jit_cache_bytes_after": {k: _size(p) for k, p in JIT_CACHES.items()}}
        if rc != 0:
            row["log_tail"] = text[-1500:]
        with open(out / "start-cost.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"{time.strftime('%T')} {name}: rc {rc}, wall {wall:.0f} s, "
              f"start {result and result['start_s']}, after_graphs {row['start'].get('after_graphs_s')}, "
              f"gen {result and result['generate_s']} s", flush=True)
    return 0


def _wait_for_free_gpu(timeout_s: float = 60.0) -> None:
    """Until no process holds the GPU (nvidia-smi lists none), or ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            held = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return
        if not held:
            return
        time.sleep(1)
    print(f"{time.strftime('%T')} start_cost: the GPU still has compute processes after {timeout_s:.0f} s; going on",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
