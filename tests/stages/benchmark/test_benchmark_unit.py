"""Benchmark stage pieces that need no model: flags, result parsing, server failure, process cleanup."""

from __future__ import annotations

import json
import logging
import textwrap
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import no_leftover
from suite.stages.benchmark import server as bench_server
from suite.stages.benchmark import stage as benchmark
from suite.records.benchmark import BenchmarkConfig
from suite.records.evaluate import EngineConfig


def test_engine_flags():
    e = EngineConfig(model="m", dtype="bfloat16", max_model_len=2048, kv_cache_dtype="fp8",
                     engine_args={"enforce_eager": True, "enable_prefix_caching": False,
                                  "gpu_memory_utilization": 0.9, "compilation_config": {"mode": 0}})
    flags = bench_server.engine_flags(e)
    assert flags[:6] == ["--dtype", "bfloat16", "--max-model-len", "2048", "--kv-cache-dtype", "fp8"]
    assert "--enforce-eager" in flags and "--no-enable-prefix-caching" in flags
    assert flags[flags.index("--gpu-memory-utilization") + 1] == "0.9"
    assert json.loads(flags[flags.index("--compilation-config") + 1]) == {"mode": 0}


def test_point_from_vllm_json(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"completed": 20, "failed": 0, "duration": 3.5, "output_throughput": 180.7,
                                "request_throughput": 5.6, "p50_ttft_ms": 1060.9, "p99_ttft_ms": 1240.1,
                                "p50_tpot_ms": 77.8, "p99_tpot_ms": 98.3}))
    p = benchmark.point_from_json("rate-inf", "inf", None, path)
    assert p.ok and p.output_tok_s == 180.7 and p.ttft_p99_ms == 1240.1 and p.tpot_p99_ms == 98.3
    path.write_text(json.dumps({"completed": 18, "failed": 2, "output_throughput": 1.0}))
    assert not benchmark.point_from_json("x", 1, None, path).ok


def test_kv_capacity_from_log():
    line = "(EngineCore pid=1) INFO [kv_cache_utils.py:2327] CPU KV cache size: 93,184 tokens, " \
           "Maximum concurrency for 2,048 tokens per request: 45.50x"
    assert bench_server.KV_TOKENS_RE.findall(line) == ["93,184"]
    assert bench_server.MAX_CONC_RE.findall(line) == [("2,048", "45.50")]


def test_stop_process_group_kills_children():
    from suite.runtime import procs

    code = ("import subprocess, time; subprocess.Popen(['sleep', '300']); "
            "subprocess.Popen(['sleep', '301'], process_group=0); time.sleep(300)")  # one in a group of its own
    proc = procs.spawn([sys.executable, "-c", code])
    deadline = time.monotonic() + 30  # both children running (a fixed sleep could stop a child mid-spawn)
    while time.monotonic() < deadline and len([ln for ln in no_leftover("sleep 30") if "sleep 30" in ln]) < 2:
        time.sleep(0.05)
    benchmark.stop_process_group(proc, grace_s=2)
    time.sleep(0.2)
    assert not [ln for ln in no_leftover("sleep 30") if "sleep 300" in ln or "sleep 301" in ln]


