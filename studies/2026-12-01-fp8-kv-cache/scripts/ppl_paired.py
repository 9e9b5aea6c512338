#!/usr/bin/env python3
"""Token-level perplexity of the suite_longppl / suite_longppl_pos tasks, paired by document and by span.

usage: ppl_paired.py [--tokenizer DIR --out DIR] BASE VARIANT [VARIANT ...]
BASE and each VARIANT: an evaluate-stage output folder (samples_suite_longppl*.jsonl; needs --tokenizer),
or a NAME.ppl.jsonl.gz this script wrote to --out from one (one row per document or span: task, id,
bucket, summed log-likelihood, token count). lm-eval keeps one summed log-likelihood per document
(rolling) or span (pos); the token count comes from the model's tokenizer (each span's continuation
tokenized on its own: within a token or two of its count inside the document). Prints corpus perplexity
exp(-sum ll / sum tokens), the mean paired per-document delta with a 95% bootstrap CI, and, for the position
task, the perplexity of each span bucket against the base. The pairing is the suite's own
(suite.analysis.perplexity.compare, what `suite run` puts in summary.json and `suite gate`'s
max_perplexity_increase reads); the suite counts tokens with the baseline's tokenizer.json (`tokenizers`),
the same counts as transformers' tokenizer here.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

TASKS = ("suite_longppl", "suite_longppl_pos")


def rows_from_folder(folder: Path, tok) -> list[dict]:
    rows = []
    for task in TASKS:
        with open(folder / f"samples_{task}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                # the metric's own (log-likelihood, words) pair: the span's or document's summed ll in both
                # versions of suite_longppl_pos (2.0 scores two prefixes and differences them)
                doc, ll = r["doc"], r["word_perplexity"][0]
                text = doc["continuation"] if task.endswith("_pos") else doc["text"]
                rows.append({"task": task, "id": doc["id"], "bucket": doc.get("bucket", "all"), "ll": float(ll),
                             "tokens": len(tok(text, add_special_tokens=False)["input_ids"])})
    return rows


def load(src: Path, tok, out: Path | None) -> tuple[str, list[dict]]:
    if src.is_dir():
        rows = rows_from_folder(src, tok)
        if out:
            with gzip.open(out / f"{src.name}.ppl.jsonl.gz", "wt", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in rows)
        return src.name, rows
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        return src.name.removesuffix(".ppl.jsonl.gz"), [json.loads(line) for line in fh]


def start(bucket: str) -> int:  # '0_512', '1k_2k', ... -> the span's first token
    lo = bucket.split("_")[0]
    return int(lo[:-1]) * 1024 if lo.endswith("k") else int(lo) if lo.isdigit() else -1


def ppl(rows) -> float:
    return math.exp(-sum(r["ll"] for r in rows) / sum(r["tokens"] for r in rows))


def main() -> int:
    from suite.analysis.perplexity import compare  # the suite's pairing and interval (BCa, seeded)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer")
    ap.add_argument("--out", type=Path)
    ap.add_argument("base", type=Path)
    ap.add_argument("variants", type=Path, nargs="+")
    a = ap.parse_args()
    tok = None
    if a.tokenizer:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(a.tokenizer)
    bname, brows = load(a.base, tok, a.out)
    variants = [load(v, tok, a.out) for v in a.variants]
    for task in TASKS:
        base = {r["id"]: r for r in brows if r["task"] == task}
        unit = "span" if task.endswith("_pos") else "document"
        print(f"{task}: {len(base)} {unit}s, {sum(r['tokens'] for r in base.values()):,} tokens; "
              f"{bname} token perplexity {ppl(base.values()):.4f}")
        buckets = sorted({r["bucket"] for r in base.values()}, key=start)
        for vname, vrows in variants:
            var = {r["id"]: r for r in vrows if r["task"] == task}
            keys = sorted(set(base) & set(var))
            c = compare(task, {k: (r["ll"], r["tokens"]) for k, r in base.items()},
                        {k: (r["ll"], r["tokens"]) for k, r in var.items()}, unit)
            pb, pv = c.baseline_ppl, c.ppl
            print(f"  {vname:18s} token ppl {pv:.4f} (delta {pv - pb:+.4f}, {100 * (pv / pb - 1):+.2f}%); per-{unit} "
                  f"delta mean {c.delta:+.4f} [{c.ci_low:+.4f}, {c.ci_high:+.4f}], worse in {c.worse}/{c.n}"
                  + (f"; {c.unpaired} not paired: {', '.join(c.unpaired_ids)}" if c.unpaired else ""))
            if len(buckets) > 1:
                parts = []
                for b in buckets:
                    ks = [k for k in keys if base[k]["bucket"] == b]
                    qb, qv = ppl([base[k] for k in ks]), ppl([var[k] for k in ks])
                    parts.append(f"{b} {qb:.3f}->{qv:.3f} ({qv - qb:+.3f}, n={len(ks)})")
                print("    by position: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
