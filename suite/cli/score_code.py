"""`suite score-code`: model-written programs scored in the sandbox; its options checked before anything runs."""

from __future__ import annotations

import json
import math

from suite.runtime.errors import EXIT_OK, Problem, SuiteError
from suite.stages.evaluate.sandbox.score import score_file

MAX_TIMEOUT_S = 3600.0


def _timeout(value) -> float:
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and 0 < t <= MAX_TIMEOUT_S):
        raise SuiteError(Problem("--timeout", str(value), "not a number of seconds in (0, 3600]",
                                 "give the seconds each program may run, e.g. --timeout 10"))
    return t


def _ks(value: str | None) -> list[int] | None:
    if not value:
        return None
    parts = [p.strip() for p in value.split(",")]
    if not all(p.isdigit() and p.isascii() and 1 <= int(p) <= 1000 for p in parts):
        raise SuiteError(Problem("--k", value, "not a comma-separated list of integers from 1 to 1000",
                                 "e.g. --k 1,10 (pass@k needs at least k samples per task)"))
    return sorted({int(p) for p in parts})


def _workers(value) -> int | None:
    if value is not None and not 1 <= value <= 256:
        raise SuiteError(Problem("--workers", str(value), "not an integer from 1 to 256",
                                 "e.g. --workers 2 (default: one per CPU)"))
    return value


def cmd_score_code(args) -> int:
    timeout, ks, workers = _timeout(args.timeout), _ks(args.k), _workers(args.workers)
    result = score_file(args.samples, args.problems, allow=args.allow_code_execution, mode=args.sandbox,
                        timeout_s=timeout, ks=ks, workers=workers)
    print(json.dumps(result, ensure_ascii=False))
    return EXIT_OK
