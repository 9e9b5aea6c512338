"""Benchmark stage: ``vllm serve`` on 127.0.0.1 + vLLM's own load generator (``vllm bench serve``).

Runs in the serve environment (``python -m suite.stages benchmark``). One server per variant, on a free
loopback port, in its own process group; the stage waits for ``/health`` (failing early, with the
server log, if the server exits), runs each load point with ``vllm bench serve`` (random dataset,
``--ignore-eos``, saved JSON), and always stops the whole process group, also on failure.
KV-cache capacity is read from the server log, where vLLM reports it at start-up.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from suite.results import BenchmarkConfig, BenchmarkResult, EngineConfig, LoadPoint

VLLM_CLI = [sys.executable, "-m", "suite.vllm_cli"]
KV_TOKENS_RE = re.compile(r"KV cache size: ([\d,]+) tokens")
MAX_CONC_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


class ServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_flags(engine: EngineConfig) -> list[str]:
    """vLLM engine arguments as `vllm serve` flags (snake_case -> --kebab-case)."""
    flags = ["--dtype", engine.dtype, "--max-model-len", str(engine.max_model_len),
             "--kv-cache-dtype", engine.kv_cache_dtype]
    for key, value in engine.engine_args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def serve_command(engine: EngineConfig, port: int, api_server_count: int, seed: int) -> list[str]:
    cmd = [*VLLM_CLI, "serve", engine.model, "--host", "127.0.0.1", "--port", str(port), "--seed", str(seed),
           *engine_flags(engine)]
    if api_server_count > 1:
        cmd += ["--api-server-count", str(api_server_count)]
    return cmd


def stop_process_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the server's whole process group, SIGKILL what is left after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # children (API servers, engine core) that outlived the parent
    except ProcessLookupError:
        pass
    proc.wait()


def wait_healthy(proc: subprocess.Popen, port: int, timeout_s: float, log_path: Path) -> float:
    start = time.perf_counter()
    url = f"http://127.0.0.1:{port}/health"
    while time.perf_counter() - start < timeout_s:
        if proc.poll() is not None:
            raise ServerError(f"vllm serve exited with code {proc.returncode} before it was ready:\n"
                              + tail(log_path))
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.perf_counter() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(1.0)
    raise ServerError(f"vllm serve was not healthy after {timeout_s:.0f} s:\n" + tail(log_path))


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


@contextmanager
def vllm_server(engine: EngineConfig, api_server_count: int, seed: int, log_path: Path, timeout_s: float):
    port = free_port()
    cmd = serve_command(engine, port, api_server_count, seed)
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        ready_s = wait_healthy(proc, port, timeout_s, log_path)
        yield proc, port, ready_s, cmd
    finally:
        stop_process_group(proc)
        log.close()


def load_points(config: BenchmarkConfig) -> list[tuple[str, object, int | None]]:
    points = [(f"rate-{r}", r, None) for r in config.request_rates]
    points += [(f"concurrency-{c}", "inf", c) for c in config.concurrencies]
    return points


def bench_command(config: BenchmarkConfig, port: int, rate, concurrency, out_dir: Path, filename: str) -> list[str]:
    cmd = [*VLLM_CLI, "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
           "--endpoint", "/v1/completions", "--model", config.engine.model, "--tokenizer", config.engine.model,
           "--dataset-name", "random", "--random-input-len", str(config.input_len),
           "--random-output-len", str(config.output_len), "--num-prompts", str(config.num_prompts),
           "--request-rate", str(rate), "--ignore-eos", "--seed", str(config.seed),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
           "--save-result", "--result-dir", str(out_dir), "--result-filename", filename, "--disable-tqdm"]
    if concurrency is not None:
        cmd += ["--max-concurrency", str(concurrency)]
    return cmd


def point_from_json(label: str, rate, concurrency, path: Path) -> LoadPoint:
    d = json.loads(path.read_text())
    completed = int(d.get("completed", 0))
    failed = int(d.get("failed", d.get("num_prompts", completed) - completed) or 0)
    return LoadPoint(
        label=label, request_rate=rate, max_concurrency=concurrency, ok=completed > 0 and failed == 0,
        error=None if failed == 0 else f"{failed} requests failed", completed=completed, failed=failed,
        duration_s=float(d.get("duration", 0.0)), output_tok_s=float(d.get("output_throughput", 0.0)),
        req_s=float(d.get("request_throughput", 0.0)), ttft_p50_ms=float(d.get("p50_ttft_ms", 0.0)),
        ttft_p99_ms=float(d.get("p99_ttft_ms", 0.0)), tpot_p50_ms=float(d.get("p50_tpot_ms", 0.0)),
        tpot_p99_ms=float(d.get("p99_tpot_ms", 0.0)), result_file=str(path),
    )


def run(config: BenchmarkConfig) -> BenchmarkResult:
    from suite.environments import package_versions

    start = time.perf_counter()
    out_dir = Path(config.output_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "server.log"
    points: list[LoadPoint] = []
    with vllm_server(config.engine, config.api_server_count, config.seed, log_path,
                     config.server_timeout_s) as (proc, port, ready_s, cmd):
        for label, rate, conc in load_points(config):
            if proc.poll() is not None:
                points.append(LoadPoint(label=label, request_rate=rate, max_concurrency=conc, ok=False,
                                        error=f"server exited with code {proc.returncode}"))
                continue
            filename = f"bench-{label}.json"
            client_log = out_dir / f"bench-{label}.log"
            with open(client_log, "w") as fh:
                rc = subprocess.call(bench_command(config, port, rate, conc, out_dir, filename),
                                     stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if rc != 0 or not (out_dir / filename).is_file():
                why = f"server exited with code {proc.returncode}" if proc.poll() is not None else f"client exit {rc}"
                points.append(LoadPoint(label=label, request_rate=rate, max_concurrency=conc, ok=False,
                                        error=f"{why}: {tail(client_log, 5)}"))
                continue
            points.append(point_from_json(label, rate, conc, out_dir / filename))
    log_text = log_path.read_text(errors="replace")
    kv = KV_TOKENS_RE.findall(log_text)
    mc = MAX_CONC_RE.findall(log_text)
    return BenchmarkResult(
        points=points, kv_cache_tokens=int(kv[-1].replace(",", "")) if kv else None,
        max_concurrency_at_max_len=float(mc[-1][1]) if mc else None, server_start_s=ready_s,
        wall_s=time.perf_counter() - start, server_log=str(log_path), server_command=cmd,
        versions=package_versions(),
    )
