"""A warm ``vllm bench serve``: one client process runs all of a benchmark stage's load points.

A ``vllm bench serve`` process can spend tens of seconds at a full core before its first request (interpreter,
vLLM's imports, the tokenizer), more than the load of a 500-prompt point itself; one client start per point adds
up to a large share of a benchmark stage. ``WarmClient`` starts ``python -m suite.stages.benchmark.client`` once, as
the stage begins (its imports overlap the server's start), and sends it one job per point: vLLM's own argument
parser and ``vllm.benchmarks.serve.main`` — the code behind ``vllm bench serve`` (its ``cmd`` calls ``main(args)``),
so a point measures what the CLI measures. ``main`` seeds ``random`` and NumPy from ``--seed`` and builds its
dataset and HTTP session anew on each call, so a point does not depend on the points before it.

Protocol: a JSON line per job on the worker's stdin (``argv`` after ``vllm bench serve``, ``log``, ``env``), one
JSON line back (``rc``: 0, the ``SystemExit`` code, or 1 with the traceback in the job's log). The job's stdout and
stderr go to its log (file descriptors 1 and 2, so vLLM's loggers and any child process land there too). A job that
outlives its timeout stops the worker (its whole process tree); the next point starts a fresh one (whose imports
then count in that point's timeout). After each job the worker undoes vLLM's ``gc.freeze()`` and collects, so a
point's tokenizer and dataset do not pile up over a study.
"""

from __future__ import annotations

import gc
import json
import os
import select
import subprocess
import sys
import time
import traceback
from pathlib import Path

from suite.runtime import safeio
from suite.runtime import procs
from suite.runtime.vllm_alias import install_vllm_version_alias

WORKER = [sys.executable, "-m", "suite.stages.benchmark.client"]


class WarmClient:
    """The parent's handle on one worker; ``run`` is one load point's client."""

    def __init__(self, startup_log: Path):
        self.startup_log = startup_log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> "WarmClient":
        if self.proc is None or self.proc.poll() is not None:
            with open(self.startup_log, "a") as fh:
                self.proc = procs.spawn(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fh)
            self.starts += 1
        return self

    @property
    def pid(self) -> int:
        return self.start().proc.pid

    def run(self, argv: list[str], log: Path, env: dict[str, str], timeout_s: float) -> int | None:
        """The job's exit code, or None if it did not finish in ``timeout_s`` (the worker is then stopped)."""
        proc = self.start().proc
        try:
            proc.stdin.write((json.dumps({"argv": argv, "log": str(log), "env": env}) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(log)
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                return None
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    return self._died(log)
                line += chunk
        return int(json.loads(line.decode())["rc"])

    def _died(self, log: Path) -> int:
        """The worker ended without an answer: its start-up log says why (an import error, a signal)."""
        rc = self.proc.wait() if self.proc else None
        self.close()  # its pipes, and anything it left in its process group
        said = safeio.read_text(self.startup_log, "log", errors="replace")[-4000:] if self.startup_log.is_file() else ""
        last = [line for line in said.splitlines() if line.strip()][-1:] or ["-"]
        with open(log, "a") as fh:
            fh.write(f"the benchmark client worker exited ({procs.signal_name(rc)}) without finishing the point; "
                     f"its own output: {procs.error_line(said) or last[0]}\n")
        return rc if rc not in (0, None) else 1

    def close(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, grace_s=5)
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.proc = None


def _redirect(path: str):
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _restore(saved) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in saved:
        os.close(fd)


def serve_forever() -> None:
    install_vllm_version_alias()
    answers = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol keeps the real stdout; jobs get their logs
    os.dup2(2, 1)  # anything printed outside a job goes to the start-up log, not into the protocol
    from vllm.benchmarks.serve import add_cli_args, main  # what `vllm bench serve` runs (its cmd: main(args))

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM releases before the utils package was split
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.logger import configure_logging_from_args as configure_logging
    except ImportError:  # older vLLM: logging is set up at import
        configure_logging = None
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        os.environ.update(job.get("env") or {})
        saved = _redirect(job["log"])
        try:
            args = parser.parse_args(job["argv"])
            if configure_logging is not None:  # as the CLI does before dispatching (vLLM's INFO lines in the log)
                configure_logging(args)
            main(args)
            rc = 0
        except SystemExit as e:  # argparse and vLLM's own exits
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - the point failed: its traceback is its log's last lines
            traceback.print_exc()
            rc = 1
        finally:
            _restore(saved)
            # main() ends its set-up with gc.freeze() (vllm.utils.gc_utils.freeze_gc_heap): what a point froze (its
            # tokenizer, dataset) would never be collected in a worker that lives on
            gc.unfreeze()
            gc.collect()
        answers.write(json.dumps({"rc": rc}) + "\n")


if __name__ == "__main__":
    serve_forever()
