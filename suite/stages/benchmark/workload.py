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
import json
import random
from itertools import zip_longest
from pathlib import Path

from suite.runtime import safeio



def _gsm8k(data_dir: Path) -> list[str]:
    path = data_dir / "gsm8k" / "test.jsonl"
    if not path.is_file():
        return []
    return [f"Question: {row['question']}\nAnswer:" for row in safeio.iter_jsonl(path, "dataset")]


def _humaneval(data_dir: Path) -> list[str]:
    path = data_dir / "humaneval" / "HumanEval.jsonl.gz"
    if not path.is_file():
        return []
    return [row["prompt"] for row in safeio.iter_jsonl(path, "dataset")]  # gzipped: decompressed within the cap


def _choice_csvs(folder: Path, answer_cue: str, header: bool) -> list[str]:
    out = []
    for f in sorted(folder.glob("*.csv")):
        with safeio.open_text(f, "dataset", newline="") as fh:
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


def write_dataset(prompts: list[str], n: int, path: Path, tag: str, output_lens: list[int] | None = None) -> Path:
    """``n`` prompts (cycled if there are fewer) as vLLM's custom dataset, each behind a run tag; ``output_lens``:
    each prompt's own output length (the custom dataset's ``output_tokens``, read with --custom-output-len -1)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            row = {"prompt": f"[{tag}-{i}] {prompts[i % len(prompts)]}"}
            if output_lens is not None:
                row["output_tokens"] = output_lens[i % len(prompts)]
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def dataset_rows(path: Path, fmt: str) -> list[tuple[str, int | None]]:
    """(prompt, output length) of every usable row of a team's traffic file (``throughput.dataset``): sharegpt, a
    JSON list of {conversations: [...]} whose first two turns are prompt and answer (the answer's length is counted
    in tokens by vLLM's client: None here), as vLLM's ShareGPT loader keeps them; jsonl, one {prompt, output_len}
    (or output_tokens, vLLM's name) per line. Raises ValueError naming the first bad line."""
    text = safeio.read_text(path, "dataset")
    rows: list[tuple[str, int | None]] = []
    if fmt == "sharegpt":
        data = safeio.loads_json(text, path, "dataset")
        if not isinstance(data, list):
            raise ValueError("a ShareGPT file is a JSON list of {conversations: [...]}")
        for entry in data:
            turns = entry.get("conversations") if isinstance(entry, dict) else None
            if isinstance(turns, list) and len(turns) >= 2 and all(isinstance(t, dict) for t in turns[:2]):
                rows.append((str(turns[0].get("value", "")), None))
        return rows
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = safeio.loads_json(line, path, "dataset", where=f"line {n}")
            out = row.get("output_len", row.get("output_tokens"))
            if not isinstance(row.get("prompt"), str) or isinstance(out, bool) or not isinstance(out, int) or out < 1:
                raise ValueError
        except (ValueError, AttributeError):
            raise ValueError(f"line {n}: not a JSON object with a string 'prompt' and an integer 'output_len' >= 1")
        rows.append((row["prompt"], out))
    return rows
