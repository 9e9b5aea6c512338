"""The benchmark data folder the task YAMLs read (``eval.data_dir``): check it, or build it from the hub.

Layout (that of ``../shared/data``): ``mmlu/{dev,val,test}/<subject>_<split>.csv`` (no header),
``gsm8k/{train,test}.jsonl``, ``humaneval/HumanEval.jsonl.gz``, ``ceval/{dev,val}/<subject>_<split>.csv``
(with header) and ``ceval/subject_mapping.json``.

``suite data check DIR`` counts the rows of every split against the official releases and, when the
folder has a ``SHA256SUMS``, verifies every file. ``suite data prepare DIR`` (a machine with hub
access) writes the same layout from the hub copies (``cais/mmlu``, ``openai/gsm8k``,
``openai/openai_humaneval``, ``ceval/ceval-exam``) and then checks it.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

OFFICIAL_ROWS = {
    ("mmlu", "test"): 14042, ("mmlu", "val"): 1531, ("mmlu", "dev"): 285,
    ("gsm8k", "test"): 1319, ("gsm8k", "train"): 7473,
    ("humaneval", "test"): 164,
    ("ceval", "val"): 1346, ("ceval", "dev"): 260,
}


@dataclass
class DataCheck:
    rows: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    checksums_verified: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _csv_rows(files: list[Path], header: bool) -> int:
    n = 0
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            n += sum(1 for _ in csv.reader(fh)) - (1 if header else 0)
    return n


def count_rows(root: Path) -> dict[tuple[str, str], int]:
    counts = {}
    for split in ("test", "val", "dev"):
        files = sorted((root / "mmlu" / split).glob("*.csv"))
        if files:
            counts[("mmlu", split)] = _csv_rows(files, header=False)
    for split in ("val", "dev"):
        files = sorted((root / "ceval" / split).glob("*.csv"))
        if files:
            counts[("ceval", split)] = _csv_rows(files, header=True)
    for split in ("test", "train"):
        f = root / "gsm8k" / f"{split}.jsonl"
        if f.is_file():
            counts[("gsm8k", split)] = sum(1 for line in open(f, encoding="utf-8") if line.strip())
    f = root / "humaneval" / "HumanEval.jsonl.gz"
    if f.is_file():
        counts[("humaneval", "test")] = sum(1 for line in gzip.open(f, "rt", encoding="utf-8") if line.strip())
    return counts


def check(root: Path, expected: dict[tuple[str, str], int] = OFFICIAL_ROWS) -> DataCheck:
    res = DataCheck()
    counts = count_rows(root)
    for (bench, split), want in expected.items():
        got = counts.get((bench, split))
        res.rows[f"{bench}/{split}"] = got or 0
        if got is None:
            res.problems.append(f"{root}: {bench} {split} split missing")
        elif got != want:
            res.problems.append(f"{root}: {bench} {split} has {got} rows, the official release {want}")
    sums = root / "SHA256SUMS"
    if sums.is_file():
        for line in sums.read_text().splitlines():
            if not line.strip():
                continue
            digest, name = line.split(maxsplit=1)
            path = root / name.strip().lstrip("*")
            if not path.is_file():
                res.problems.append(f"{path}: listed in SHA256SUMS, missing")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                res.problems.append(f"{path}: checksum differs from SHA256SUMS")
            else:
                res.checksums_verified += 1
    return res


def prepare(root: Path) -> DataCheck:
    """Write the layout from the hub (needs network access to huggingface.co), then check it."""
    from datasets import get_dataset_config_names, load_dataset

    root.mkdir(parents=True, exist_ok=True)
    for split, hub_split in (("test", "test"), ("val", "validation"), ("dev", "dev")):
        out = root / "mmlu" / split
        out.mkdir(parents=True, exist_ok=True)
        by_subject: dict[str, list] = {}
        for r in load_dataset("cais/mmlu", "all", split=hub_split):
            by_subject.setdefault(r["subject"], []).append([r["question"], *r["choices"], "ABCD"[r["answer"]]])
        for subject, rows in by_subject.items():
            with open(out / f"{subject}_{split}.csv", "w", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerows(rows)
    (root / "gsm8k").mkdir(exist_ok=True)
    for split in ("train", "test"):
        with open(root / "gsm8k" / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for r in load_dataset("openai/gsm8k", "main", split=split):
                fh.write(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n")
    (root / "humaneval").mkdir(exist_ok=True)
    with gzip.open(root / "humaneval" / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as fh:
        for r in load_dataset("openai/openai_humaneval", split="test"):
            fh.write(json.dumps(dict(r)) + "\n")
    for subject in get_dataset_config_names("ceval/ceval-exam"):
        for split, hub_split in (("val", "val"), ("dev", "dev")):
            ds = load_dataset("ceval/ceval-exam", subject, split=hub_split)
            out = root / "ceval" / split
            out.mkdir(parents=True, exist_ok=True)
            with open(out / f"{subject}_{split}.csv", "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(ds.column_names)
                w.writerows([[r[c] for c in ds.column_names] for r in ds])
    return check(root)