def test_stop_names_what_outlived_sigterm():
    """A server's stop says which process made it wait the whole grace (one that ignores SIGTERM, as
    multiprocessing's resource tracker does), and says nothing when everything ended on SIGTERM."""
    from suite.runtime import procs

    import tempfile

    ready = Path(tempfile.mkdtemp()) / "ignoring"
    stubborn = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(ready)!r}, 'w').write(str(os.getpid())); time.sleep(300)")
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {stubborn!r}]); time.sleep(300)"
    proc = procs.spawn([sys.executable, "-c", parent])
    deadline = time.monotonic() + 60
    while not (ready.is_file() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = ready.read_text()
    t = time.monotonic()
    outlived = procs.stop(proc, grace_s=1.0)
    assert time.monotonic() - t < 10
    assert len(outlived) == 1 and outlived[0].split()[0] == pid  # the child that ignored SIGTERM, by its pid
    polite = procs.spawn([sys.executable, "-c", "import time; time.sleep(300)"])
    time.sleep(0.5)
    assert procs.stop(polite, grace_s=5.0) == []


def test_stop_does_not_wait_the_grace_for_an_ended_orphan_under_a_subreaper():
    """Under the stage's supervisor (a child subreaper that reaps when its command ends) the server's processes
    that end on SIGTERM become zombies of the supervisor, not of the stage: the stop must count them as ended.
    It waited the whole grace for them on the H200 (10.0 s every stop, "though every process ended on SIGTERM")."""
    stage = textwrap.dedent("""
        import sys, time
        from suite.runtime import procs
        child = "import time; time.sleep(300)"          # ends on SIGTERM, as vLLM's engine core does
        parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(300)"
        proc = procs.spawn([sys.executable, "-c", parent])
        time.sleep(1.5)
        t = time.monotonic()
        outlived = procs.stop(proc, grace_s=8.0)
        print(round(time.monotonic() - t, 2), outlived)
    """)
    # the supervisor: a child subreaper that waits for its command alone (orphans stay zombies until it ends)
    script = textwrap.dedent(f"""
        import subprocess, sys
        from suite.runtime import procs
        procs._prctl(procs.PR_SET_CHILD_SUBREAPER, 1)
        done = subprocess.run([sys.executable, "-c", {stage!r}], capture_output=True, text=True)
        print(done.stdout, end=""); print(done.stderr, end="", file=sys.stderr); sys.exit(done.returncode)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.returncode == 0, out.stderr
    elapsed, outlived = out.stdout.split(" ", 1)
    assert outlived.strip() == "[]" and float(elapsed) < 4.0, out.stdout


def test_a_process_whose_main_thread_ended_while_a_thread_runs_is_alive_not_an_ended_zombie():
    """Its leader reads ``Z``, but the process runs (and may hold GPU memory): ``stop`` must not count it as ended."""
    import psutil

    from suite.runtime import procs

    code = ("import ctypes, threading, time\n"
            "threading.Thread(target=lambda: time.sleep(300), daemon=True).start()\n"
            "ctypes.CDLL(None).pthread_exit(None)\n")  # the main thread exits, the other runs on
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        p = psutil.Process(proc.pid)
        deadline = time.monotonic() + 20
        while p.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.status() == psutil.STATUS_ZOMBIE  # the leader is a zombie ...
        assert procs._alive(p) and procs.alive(proc.pid)  # ... but the process has not ended
        assert procs.stop(proc, grace_s=3.0) == [] and proc.poll() is not None  # SIGTERM ends it
        assert not procs.alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_median_of_an_even_count_is_the_mean_of_the_middle_two_and_every_repetition_is_listed():
    from suite.records.benchmark import LoadPoint, ServerStats

    def rep(tok_s, ttft, i):
        return LoadPoint(label="rate-100", output_tok_s=tok_s, ttft_p99_ms=ttft, req_s=tok_s / 256, completed=1500,
                         result_file=f"bench-rate-100-r{i}.json"), ServerStats(samples=10 + i)

    p = benchmark.combine_repetitions([rep(13377.0, 900.0, 0), rep(13294.0, 1000.0, 1)])  # the README's FP8 static
    assert p.output_tok_s == 13335.5 and p.ttft_p99_ms == 950.0
    assert (p.output_tok_s_min, p.output_tok_s_max) == (13294.0, 13377.0)
    assert [r["output_tok_s"] for r in p.repetitions] == [13377.0, 13294.0]
    assert [r["result_file"] for r in p.repetitions] == ["bench-rate-100-r0.json", "bench-rate-100-r1.json"]
    four = benchmark.combine_repetitions([rep(v, v, i) for i, v in enumerate([1.0, 4.0, 2.0, 3.0])])
    assert four.output_tok_s == 2.5


def test_kv_usage_is_the_max_over_engines_not_the_sum():
    from suite.stages.benchmark import bottleneck

    text = ('# TYPE vllm:kv_cache_usage_perc gauge\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6\n'
            '# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 7\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 5\n'
            '# TYPE vllm:num_preemptions counter\n'
            'vllm:num_preemptions_total{engine="0",model_name="m"} 2\n'
            'vllm:num_preemptions_total{engine="1",model_name="m"} 1\n')
    m = bottleneck.parse_prometheus(text)
    assert m["vllm:kv_cache_usage_perc"] == 0.6  # two engines at 60%: 60% full, not 120%
    assert m["vllm:num_requests_running"] == 12 and m["vllm:num_preemptions_total"] == 3


def test_a_foreign_server_on_the_port_is_not_taken_for_ours(tmp_path, monkeypatch):
    """Another HTTP server holds the port and answers /health (and /v1/models): the stage must not load
    it. Our 'server' here is a process that tries to bind the port as vllm serve does first thing."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Foreign(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"data": [{"id": "m"}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    foreign = HTTPServer(("127.0.0.1", 0), Foreign)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    port = foreign.server_address[1]
    bind = ("import socket, sys, time; s = socket.socket(); "
            "s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1]))); time.sleep(60)")
    monkeypatch.setattr(bench_server, "VLLM_CLI", [sys.executable, "-c", bind])
    monkeypatch.setattr(bench_server, "free_port", lambda: port)  # the port was taken after we chose it
    cfg = BenchmarkConfig(engine=EngineConfig(model="m"), input_len=8, output_len=8, num_prompts=1,
                          request_rates=[1], server_timeout_s=30, output_dir=str(tmp_path))
    start = time.monotonic()
    with pytest.raises(benchmark.ServerError) as e:
        benchmark.run(cfg)
    msg = str(e.value)
    assert f"port {port} is held by another process (pid " in msg and "not by our vllm serve" in msg
    assert "Address already in use" in msg  # our server's own error line
    assert time.monotonic() - start < 20 and not list(tmp_path.glob("bench-*"))  # no load was sent
    foreign.shutdown()


def test_a_server_that_refuses_our_key_is_not_ours(tmp_path, monkeypatch):
    """A server on our port that answers /health but not /v1/models with this run's key."""
    serve = ("import http.server, sys\n"
             "class H(http.server.BaseHTTPRequestHandler):\n"
             "    def do_GET(self):\n"
             "        self.send_response(200 if self.path == '/health' else 401); self.end_headers()\n"
             "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
             "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n")
    monkeypatch.setattr(bench_server, "VLLM_CLI", [sys.executable, "-c", serve])
    cfg = BenchmarkConfig(engine=EngineConfig(model="m"), input_len=8, output_len=8, num_prompts=1,
                          request_rates=[1], server_timeout_s=30, output_dir=str(tmp_path))
    with pytest.raises(benchmark.ServerError, match="refused this run's API key on /v1/models"):
        benchmark.run(cfg)
    assert not no_leftover("class H(http.server")


def test_a_server_that_outlives_sigterm_or_stops_slowly_is_a_warning_in_the_stage_log(tmp_path, monkeypatch, caplog):
    """The server's stop is said in the stage log: processes killed after the grace, or a slow stop."""
    ignores_term = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    slow_exit = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.4), sys.exit(0))); "
                 "print('up', flush=True); time.sleep(60)")
    monkeypatch.setattr(bench_server, "wait_healthy", lambda *a, **k: 0.0)  # no HTTP here: the stop is the point
    monkeypatch.setattr(bench_server, "STOP_GRACE_S", 1.5)
    monkeypatch.setattr(bench_server, "SLOW_STOP_S", 0.2)
    caplog.set_level(logging.WARNING, logger="suite.stages.benchmark.server")
    said = []
    for script in (ignores_term, slow_exit):
        monkeypatch.setattr(bench_server, "VLLM_CLI", [sys.executable, "-c", script])
        caplog.clear()
        with bench_server.vllm_server(EngineConfig(model="m"), 1, 0, tmp_path / "server.log", 30) as (proc, *_):
            deadline = time.monotonic() + 30
            while "up" not in (tmp_path / "server.log").read_text() and time.monotonic() < deadline:
                time.sleep(0.05)  # its signal handler is set before it prints
        said.append([r.getMessage() for r in caplog.records])
        assert proc.poll() is not None and (tmp_path / "server.log").read_text().startswith("up")
    assert len(said[0]) == 1 and said[0][0].startswith("benchmark: 1 server process(es) outlived SIGTERM by 1.5 s "
                                                       "and were killed"), said
    assert len(said[1]) == 1 and said[1][0].startswith("benchmark: the server took ") and said[1][0].endswith(
        " s to stop, though every process ended on SIGTERM"), said


