#!/usr/bin/env python3
"""Item-level agreement of two scorings of one task, from kept items files (docs/results/*/NAME.items.jsonl.gz).

usage: items_paired.py [--task suite_gsm8k] [--metric exact_match,strict-match] A B [A B ...]
Each A, B: an items file (gzipped JSONL, one row per scored item: task, doc_id, filter, the metric, resps).
Prints, per pair, both scores, the share of items with identical scores, the share of identical generations,
and the paired delta A - B with its 95% BCa bootstrap CI, gained/lost and McNemar's exact p: the suite's own
statistics (suite.analysis.paired.compare, what `suite run` puts in summary.json).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from suite.analysis.paired import compare  # noqa: E402


def load(path: str, task: str, metric: str) -> tuple[dict, dict]:
    name, _, filt = metric.partition(",")
    scores, texts = {}, {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("task") == task and r.get("filter", "none") == (filt or "none") and name in r:
                scores[int(r["doc_id"])] = float(r[name])
                texts[int(r["doc_id"])] = json.dumps(r.get("resps"))
    return scores, texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="suite_gsm8k")
    ap.add_argument("--metric", default="exact_match,strict-match")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    if len(a.files) % 2:
        ap.error("give the files in pairs: A B [A B ...]")
    for fa, fb in zip(a.files[::2], a.files[1::2]):
        (sa, ta), (sb, tb) = load(fa, a.task, a.metric), load(fb, a.task, a.metric)
        keys = sorted(set(sa) & set(sb))
        c = compare(a.task, a.metric, sb, sa)
        same = sum(sa[k] == sb[k] for k in keys)
        gen = sum(ta[k] == tb[k] for k in keys)
        name = lambda f: Path(f).parent.name + "/" + Path(f).name.removesuffix(".items.jsonl.gz")  # noqa: E731
        p = f"{c.mcnemar_p:.3g}" if c.mcnemar_p is not None else "-"
        print(f"{name(fa)} {sum(sa[k] for k in keys) / len(keys):.4f} vs {name(fb)} {sum(sb[k] for k in keys) / len(keys):.4f}"
              f": n {len(keys)}, identical scores {same}/{len(keys)} ({100 * same / len(keys):.2f}%), identical "
              f"generations {100 * gen / len(keys):.1f}%, delta {100 * c.delta:+.2f} [{100 * c.ci_low:+.2f}, "
              f"{100 * c.ci_high:+.2f}] points, gained/lost {c.gained}/{c.lost}, McNemar p {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
