"""Runs model-written programs (HumanEval) away from the suite.

Each program runs in its own process: a new session (its whole process group is killed on timeout),
a throw-away working directory, limits on CPU time, address space, file size and process count, and
a prelude that removes network access from Python's socket module. Nothing runs unless the recipe
opted in (``eval.allow_code_execution: true``), which the evaluate stage passes as
``SUITE_ALLOW_CODE_EXECUTION=1``.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

ALLOW_ENV = "SUITE_ALLOW_CODE_EXECUTION"

_PRELUDE = """\
import socket as _s
def _no_network(*a, **k):
    raise OSError("network access is disabled in the suite sandbox")
_s.socket = _no_network
_s.create_connection = _no_network
_s.socketpair = _no_network
del _s
"""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 64


@dataclass(frozen=True)
class Outcome:
    passed: bool
    reason: str  # "passed", "failed", "timeout"


def _limit(limits: Limits):
    def apply():
        os.setsid()
        cpu = int(math.ceil(limits.timeout_s)) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def kill_group(proc: subprocess.Popen, attempts: int = 200) -> None:
    """SIGKILL the program's process group until it is empty (a forking program can add members
    while we kill); the leader is reaped first so that its zombie does not keep the group alive."""
    for i in range(attempts):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if i == 0:
            proc.wait()
        else:
            time.sleep(0.01)


def check_allowed() -> None:
    if os.environ.get(ALLOW_ENV) != "1":
        raise PermissionError(
            "model-written code execution is off; set eval.allow_code_execution: true in the recipe"
        )


def run_program(source: str, limits: Limits = Limits()) -> Outcome:
    """Run one Python program; passed means exit code 0 within the limits."""
    check_allowed()
    with tempfile.TemporaryDirectory(prefix="suite-sandbox-") as work:
        path = os.path.join(work, "program.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(_PRELUDE + source)
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", path], cwd=work, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_limit(limits),
        )
        try:
            code = proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_group(proc)
    if code is None:
        return Outcome(False, "timeout")
    return Outcome(code == 0, "passed" if code == 0 else "failed")


def estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al., 2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k(references: list[str], predictions: list[list[str]], k: list[int] | int | None = None) -> dict:
    """lm-eval metric function (same signature as lm-eval's humaneval utils.pass_at_k)."""
    ks = [k] if isinstance(k, int) else (k or [1])
    scores = {f"pass@{kk}": [] for kk in ks}
    for test, candidates in zip(references, predictions):
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            outcomes = list(pool.map(lambda prog: run_program(prog + "\n" + test), candidates))
        n, c = len(outcomes), sum(o.passed for o in outcomes)
        for kk in ks:
            scores[f"pass@{kk}"].append(estimate_pass_at_k(n, c, kk) if n >= kk else 0.0)
    return {name: sum(v) / len(v) if v else 0.0 for name, v in scores.items()}


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    return [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]
