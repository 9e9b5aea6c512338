"""Score the demo's loglikelihood requests (suite_mmlu and suite_ceval, limit 1, 0-shot) with the demo's bf16 engine
(lm-eval's VLLM, batch_size auto, enforce_eager, uni executor, in-process engine), REPS times in one process, and
write every request's loglikelihood and every item's acc to a JSON file.

usage: score.py OUT.json [--reps N] [--arg key=value ...]   (--arg: an extra engine argument, int if it parses)
The environment decides the rest (OMP_NUM_THREADS, VLLM_CPU_*): the file records them, torch's thread count inside
the engine, the scheduler's limits and `uptime` before and after."""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, REPO)
os.environ.update({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--reps", type=int, default=2)
p.add_argument("--arg", action="append", default=[])
p.add_argument("--kv", default="auto")
a = p.parse_args()
a.out = os.path.abspath(a.out)  # the task data are read from their folder (os.chdir below)
extra = {}
for kv in a.arg:
    k, v = kv.split("=", 1)
    extra[k] = int(v) if v.lstrip("-").isdigit() else {"true": True, "false": False}.get(v, v)

uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()  # noqa: E731
record = {"uptime_start": uptime(), "env": {k: v for k, v in os.environ.items()
                                            if k.startswith(("OMP_", "VLLM_CPU", "KMP_", "GOMP_", "MKL_"))},
          "engine_args": extra, "kv_cache_dtype": a.kv, "reps": []}

from suite.runtime.vllm_alias import install_vllm_version_alias  # noqa: E402

install_vllm_version_alias()
import lm_eval  # noqa: E402
import torch  # noqa: E402
from lm_eval.models.vllm_causallms import VLLM  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from suite.stages.evaluate.templates import compile_templates_once  # noqa: E402

compile_templates_once()
tm = TaskManager(include_path=[os.path.join(REPO, "tasks")], include_defaults=False)
os.chdir(os.path.join(REPO, "tasks", "data"))
lm = VLLM(pretrained=os.path.join(REPO, "models", "smollm2-135m-instruct"), dtype="bfloat16", max_model_len=2048,
          kv_cache_dtype=a.kv, seed=1234, batch_size="auto", enforce_eager=True, distributed_executor_backend="uni",
          **extra)
sc = lm.model.llm_engine.vllm_config.scheduler_config
record["torch_threads"] = torch.get_num_threads()
record["scheduler"] = {"max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                       "chunked_prefill": sc.enable_chunked_prefill, "async_scheduling": sc.async_scheduling}
for rep in range(a.reps):
    t0 = time.perf_counter()
    res = lm_eval.simple_evaluate(model=lm, tasks=["suite_mmlu", "suite_ceval"], num_fewshot=0, limit=1,
                                  log_samples=True, task_manager=tm, random_seed=1234, numpy_random_seed=1234,
                                  torch_random_seed=1234, fewshot_random_seed=1234, batch_size="auto")
    items = {}
    for task, samples in res["samples"].items():
        for s in samples:
            items[f"{task}/{s['doc_id']}"] = {"ll": [r[0][0] for r in s["resps"]], "acc": s["acc"]}
    scores = {t: res["results"][t]["acc,none"] for t in ("suite_mmlu", "suite_ceval")}
    record["reps"].append({"seconds": round(time.perf_counter() - t0, 1), "uptime": uptime(), "scores": scores,
                           "items": items})
    print(f"rep {rep}: {scores} {record['reps'][-1]['seconds']} s | {record['reps'][-1]['uptime']}", flush=True)
    with open(a.out, "w") as f:  # after every rep: a run stopped early keeps what it finished
        json.dump(record, f)
print("threads", record["torch_threads"], record["scheduler"])
