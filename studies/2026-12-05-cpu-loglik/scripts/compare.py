"""Compare score.py outputs: every rep of every file against the first rep of the first file.

usage: compare.py A.json [B.json ...]
Per pair: requests whose loglikelihood is bit-identical / all, the largest absolute difference, items whose acc
differs, and each file's MMLU / C-Eval accuracy."""
import json
import sys

runs = []
for path in sys.argv[1:]:
    d = json.load(open(path))
    for i, rep in enumerate(d["reps"]):
        runs.append((f"{path.rsplit('/', 1)[-1]}#{i}", d, rep))
ref_name, _, ref = runs[0]
print(f"reference: {ref_name}")
print("| run | threads | max_num_seqs / batched tokens | uptime (1-min load) | MMLU | C-Eval | identical ll | max abs diff | items flipped |")
print("|---|---|---|---|---|---|---|---|---|")
for name, d, rep in runs:
    same = total = flips = 0
    worst = 0.0
    for key, item in ref["items"].items():
        other = rep["items"][key]
        for x, y in zip(item["ll"], other["ll"]):
            total += 1
            same += x == y
            worst = max(worst, abs(x - y))
        flips += item["acc"] != other["acc"]
    load = rep["uptime"].split("load average:")[1].split(",")[0].strip()
    s = d["scheduler"]
    print(f"| {name} | {d['torch_threads']} | {s['max_num_seqs']} / {s['max_num_batched_tokens']} | {load} | "
          f"{rep['scores']['suite_mmlu']:.4f} | {rep['scores']['suite_ceval']:.4f} | {same}/{total} | {worst:.3g} | {flips} |")
