"""The served evaluation (``eval.engine: served``): the variant's tasks scored on this stage's ``vllm serve``.

One engine start per variant instead of two: the server this stage starts first answers lm-eval, then
its prefix cache is emptied (``server.reset_prefix_cache``: the evaluation's prompts must not speed up
the load points, a 'tasks' workload reuses them), then the load points run as without it.

The evaluation is the evaluate stage itself, run as its own process (``python -m suite.stages evaluate``,
as the runner runs it) with ``backend: served`` and the server's ``/v1/completions`` as ``base_url``:
one copy of the evaluation code, lm-eval's files written where the evaluate stage writes them (the
config's ``output_dir``, the variant's ``evaluate/``), and lm-eval's working-folder change, code-sandbox
settings and memory kept out of this process. Its config, result and log are in the benchmark's folder
(``evaluate.config.json``, ``evaluate.result.json``, ``evaluate.log``). The engine it is scored on is
the server's (``BenchmarkConfig.engine``). The run's API key reaches it as ``OPENAI_API_KEY``, which
lm-eval's API model sends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from suite.runtime import procs
from suite.stages.benchmark.server import ServerError, server_line
from suite.records.evaluate import EvaluateConfig, EvaluateResult

# registers POST /reset_prefix_cache (and vLLM's other dev routes, unauthenticated: the server listens on
# 127.0.0.1 only); its one other effect is log_error_stack. vLLM's own benchmark sweep sets it for the same reset
# (vllm/benchmarks/sweep/server.py).
SERVED_ENV = {"VLLM_SERVER_DEV_MODE": "1"}


def served_config(evaluate: EvaluateConfig, engine, port: int) -> EvaluateConfig:
    """The evaluation as it runs on this server: the server's engine, ``backend: served``, its URL."""
    return evaluate.model_copy(update={"engine": engine, "backend": "served",
                                       "base_url": f"http://127.0.0.1:{port}/v1/completions"})


def evaluate_on_server(evaluate: EvaluateConfig, engine, server: subprocess.Popen, port: int, api_key: str | None,
                       out_dir: Path, server_log: Path, poll_s: float = 2.0) -> EvaluateResult:
    """Run the evaluate stage against the live server; raises ServerError with the evaluation's or the
    server's own error line when it fails or the server dies under it."""
    config = served_config(evaluate, engine, port)
    cfg_path, res_path, log_path = out_dir / "evaluate.config.json", out_dir / "evaluate.result.json", out_dir / "evaluate.log"
    res_path.unlink(missing_ok=True)  # an earlier attempt's result is not this one's
    config.write(cfg_path)
    env = {**os.environ, **({"OPENAI_API_KEY": api_key} if api_key else {})}
    for name in ("NO_PROXY", "no_proxy"):  # lm-eval's requests honour HTTP(S)_PROXY: never for our loopback server
        env[name] = ",".join(filter(None, ["127.0.0.1", "localhost", env.get(name)]))
    with open(log_path, "w") as fh:
        child = procs.spawn([sys.executable, "-m", "suite.stages", "evaluate", str(cfg_path), str(res_path)],
                            stdout=fh, env=env)
        try:
            while True:
                try:
                    rc = child.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    if server.poll() is not None:
                        raise ServerError(f"vllm serve died during the served evaluation "
                                          f"({procs.signal_name(server.returncode)}): {server_line(server_log)} "
                                          f"[log: {server_log}]") from None
        finally:
            procs.stop(child, grace_s=10)
    if rc != 0 or not res_path.is_file():
        raise ServerError(f"the served evaluation failed ({procs.signal_name(rc)}): {procs.failure_line(log_path)} "
                          f"[log: {log_path}]")
    return EvaluateResult.read(res_path)
