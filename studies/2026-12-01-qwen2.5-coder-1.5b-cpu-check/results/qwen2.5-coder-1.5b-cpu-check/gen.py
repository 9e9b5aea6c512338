import json, re, sys, time, os
t0 = time.perf_counter()
from vllm import LLM, SamplingParams
M = "/work/main/models/qwen2.5-coder-1.5b-instruct"
D = "/work/shared/data/gsm8k"
train = [json.loads(l) for l in open(f"{D}/train.jsonl")][:5]
test = [json.loads(l) for l in open(f"{D}/test.jsonl")][:3]
shots = "".join(f"Question: {d['question']}\nAnswer: {d['answer']}\n\n" for d in train)
fewshot = [shots + f"Question: {d['question']}\nAnswer:" for d in test]
llm = LLM(model=M, dtype="bfloat16", max_model_len=2048, enforce_eager=True,
          distributed_executor_backend="uni", seed=0)
t_load = time.perf_counter() - t0
tok = llm.get_tokenizer()
chat = [tok.apply_chat_template([{"role": "user", "content": d["question"] + "\nPut the final number after '#### '."}],
                                tokenize=False, add_generation_prompt=True) for d in test]
sp_few = SamplingParams(temperature=0.0, max_tokens=200, stop=["Question:", "</s>", "<|im_end|>"])
sp_chat = SamplingParams(temperature=0.0, max_tokens=200)
t1 = time.perf_counter()
o_few = llm.generate(fewshot, sp_few)
o_chat = llm.generate(chat, sp_chat)
t_gen = time.perf_counter() - t1
def gold(d): return d["answer"].split("####")[-1].strip().replace(",", "")
def strict(s):
    m = re.search(r"#### (\-?[0-9\.\,]+)", s); return m.group(1).replace(",", "").rstrip(".") if m else None
def flex(s):
    m = re.findall(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", s)
    if not m: return None
    x = [a or b for a, b in m][-1]; return x.replace(",", "").replace("$", "").rstrip(".")
rows = []
for mode, outs in (("5-shot plain", o_few), ("0-shot chat", o_chat)):
    for d, o in zip(test, outs):
        c = o.outputs[0]
        rows.append({"mode": mode, "question": d["question"], "gold": gold(d), "prompt_tokens": len(o.prompt_token_ids),
                     "new_tokens": len(c.token_ids), "finish_reason": c.finish_reason, "stop_reason": str(c.stop_reason),
                     "strict": strict(c.text), "flexible": flex(c.text), "text": c.text})
res = {"model": M, "vllm": __import__("vllm").__version__, "load_s": round(t_load, 1), "generate_s": round(t_gen, 1),
       "new_tokens_total": sum(r["new_tokens"] for r in rows), "rows": rows}
json.dump(res, open(sys.argv[1], "w"), indent=1, ensure_ascii=False)
for r in rows:
    print("==", r["mode"], "gold", r["gold"], "strict", r["strict"], "flex", r["flexible"], r["new_tokens"], r["finish_reason"])
    print(r["text"][:600])
print("load", t_load, "gen", t_gen)
