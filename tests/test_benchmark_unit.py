"""Benchmark stage pieces that need no model: flags, result parsing, server failure, process cleanup."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import no_leftover
from suite import benchmark
from suite.results import BenchmarkConfig, EngineConfig


def test_engine_flags():
    e = EngineConfig(model="m", dtype="bfloat16", max_model_len=2048, kv_cache_dtype="fp8",
                     engine_args={"enforce_eager": True, "enable_prefix_caching": False,
                                  "gpu_memory_utilization": 0.9, "compilation_config": {"mode": 0}})
    flags = benchmark.engine_flags(e)
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
    assert benchmark.KV_TOKENS_RE.findall(line) == ["93,184"]
    assert benchmark.MAX_CONC_RE.findall(line) == [("2,048", "45.50")]


def test_stop_process_group_kills_children():
    code = ("import subprocess, time; subprocess.Popen(['sleep', '300']); "
            "subprocess.Popen(['sleep', '301']); time.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(1.0)
    benchmark.stop_process_group(proc, grace_s=2)
    time.sleep(0.2)
    assert not [ln for ln in no_leftover("sleep 30") if "sleep 300" in ln or "sleep 301" in ln]


def test_server_that_exits_is_reported_with_its_log(tmp_path, monkeypatch):
    """A server that dies at start fails fast with its log, and leaves nothing running."""
    monkeypatch.setattr(benchmark, "VLLM_CLI", [sys.executable, "-c",
                                                "import sys; print('boom: out of memory'); sys.exit(3)"])
    cfg = BenchmarkConfig(engine=EngineConfig(model="m"), input_len=8, output_len=8, num_prompts=1,
                          request_rates=[1], server_timeout_s=30, output_dir=str(tmp_path))
    start = time.monotonic()
    with pytest.raises(benchmark.ServerError, match="boom: out of memory"):
        benchmark.run(cfg)
    assert time.monotonic() - start < 20


def test_runner_reports_the_exception_not_the_shutdown_noise(tmp_path):
    from suite.runner import failure_line

    log = tmp_path / "evaluate.log"
    log.write_text("Traceback (most recent call last):\n  File \"x\", line 1\n"
                   "FileNotFoundError: [Errno 2] No such file or directory\n"
                   "(EngineCore pid=1) INFO [core.py:1313] [shutdown] EngineCore: exiting busy loop\n"
                   "INFO 11-30 07:54:28 [core_client.py:662] [shutdown] MPClient: complete\n")
    assert failure_line(log) == "FileNotFoundError: [Errno 2] No such file or directory"
    log.write_text("just a last line\n")
    assert failure_line(log) == "just a last line"
