"""Paired accuracy statistics: a variant against the baseline, item by item, from lm-eval's samples.

lm-eval's stderr is the sampling error of one model's score. Two variants scored on the same items are
paired, and the delta's uncertainty is much smaller than the two stderrs suggest. For each task:
the mean per-item delta, its 95% confidence interval by paired bootstrap (resampling items, seeded),
how many items flipped each way, and for 0/1 scores McNemar's exact test (two-sided binomial test on
the discordant pairs).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class PairedComparison:
    task: str
    metric: str
    n: int
    delta: float
    ci_low: float
    ci_high: float
    gained: int  # items the variant gets right and the baseline wrong (binary scores)
    lost: int
    mcnemar_p: float | None  # None when scores are not all 0/1
    confidence: float = 0.95

    def as_dict(self) -> dict:
        return asdict(self)


def item_scores(samples_file: str | Path, metric: str) -> dict[tuple[str, int], float]:
    """{(subtask, doc_id): score} for one 'metric,filter' from a samples_<task>.jsonl file."""
    name, _, filt = metric.partition(",")
    scores = {}
    with open(samples_file, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("filter", "none") == (filt or "none") and name in row:
                scores[(row.get("task", ""), int(row["doc_id"]))] = float(row[name])
    return scores


def mcnemar_exact_p(gained: int, lost: int) -> float:
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_ci(diffs: list[float], confidence: float, n_boot: int, seed: int) -> tuple[float, float]:
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    step = max(1, 4_000_000 // n)  # bounded memory for full-size benchmarks
    for start in range(0, n_boot, step):
        rows = min(step, n_boot - start)
        means[start:start + rows] = d[rng.integers(0, n, size=(rows, n))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def compare(task: str, metric: str, base: dict, variant: dict, confidence: float = 0.95,
            n_boot: int = 2000, seed: int = 0) -> PairedComparison:
    keys = sorted(set(base) & set(variant))
    diffs = [variant[k] - base[k] for k in keys]
    delta = sum(diffs) / len(diffs) if diffs else 0.0
    low, high = bootstrap_ci(diffs, confidence, n_boot, seed)
    binary = all(base[k] in (0.0, 1.0) and variant[k] in (0.0, 1.0) for k in keys)
    gained = sum(1 for k in keys if variant[k] > base[k])
    lost = sum(1 for k in keys if variant[k] < base[k])
    return PairedComparison(task, metric, len(keys), delta, low, high, gained, lost,
                            mcnemar_exact_p(gained, lost) if binary else None, confidence)


def compare_variant(base_eval, variant_eval, seed: int = 0) -> list[PairedComparison]:
    """Every task both evaluations scored, on the task's headline metric."""
    out = []
    variant_scores = {s.task: s for s in variant_eval.scores}
    for s in base_eval.scores:
        v = variant_scores.get(s.task)
        bf, vf = base_eval.samples_files.get(s.task), variant_eval.samples_files.get(s.task)
        if v is None or not bf or not vf or v.metric != s.metric:
            continue
        out.append(compare(s.task, s.metric, item_scores(bf, s.metric), item_scores(vf, s.metric), seed=seed))
    return out
