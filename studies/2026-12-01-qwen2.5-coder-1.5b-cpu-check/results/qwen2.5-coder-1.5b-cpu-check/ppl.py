import json, math, sys, time, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(2)
docs = [json.loads(l) for l in open("/work/main/tasks/data/longtext/docs.jsonl")][:2]
out = {"text": "first 384 tokens of each of the first 2 passages of tasks/data/longtext/docs.jsonl (Jane Austen), "
               "NLL over tokens 2..384 of each (383 predicted tokens per passage)", "results": []}
for name in sys.argv[2:]:
    path = f"/work/main/models/{name}"
    tok = AutoTokenizer.from_pretrained(path)
    for dtype in (torch.float32, torch.bfloat16):
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
        nll, n = 0.0, 0
        per = []
        for d in docs:
            ids = tok(d["text"], return_tensors="pt")["input_ids"][:, :384]
            with torch.no_grad():
                logits = model(ids).logits.float()
            lp = torch.log_softmax(logits[0, :-1], -1).gather(1, ids[0, 1:, None])[:, 0]
            nll -= lp.sum().item(); n += lp.numel(); per.append(round(math.exp(-lp.mean().item()), 2))
        r = {"model": name, "dtype": str(dtype).split(".")[-1], "tokens": n, "mean_nll": round(nll / n, 4),
             "ppl": round(math.exp(nll / n), 2), "ppl_per_passage": per, "ids": [d["id"] for d in docs],
             "seconds": round(time.perf_counter() - t0, 1)}
        print(r, flush=True); out["results"].append(r)
        del model
json.dump(out, open(sys.argv[1], "w"), indent=1)