def test_server_that_exits_is_reported_with_its_log(tmp_path, monkeypatch):
    """A server that dies at start fails fast with its log, and leaves nothing running."""
    monkeypatch.setattr(bench_server, "VLLM_CLI", [sys.executable, "-c",
                                                "import sys; print('boom: out of memory'); sys.exit(3)"])
    cfg = BenchmarkConfig(engine=EngineConfig(model="m"), input_len=8, output_len=8, num_prompts=1,
                          request_rates=[1], server_timeout_s=30, output_dir=str(tmp_path))
    start = time.monotonic()
    with pytest.raises(benchmark.ServerError, match="boom: out of memory"):
        benchmark.run(cfg)
    assert time.monotonic() - start < 20


def test_runner_reports_the_exception_not_the_shutdown_noise(tmp_path):
    from suite.orchestrate.stageproc import failure_line

    log = tmp_path / "evaluate.log"
    log.write_text("Traceback (most recent call last):\n  File \"x\", line 1\n"
                   "FileNotFoundError: [Errno 2] No such file or directory\n"
                   "(EngineCore pid=1) INFO [core.py:1313] [shutdown] EngineCore: exiting busy loop\n"
                   "INFO 11-30 07:54:28 [core_client.py:662] [shutdown] MPClient: complete\n")
    assert failure_line(log) == "FileNotFoundError: [Errno 2] No such file or directory"
    log.write_text("just a last line\n")
    assert failure_line(log) == "just a last line"


