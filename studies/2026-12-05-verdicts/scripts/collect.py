#!/usr/bin/env python3
"""Copy the study's raw files from the unpacked device archives into results/, small.

usage: collect.py SRC [DEST]     SRC: the unpacked archives (SRC/runs-NAME/<run>/..., SRC/logs/tmp/..., gpu.txt,
                                 pack.SHA256SUMS); DEST: studies/2026-12-05-verdicts/results (default)

Everything of each run folder is copied (summary.json, jobs.json, plan.json, recipe.yaml, report.html, the stage
config/result/progress JSON, logs, bench JSON, monitor series, charts) except lm-eval's samples files: these had
already lost lm-eval's `arguments` (the prompts) on the device (tools/pack_run.py) and still repeat each item's
doc, so each becomes variants/<v>/evaluate/items.jsonl.gz: one row per item and filter with task, doc_id, filter,
filtered_resps, exact_match and (strict-match row) resps_key, the first 16 hex digits of the sha256 of the raw
generation's JSON text (lm-eval's `resps`; the same generation under both filters). The generations themselves are
stored once for all variants in results/generations.jsonl.gz ({key, resps}: 7,112 distinct of 17,336, since most
items generate the same text everywhere); what is the same for every variant (the target, lm-eval's doc, prompt
and target hashes: checked equal across all variants) once in results/gsm8k-items.jsonl.gz. suite.analysis.paired.item_scores reads an items file as it reads a samples
file. results/SAMPLES.sha256 records each samples file as it came back (the prompt-less .jsonl:
sha256 and size; the device's original with prompts was not brought back). Files over 200 kB (logs, stack
samples) are gzipped. The chain log, the gates' output, the install/compile logs and gpu.txt go to results/logs/.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
BIG = 200_000
KEEP = ("task", "doc_id", "filter", "filtered_resps", "exact_match")
SHARED = ("target", "doc_hash", "prompt_hash", "target_hash")  # the same for every variant: kept once, in ITEMS
ITEMS = "gsm8k-items.jsonl.gz"
GENERATIONS = "generations.jsonl.gz"


def resps_key(resps) -> str:
    """The sha256 of a generation as the items files and generations.jsonl.gz name it (its JSON text)."""
    return hashlib.sha256(json.dumps(resps, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def items(src: Path, dest: Path, generations: dict, shared: dict) -> tuple[str, int]:
    """Write the compact items file; return the samples .jsonl's sha256 and size (as it came back, ungzipped)."""
    h, size = hashlib.sha256(), 0
    with gzip.open(src, "rb") as fh, gzip.open(dest, "wt", encoding="utf-8") as out:
        for line in fh:
            h.update(line)
            size += len(line)
            r = json.loads(line)
            row = {k: r[k] for k in KEEP if k in r}
            if r.get("filter") == "strict-match":  # the same generation under both filters
                row["resps_key"] = key = resps_key(r.get("resps"))
                generations.setdefault(key, r.get("resps"))
            doc = shared.setdefault((r.get("task"), int(r["doc_id"])), {k: r.get(k) for k in SHARED})
            if doc != {k: r.get(k) for k in SHARED}:
                raise SystemExit(f"{src}: item {r['doc_id']}: target or lm-eval hashes differ from another variant's")
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return h.hexdigest(), size


def copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.stat().st_size > BIG and not src.name.endswith((".gz", ".png", ".html")):
        with open(src, "rb") as fh, gzip.open(dest.with_name(dest.name + ".gz"), "wb") as out:
            shutil.copyfileobj(fh, out)
    else:
        shutil.copy2(src, dest)


def main() -> int:
    src = Path(sys.argv[1])
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "results"
    manifest, generations, shared = [], {}, {}
    for out in sorted(src.glob("runs-*")):
        for run in sorted(p for p in out.iterdir() if p.is_dir()):
            for f in sorted(run.rglob("*")):
                if not f.is_file() or f.name == "run.lock.guard":
                    continue
                rel = f.relative_to(src)
                if f.name.startswith("samples_"):
                    target = dest / rel.parent / "items.jsonl.gz"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    sha, size = items(f, target, generations, shared)
                    manifest.append(f"{sha}  {size:>9d}  {rel.with_suffix('')}  -> {target.relative_to(dest)}")
                else:
                    copy(f, dest / rel)
    for name in ("gpu.txt", "pack.SHA256SUMS"):
        copy(src / name, dest / "logs" / name)
    for f in sorted((src / "logs" / "tmp").rglob("*")):
        rel = f.relative_to(src / "logs" / "tmp")
        if f.is_file() and rel.parts[0].startswith(("suite-run-", "h200-chain", "install", "compileall", "extra-out")):
            copy(f, dest / "logs" / rel)
    with gzip.open(dest / GENERATIONS, "wt", encoding="utf-8", compresslevel=9) as out:
        for key in sorted(generations):
            out.write(json.dumps({"key": key, "resps": generations[key]}, ensure_ascii=False) + "\n")
    with gzip.open(dest / ITEMS, "wt", encoding="utf-8", compresslevel=9) as out:
        for (task, doc_id), doc in sorted(shared.items()):
            out.write(json.dumps({"task": task, "doc_id": doc_id, **doc}, ensure_ascii=False) + "\n")
    (dest / "SAMPLES.sha256").write_text(
        "# sha256  bytes  samples file (the .jsonl as it came back from the device: prompts already removed by\n"
        "# tools/pack_run.py; here gzipped, the sum is of the ungzipped text)  -> its compact items file\n"
        + "\n".join(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
