#!/usr/bin/env python3
"""Paired GSM8K / HumanEval comparisons of evaluate-stage outputs (the H200 KV studies' paired.txt).

usage: kv_paired.py OUT_DIR NAME=DIR/or/items.jsonl.gz ... --pairs VARIANT:BASE ...
Each NAME is either a stage output folder (samples_suite_*.jsonl) or a NAME.items.jsonl.gz written by
this script (every item's score and filtered response, enough to recompute the statistics). Writes
OUT_DIR/NAME.items.jsonl.gz for every folder given and prints one line per comparison.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

try:
    from suite.analysis.paired import compare
except ImportError:  # pragma: no cover - before the layout move
    from suite.paired import compare

METRICS = {"suite_gsm8k": ("exact_match", "strict-match"), "suite_humaneval": ("pass@1", "create_test")}


def rows_of(src: Path):
    if src.is_file():
        with gzip.open(src, "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("filter") == METRICS[r["task"]][1]:
                    yield r
        return
    for task, (name, filt) in METRICS.items():
        with open(src / f"samples_{task}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("filter") == filt:
                    yield {"task": task, "doc_id": r["doc_id"], "filter": filt, name: float(r[name]),
                           "filtered_resps": r["filtered_resps"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("sources", nargs="+", help="NAME=PATH")
    ap.add_argument("--pairs", nargs="+", required=True, help="VARIANT:BASE")
    a = ap.parse_args()
    scores: dict[str, dict[str, dict]] = {}
    for spec in a.sources:
        name, _, path = spec.partition("=")
        src = Path(path)
        rows = list(rows_of(src))
        if src.is_dir():
            with gzip.open(a.out / f"{name}.items.jsonl.gz", "wt", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in rows)
        per: dict[str, dict] = {}
        for r in rows:
            metric = METRICS[r["task"]][0]
            per.setdefault(r["task"], {})[(r["task"], int(r["doc_id"]))] = float(r[metric])
        scores[name] = per
        print(f"{name:28s} " + " ".join(f"{t.removeprefix('suite_')} {sum(v.values()) / len(v):.4f} (n={len(v)})"
                                          for t, v in per.items()))
    for pair in a.pairs:
        var, _, base = pair.partition(":")
        for task, (metric, filt) in METRICS.items():
            c = compare(task, f"{metric},{filt}", scores[base][task], scores[var][task])
            p = "-" if c.mcnemar_p is None else f"{c.mcnemar_p:.3g}"
            print(f"{var:28s} vs {base:14s} {task:16s} n={c.n:5d} delta={100 * c.delta:+.2f} "
                  f"[{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}] gained={c.gained} lost={c.lost} p={p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