# -- KV capacity from /metrics (vllm:cache_config_info), readiness polling (tenacity), the GPU name (NVML)

VLLM_CPU_METRICS = Path(__file__).parent / "data" / "vllm-cpu-0.32-metrics.txt"  # a real /metrics page
VLLM_CPU_KV_LINE = ("(EngineCore pid=27494) INFO 12-01 13:01:49 [kv_cache_utils.py:2327] CPU KV cache size: "
                    "46,592 tokens, Maximum concurrency for 1,024 tokens per request: 45.50x")


def test_kv_capacity_comes_from_vllms_cache_config_gauge(caplog):
    """The /metrics page vllm-cpu 0.32 served for the demo model (max_model_len 1024, 1 GiB KV space), and
    the log line that server printed: the gauge's labels carry the same figures."""
    text = VLLM_CPU_METRICS.read_text()
    assert bench_server.kv_capacity_from_metrics(text) == (46592, 45.5)
    with caplog.at_level(logging.INFO, logger="suite.stages.benchmark.server"):
        assert bench_server.kv_capacity(text, VLLM_CPU_KV_LINE) == (46592, 45.5, "vllm:cache_config_info")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "benchmark: KV capacity from vllm:cache_config_info: 46592 tokens; the log line agrees")]
    from prometheus_client.parser import text_string_to_metric_families

    (info,) = [f for f in text_string_to_metric_families(text) if f.name == "vllm:cache_config_info"]
    labels = info.samples[0].labels  # on the CPU build the blocks are counted as num_gpu_blocks too
    assert labels["num_cpu_blocks"] == "None" and int(labels["num_gpu_blocks"]) * int(labels["block_size"]) == 46592
    # the bottleneck monitor's parser reads the same page
    assert bottleneck_names(text) >= {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}


def bottleneck_names(text: str) -> set[str]:
    from suite.stages.benchmark import bottleneck

    return set(bottleneck.parse_prometheus(text))


def test_kv_capacity_gauge_wins_over_the_log_and_the_log_is_the_fallback(caplog):
    caplog.set_level(logging.INFO, logger="suite.stages.benchmark.server")
    text = VLLM_CPU_METRICS.read_text()
    other = VLLM_CPU_KV_LINE.replace("46,592", "50,000").replace("45.50x", "48.83x")
    assert bench_server.kv_capacity(text, other)[:2] == (46592, 45.5)
    (disagrees,) = caplog.records  # a disagreement is a warning in the stage log
    assert disagrees.levelno == logging.WARNING and disagrees.getMessage().endswith(
        "46592 tokens; the log line says 50000 tokens (not used)")
    # two data-parallel engines: the figure is per engine (the smaller), as vLLM logs it
    two = ('# TYPE vllm:cache_config_info gauge\n'
           'vllm:cache_config_info{block_size="16",engine="0",kv_cache_max_concurrency="8.0",kv_cache_size_tokens="8192",num_gpu_blocks="1024"} 1.0\n'
           'vllm:cache_config_info{block_size="16",engine="1",kv_cache_max_concurrency="7.5",kv_cache_size_tokens="7680",num_gpu_blocks="1024"} 1.0\n')
    assert bench_server.kv_capacity_from_metrics(two) == (7680, 7.5)
    # a vLLM whose gauge has no kv_cache_size_tokens, no /metrics page at all, or not Prometheus text: the log line
    old = two.replace('kv_cache_size_tokens="8192",', "").replace('kv_cache_size_tokens="7680",', "")
    for page in (old, None, "", "this is { not prometheus"):
        caplog.clear()
        assert bench_server.kv_capacity(page, VLLM_CPU_KV_LINE)[:2] == (46592, 45.5), page
        assert [r.getMessage() for r in caplog.records] == [
            "benchmark: KV capacity from the server log (no kv_cache_size_tokens in vllm:cache_config_info): "
            "46592 tokens"], page
    assert bench_server.kv_capacity(None, "no such line") == (None, None, "none")


