#!/usr/bin/env python3
"""After the study: item agreement and timings from the run archives the device brought back.

usage: analyze.py DIR        DIR: where the pieces were joined and unpacked, one folder per run archive
                             (DIR/runs-a-offline/<run>/..., as `cat runs-NAME.tar.gz.part-* | tar xz -C DIR/runs-NAME`)
Writes DIR/items/<recipe>.<variant>.items.jsonl.gz (every GSM8K item: strict-match score, response) from each
samples_suite_gsm8k*.jsonl it finds, then prints studies/2026-12-01-fp8-kv-cache/scripts/items_paired.py's line for each pair below (identical scores,
identical generations, paired delta with its 95% CI, McNemar p), and each run's jobs (jobs.json wall_s per stage).
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OFF, OFF_BI, SRV, SRV_BI = "a-offline", "a-offline-bi", "a-served", "a-served-bi"


def pairs():
    """(A, B) item files, as recipe.variant names: what issue 41's GPU proof asks per mode."""
    out = []
    for off, srv, mode in ((OFF, SRV, "off"), (OFF_BI, SRV_BI, "on")):
        for kv in ("bf16", "fp8kv"):
            out += [(f"{off}.{kv}-seqs64", f"{off}.{kv}-seqs1024"),        # the decode batch
                    (f"{srv}.{kv}-served", f"{off}.{kv}-seqs1024"),        # served vs offline, same max_num_seqs
                    (f"{srv}.{kv}-served", f"{off}.{kv}-seqs64")]
        for where in ("seqs64", "seqs1024"):                                 # FP8 KV's cost against BF16
            out.append((f"{off}.fp8kv-{where}", f"{off}.bf16-{where}"))
        out.append((f"{srv}.fp8kv-served", f"{srv}.bf16-served"))
    for v in ("bf16-seqs64", "fp8kv-seqs64", "bf16-seqs1024", "fp8kv-seqs1024"):  # what the mode itself changes
        out.append((f"{OFF_BI}.{v}", f"{OFF}.{v}"))
    for v in ("bf16-served", "fp8kv-served"):
        out.append((f"{SRV_BI}.{v}", f"{SRV}.{v}"))
    out.append(("b-checkpoint-path.fp8-dynamic-path", "b-checkpoint-path.bf16"))
    return out


def variant_of(path: Path, run: Path) -> str:
    parts = path.relative_to(run).parts
    return parts[parts.index("variants") + 1] if "variants" in parts else parts[0]


def main() -> int:
    root = Path(sys.argv[1])
    items = root / "items"
    items.mkdir(exist_ok=True)
    names = set()
    for out in sorted(root.glob("runs-*")):
        recipe = out.name.removeprefix("runs-")
        for run in sorted(p for p in out.iterdir() if p.is_dir() and p.name[:1] == "2")[-1:]:
            jobs = run / "jobs.json"
            if jobs.is_file():
                for j in json.loads(jobs.read_text()).get("jobs", []):
                    print(f"{recipe:22s} {j['id']:36s} {j.get('state')} wall {j.get('wall_s', 0):7.1f} s")
            for f in sorted(run.rglob("samples_suite_gsm8k*.jsonl")):
                name = f"{recipe}.{variant_of(f, run)}"
                with open(f, encoding="utf-8") as fh, gzip.open(items / f"{name}.items.jsonl.gz", "wt") as g:
                    for line in fh:
                        r = json.loads(line)
                        if r.get("filter") == "strict-match":
                            g.write(json.dumps({"task": "suite_gsm8k", "doc_id": r["doc_id"], "filter": "strict-match",
                                                "exact_match": float(r["exact_match"]),
                                                "filtered_resps": r.get("filtered_resps"), "resps": r.get("resps")}) + "\n")
                names.add(name)
    args = []
    for a, b in pairs():
        if a in names and b in names:
            args += [str(items / f"{a}.items.jsonl.gz"), str(items / f"{b}.items.jsonl.gz")]
        else:
            print(f"(not both there: {a} / {b})")
    if args:
        subprocess.run([sys.executable, str(REPO / "studies" / "2026-12-01-fp8-kv-cache" / "scripts" / "items_paired.py"), *args], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
