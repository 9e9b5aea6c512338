"""Regenerate calibration/data/chat-demo.jsonl: 128 real dialogs for the offline demo, as chat messages.

    python3 tools/make_calibration.py --shared ../shared/data

Sources (all in ../shared/data, MIT or CC BY-NC-SA as noted there): GSM8K train questions with their
worked answers (math dialog), MMLU dev questions with the answer spelled out (English, knowledge),
C-Eval dev questions with their explanations (Chinese exam dialog).
"""

import argparse
import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    shared = ap.parse_args().shared
    rows = []
    with open(shared / "gsm8k/train.jsonl", encoding="utf-8") as fh:
        for line in list(fh)[1000:1064]:
            d = json.loads(line)
            rows.append([{"role": "user", "content": d["question"]}, {"role": "assistant", "content": d["answer"]}])
    for f in sorted((shared / "mmlu/dev").glob("*.csv"))[:32]:
        q, a, b, c, d_, ans = next(csv.reader(open(f, encoding="utf-8")))
        opts = {"A": a, "B": b, "C": c, "D": d_}
        rows.append([{"role": "user", "content": f"{q}\nA. {a}\nB. {b}\nC. {c}\nD. {d_}"},
                     {"role": "assistant", "content": f"The answer is {ans}: {opts[ans]}."}])
    for f in sorted((shared / "ceval/dev").glob("*.csv"))[:32]:
        r = next(csv.DictReader(open(f, encoding="utf-8")))
        rows.append([{"role": "user", "content": f"{r['question']}\nA. {r['A']}\nB. {r['B']}\nC. {r['C']}\nD. {r['D']}"},
                     {"role": "assistant", "content": f"答案：{r['answer']}。{r.get('explanation', '')}"}])
    out = ROOT / "calibration/data/chat-demo.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        for msgs in rows:
            fh.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
    print(f"{out}: {len(rows)} dialogs")


if __name__ == "__main__":
    main()