# a stand-in for vllm serve: 503 until READY s, then /health and /v1/models answer; dies at DIE s (0: never)
READY_AFTER = ("import http.server, os, sys, threading, time\n"
               "t0 = time.time(); ready_s = float(sys.argv[2]); die_s = float(sys.argv[3])\n"
               "def die():\n"
               "    print('RuntimeError: engine core died', flush=True); os._exit(7)\n"
               "if die_s: threading.Timer(die_s, die).start()\n"
               "class H(http.server.BaseHTTPRequestHandler):\n"
               "    def do_GET(self):\n"
               "        ok = time.time() - t0 > ready_s\n"
               "        body = b'{\"data\": [{\"id\": \"m\"}]}' if ok and self.path == '/v1/models' else b''\n"
               "        self.send_response(200 if ok else 503); self.send_header('Content-Length', str(len(body)))\n"
               "        self.end_headers(); self.wfile.write(body)\n"
               "    def log_message(self, *a): pass\n"
               "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")


def test_readiness_polls_until_the_server_answers(tmp_path):
    from suite.runtime import procs

    port = bench_server.free_port()
    proc = procs.spawn([sys.executable, "-c", READY_AFTER, str(port), "2.5", "0"],
                       stdout=open(tmp_path / "server.log", "w"))
    try:
        ready_s = bench_server.wait_healthy(proc, port, 30, tmp_path / "server.log", "key", "m", interval_s=0.5)
    finally:
        procs.stop(proc, grace_s=1)
    assert 2.5 <= ready_s < 10


def test_readiness_gives_up_after_its_budget_with_the_servers_last_line(tmp_path):
    from suite.runtime import procs

    port = bench_server.free_port()
    proc = procs.spawn([sys.executable, "-c", READY_AFTER, str(port), "999", "0"],
                       stdout=open(tmp_path / "server.log", "w"))
    start = time.monotonic()
    try:
        with pytest.raises(benchmark.ServerError, match="vllm serve was not ready after 3 s"):
            bench_server.wait_healthy(proc, port, 3, tmp_path / "server.log", "key", "m", interval_s=0.5)
    finally:
        procs.stop(proc, grace_s=1)
    assert 3 <= time.monotonic() - start < 15  # the budget, not the 60 s a stage may give a server


def test_a_server_dying_while_not_ready_fails_at_once_not_after_the_budget(tmp_path):
    """Not ready (503) for 2 s, then dead: the stage says so at once, not after its 20-s pause between polls."""
    from suite.runtime import procs

    port = bench_server.free_port()
    proc = procs.spawn([sys.executable, "-c", READY_AFTER, str(port), "999", "2"],
                       stdout=open(tmp_path / "server.log", "w"))
    start = time.monotonic()
    try:
        with pytest.raises(benchmark.ServerError) as e:
            bench_server.wait_healthy(proc, port, 60, tmp_path / "server.log", "key", "m", interval_s=20.0)
    finally:
        procs.stop(proc, grace_s=1)
    # a 20 s pause between polls, but the pause is a wait on the process: its death (~2 s) ends it
    assert time.monotonic() - start < 12, time.monotonic() - start
    assert "before it was ready" in str(e.value) and "RuntimeError: engine core died" in str(e.value)


def test_gpu_name_from_nvml_and_none_without_a_driver(monkeypatch, caplog):
    import types

    from suite.stages.benchmark import roofline

    class NVMLError(Exception):
        pass

    fake = types.SimpleNamespace(NVMLError=NVMLError, calls=[])
    fake.nvmlInit = lambda: fake.calls.append("init")
    fake.nvmlShutdown = lambda: fake.calls.append("shutdown")
    fake.nvmlDeviceGetCount = lambda: 1
    fake.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA H200" if h == ("handle", 0) else b"?"  # older bindings: bytes
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert roofline.detect_gpu() == "NVIDIA H200" and fake.calls == ["init", "shutdown"]
    assert roofline.gpu_peak(roofline.detect_gpu())[0] == "H200"

    def no_driver():
        raise NVMLError("NVML Shared Library Not Found")

    fake.nvmlInit = no_driver
    assert roofline.detect_gpu() is None
    fake.nvmlInit, fake.nvmlDeviceGetCount = (lambda: None), (lambda: 0)
    assert roofline.detect_gpu() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: said in the stage log
    with caplog.at_level(logging.WARNING, logger="suite.stages.benchmark.roofline"):
        assert roofline.detect_gpu() is None
    assert [r.getMessage() for r in caplog.records] == [
        "roofline: nvidia-ml-py is not installed: no GPU name (set throughput.gpu)"]


def test_gpu_name_on_this_machine_is_nvmls_or_none():
    """The real nvidia-ml-py: on a machine with no NVIDIA driver NVML raises, and the name is None."""
    import pynvml

    from suite.stages.benchmark import roofline

    try:
        pynvml.nvmlInit()
        expected = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        expected = None
    assert roofline.detect_gpu() == expected
