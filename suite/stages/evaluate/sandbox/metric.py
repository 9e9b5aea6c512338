"""lm-eval's metric for tasks/humaneval: pass@k over programs run in the code sandbox (no hub metric download)."""

from __future__ import annotations

import math

from suite.stages.evaluate.sandbox import run_programs


def estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al., 2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k(references: list[str], predictions: list[list[str]], k: list[int] | int | None = None) -> dict:
    """lm-eval metric function (same signature as lm-eval's humaneval utils.pass_at_k). Each reference is
    the trusted part of a check (tasks/humaneval's target: the problem's prompt, its test and
    ``check(entry_point)``), run apart from the prediction (prompt + completion)."""
    ks = [k] if isinstance(k, int) else (k or [1])
    scores = {f"pass@{kk}": [] for kk in ks}
    for test, candidates in zip(references, predictions):
        outcomes = run_programs([(prog, test) for prog in candidates])
        n, c = len(outcomes), sum(o.passed for o in outcomes)
        for kk in ks:
            scores[f"pass@{kk}"].append(estimate_pass_at_k(n, c, kk) if n >= kk else 0.0)
    return {name: sum(v) / len(v) if v else 0.0 for name, v in scores.items()}


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    return [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]
