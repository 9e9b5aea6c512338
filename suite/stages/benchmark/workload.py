"""Serving workloads built from the accuracy tasks' own data, so throughput is measured on the prompts
accuracy is measured on (``throughput.workload: tasks``).

Prompts are the tasks' zero-shot question texts as lm-eval's YAMLs write them (GSM8K
``Question: ...\\nAnswer:``, HumanEval's function header, MMLU/C-Eval question + lettered choices +
``Answer:`` / ``答案：``), taken round-robin across the four benchmarks from ``eval.data_dir`` and
shuffled with the seed. Each benchmark run gets its own file whose prompts carry a short run tag, so
vLLM's prefix cache cannot serve one repetition from another's blocks. vLLM's client reads the file
as its ``custom`` dataset (one ``{"prompt": ...}`` per line).
"""

from __future__ import annotations

import csv
import gzip
import json
import random
from itertools import zip_longest
from pathlib import Path


def _gsm8k(data_dir: Path) -> list[str]:
    path = data_dir / "gsm8k" / "test.jsonl"
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as fh:
        return [f"Question: {json.loads(line)['question']}\nAnswer:" for line in fh if line.strip()]


def _humaneval(data_dir: Path) -> list[str]:
    path = data_dir / "humaneval" / "HumanEval.jsonl.gz"
    if not path.is_file():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["prompt"] for line in fh if line.strip()]


def _choice_csvs(folder: Path, answer_cue: str, header: bool) -> list[str]:
    out = []
    for f in sorted(folder.glob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        for r in rows[1:] if header else rows:
            q, a, b, c, d = (r[1:6] if header else r[0:5])
            out.append(f"{q.strip()}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\n{answer_cue}")
    return out


def task_prompts(data_dir: Path, seed: int = 0) -> list[str]:
    """Every prompt of the four benchmarks found under ``data_dir``, interleaved, then shuffled."""
    sources = [_gsm8k(data_dir), _humaneval(data_dir),
               _choice_csvs(data_dir / "mmlu" / "test", "Answer:", header=False),
               _choice_csvs(data_dir / "ceval" / "val", "答案：", header=True)]
    prompts = [p for group in zip_longest(*sources) for p in group if p]
    if not prompts:
        raise FileNotFoundError(f"{data_dir}: no GSM8K, HumanEval, MMLU or C-Eval data (layout of ../shared/data)")
    random.Random(seed).shuffle(prompts)
    return prompts


def write_dataset(prompts: list[str], n: int, path: Path, tag: str) -> Path:
    """``n`` prompts (cycled if there are fewer) as vLLM's custom dataset, each behind a run tag."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"prompt": f"[{tag}-{i}] {prompts[i % len(prompts)]}"}, ensure_ascii=False) + "\n")
    return path
