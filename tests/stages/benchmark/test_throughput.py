"""Throughput analysis without a model: /metrics parsing, the bottleneck labels, the SLO search, the
roofline arithmetic, repetitions, and the monitor watching real processes (a fake /metrics server and a
deliberately CPU-bound client)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import psutil
import pytest

from suite.stages.benchmark import bottleneck, labels
from suite.stages.benchmark import roofline
from suite.stages.benchmark import slo
from suite.stages.benchmark.stage import combine_repetitions
from suite.records.benchmark import LoadPoint, ServerStats, BenchmarkResult
from suite.records.benchmark import SloSpec

METRICS_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 12.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
"""


def test_parse_prometheus_sums_label_sets():
    m = bottleneck.parse_prometheus(METRICS_TEXT)
    assert m["vllm:num_requests_running"] == 16.0 and m["vllm:kv_cache_usage_perc"] == 0.25
    assert m["vllm:num_preemptions_total"] == 3.0 and "# HELP" not in "".join(m)


def point(**kw) -> LoadPoint:
    base = dict(label="p", request_rate="inf", ok=True, completed=100, output_tok_s=1000.0, req_s=10.0)
    return LoadPoint(**(base | kw))


@pytest.mark.parametrize("stats,pt,label", [
    (dict(preemptions=5, kv_usage_max=0.5, waiting_mean=3), {}, "kv-cache"),
    (dict(kv_usage_max=0.99), {}, "kv-cache"),
    (dict(waiting_mean=20, running_mean=250, client_cpu_pct=100), {}, "engine"),
    (dict(waiting_mean=0, running_mean=40, client_cpu_pct=99, api_server_cpu_pct=99), {}, "client"),
    (dict(waiting_mean=0, running_mean=40, client_cpu_pct=30, api_server_cpu_pct=98), {}, "frontend"),
    (dict(waiting_mean=0, running_mean=3, client_cpu_pct=5, api_server_cpu_pct=10), {"request_rate": 2.0}, "offered-load"),
    (dict(waiting_mean=0, running_max=100, engine_core_cpu_pct=180), {}, "engine"),
    (dict(waiting_mean=0, running_max=100, engine_core_cpu_pct=20), {}, "unsaturated"),
])
def test_classify(stats, pt, label):
    got, reason = labels.classify(point(**pt), ServerStats(samples=10, **stats))
    assert got == label and reason


def test_classify_running_at_max_num_seqs_is_engine_bound():
    stats = ServerStats(samples=5, waiting_mean=0, running_max=256, running_mean=250)
    assert labels.classify(point(), stats, max_num_seqs=256)[0] == "engine"
    assert labels.classify(point(), ServerStats(samples=0))[0] == "unknown"


def test_classify_queue_at_the_sequence_cap_is_seq_cap():
    # the H200 run of recipes/llama3-8b-shape-kv.yaml: 1,024 running (vLLM's default max_num_seqs there),
    # hundreds waiting, the FP8 KV cache 42% full. Explicit cap, then the cap inferred from the samples.
    stats = ServerStats(samples=5, waiting_mean=192, waiting_max=476, running_max=1024, kv_usage_max=0.42)
    label, reason = labels.classify(point(), stats, max_num_seqs=1024)
    assert label == "seq-cap" and "max_num_seqs=1024 (engine_args)" in reason and "42%" in reason
    plateau = [{"running": r, "waiting": w, "kv_usage": 0.4} for r, w in
               [(300, 0), (900, 40), (1024, 300), (1024, 476), (1024, 200), (1000, 3), (600, 0)]]
    label, reason = labels.classify(point(), bottleneck.summarize(plateau))
    assert label == "seq-cap" and "max_num_seqs=1024 (not set by the recipe" in reason
    # a queue while the running count still moves (prefill budget, compute): the engine, no cap claimed
    moving = [{"running": r, "waiting": w, "kv_usage": 0.4} for r, w in [(300, 5), (500, 9), (700, 4), (710, 2)]]
    stats = bottleneck.summarize(moving)
    assert stats.queued_at_peak_frac == 0.25 and labels.classify(point(), stats)[0] == "engine"
    # what the H200 measured at the default cap: 1,024 reached, but in only 29% of the samples with a queue.
    # Raising the cap to 2,048 there added 1.2% tok/s (the queue stayed, at the prefill budget): engine.
    h200 = ServerStats(samples=132, waiting_mean=196, waiting_max=476, running_max=1024, running_mean=712,
                       queued_at_peak_frac=0.288, kv_usage_max=0.419)
    assert labels.classify(point(request_rate=100.0), h200)[0] == "engine"
    # a cap reached with the KV cache full is KV-bound
    full = ServerStats(samples=5, waiting_max=50, running_max=1024, kv_usage_max=0.97)
    assert labels.classify(point(), full, max_num_seqs=1024)[0] == "kv-cache"


def test_summarize_uses_active_samples():
    samples = [{"running": 0, "waiting": 0, "cpu": {"api_server": 1.0}},
               {"running": 8, "waiting": 2, "kv_usage": 0.4, "preemptions": 1, "cpu": {"api_server": 95.0, "client": 50}},
               {"running": 6, "waiting": 0, "kv_usage": 0.5, "preemptions": 4, "cpu": {"api_server": 97.0, "client": 70}},
               {"scrape_failed": True, "cpu": {}}]
    s = bottleneck.summarize(samples)
    assert (s.samples, s.scrape_failures, s.running_mean, s.waiting_max, s.kv_usage_max) == (4, 1, 7.0, 2, 0.5)
    assert s.preemptions == 3 and s.api_server_cpu_pct == 96.0 and s.client_cpu_pct == 60


def fake_probe(capacity: float):
    """A server whose p99 TTFT explodes above `capacity` req/s."""
    calls = []

    def probe(rate: float, num_prompts: int) -> LoadPoint:
        calls.append(rate)
        ttft = 50.0 if rate <= capacity else 5000.0
        return point(request_rate=rate, req_s=min(rate, capacity), ttft_p99_ms=ttft, tpot_p99_ms=20.0,
                     output_tok_s=100 * min(rate, capacity))
    return probe, calls


def test_slo_search_brackets_then_bisects():
    probe, calls = fake_probe(13.0)
    spec = SloSpec(ttft_p99_ms=200, tpot_p99_ms=50, start_rate=4, max_probes=10, tolerance=0.05)
    r = slo.search(probe, spec, 300)
    assert calls[:3] == [4, 8, 16]  # doubling until the SLO breaks
    assert r.sustainable_rate <= 13.0 < r.bracket_high and (r.bracket_high - r.sustainable_rate) / r.bracket_high <= 0.05
    assert r.output_tok_s == 100 * r.sustainable_rate and len(r.probes) == len(calls) <= 10
    assert [p["meets"] for p in r.probes] == [c <= 13 for c in calls]


def test_slo_search_falls_and_reports_when_nothing_meets():
    probe, calls = fake_probe(0.0)
    r = slo.search(probe, SloSpec(ttft_p99_ms=200, start_rate=4, min_rate=0.5, max_probes=10), 300)
    assert calls == [4, 2, 1, 0.5] and r.sustainable_rate is None and r.note == "no probed rate met the SLO"
    probe, calls = fake_probe(1000.0)
    r = slo.search(probe, SloSpec(ttft_p99_ms=200, start_rate=64, max_rate=256, max_probes=10), 300)
    assert calls == [64, 128, 256] and r.sustainable_rate == 256 and r.note == "the SLO held up to max_rate"


def test_slo_search_says_when_the_probes_ran_out():
    # the H200 run: 2 probes, 32 and 64 both met, max_rate 128 never tried
    probe, calls = fake_probe(1000.0)
    r = slo.search(probe, SloSpec(ttft_p99_ms=200, start_rate=32, max_rate=128, max_probes=2), 300)
    assert calls == [32, 64] and r.sustainable_rate == 64
    assert r.note == "the SLO held at every probed rate; max_probes (2) ran out: at least 64 req/s"
    probe, calls = fake_probe(0.0)
    r = slo.search(probe, SloSpec(ttft_p99_ms=200, start_rate=32, min_rate=1, max_probes=2), 300)
    assert calls == [32, 16] and r.note == "no probed rate met the SLO; max_probes (2) ran out above min_rate"


def test_slo_failed_point_and_tpot_limit():
    assert not slo.meets(point(ok=False, error="3 requests failed"), SloSpec(ttft_p99_ms=1))[0]
    ok, why = slo.meets(point(ttft_p99_ms=10, tpot_p99_ms=80), SloSpec(ttft_p99_ms=100, tpot_p99_ms=50))
    assert not ok and "TPOT" in why


LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
             "tie_word_embeddings": False}


def test_roofline_llama3_8b_shape(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    cost = roofline.ModelCost.from_folder(str(tmp_path))
    # 8.03 B parameters of which 0.525 B input embedding: 7.50 B in linear layers (lm_head included)
    assert cost.linear_params == pytest.approx(7.505e9, rel=1e-3)
    assert cost.weight_bytes == pytest.approx(2 * 7.505e9, rel=1e-3) and not cost.fp8_weights
    assert cost.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB per token in BF16
    assert roofline.ModelCost.from_folder(str(tmp_path), "fp8").kv_bytes_per_token == 65536
    name, peak = roofline.gpu_peak("NVIDIA H200")
    assert name == "H200" and peak == (4.8, 989.0, 1979.0) and roofline.gpu_peak("NVIDIA H100 PCIe")[0] == "H100 PCIe"
    # 10,000 output tok/s with 200 requests running: 50 steps/s, each reading 15 GB of weights
    r = roofline.implied(cost, peak, output_tok_s=10_000, input_tok_s=20_000, running_mean=200, mean_context=640)
    assert r["decode_steps_s"] == 50
    assert r["hbm_tb_s"] == pytest.approx((50 * cost.weight_bytes + 10_000 * 640 * 131072) / 1e12, rel=1e-9)
    assert r["hbm_tb_s"] == pytest.approx(1.589, abs=1e-3)
    assert r["hbm_frac"] == pytest.approx(r["hbm_tb_s"] / 4.8)
    assert r["tensor_frac"] == pytest.approx(2 * 7.505e9 * 30_000 / 1e12 / 989, rel=1e-3)


def test_roofline_reads_safetensors_headers(tmp_path):
    import torch
    from safetensors.torch import save_file

    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B | {"quantization_config": {
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}}))
    save_file({"model.embed_tokens.weight": torch.zeros(100, 8, dtype=torch.bfloat16),
               "model.layers.0.mlp.up_proj.weight": torch.zeros(64, 8, dtype=torch.float8_e4m3fn),
               "lm_head.weight": torch.zeros(100, 8, dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    cost = roofline.ModelCost.from_folder(str(tmp_path))
    assert cost.weight_bytes == 64 * 8 + 100 * 8 * 2 and cost.fp8_weights  # the embedding is not read per step


def test_repetitions_median_and_spread():
    reps = [(point(output_tok_s=v, ttft_p99_ms=v / 10, result_file=f"r{i}"), ServerStats(samples=i))
            for i, v in enumerate([900.0, 1100.0, 1000.0])]
    p = combine_repetitions(reps)
    assert p.output_tok_s == 1000.0 and p.ttft_p99_ms == 100.0 and p.server.samples == 2
    assert (p.output_tok_s_min, p.output_tok_s_max) == (900.0, 1100.0)
    assert [r["output_tok_s"] for r in p.repetitions] == [900.0, 1100.0, 1000.0]


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("vllm:num_requests_running 3\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.1\n"
                "vllm:num_preemptions_total 0\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_monitor_flags_a_throttled_client(monkeypatch):
    """A real monitor: /metrics from a live HTTP server that reports an engine with no queue, a 'server'
    process that idles, and a client process that uses a whole core. The point must be labelled
    client-bound. The client's busy share is given (psutil's cpu_percent answers 100% for it, 1% for the rest):
    the test checks what the monitor makes of a busy client, not how much of a core a loaded host lends one."""
    httpd = HTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(psutil.Process, "cpu_percent", lambda self, interval=None: 100.0 if self.pid == client.pid
                        else 1.0)
    try:
        mon = bottleneck.ServerMonitor(httpd.server_address[1], server.pid, interval_s=0.3).start(client.pid)
        time.sleep(3)
        stats = mon.stop()
    finally:
        for p in (server, client):
            p.kill()
            p.wait()
        httpd.shutdown()
    assert stats.samples >= 5 and stats.scrape_failures == 0 and stats.running_mean == 3
    assert stats.client_cpu_pct > 80 and (stats.api_server_cpu_pct or 0) < 20
    label, reason = labels.classify(point(), stats)
    assert label == "client", reason
    # where the processes ran: the client's and the server's logical CPU (psutil's cpu_num, Linux), each with its
    # physical core from sysfs ("package:siblings", the CPU among the siblings) where sysfs has the topology
    if hasattr(psutil.Process, "cpu_num"):
        on = mon.samples[-1]["on_cpu"]
        for role in ("client", "api_server"):
            cpu, core = on[role]
            assert 0 <= cpu < os.cpu_count()
            siblings = set()
            for part in (core or ":").split(":")[1].split(","):
                lo, _, hi = part.partition("-")
                siblings |= set(range(int(lo), int(hi or lo) + 1)) if lo else set()
            assert core is None or cpu in siblings, (cpu, core)


def test_every_busy_api_server_is_placed_not_only_the_busiest(monkeypatch):
    """A 'server' with two API-server children (the APIServer marker in their command lines): both are placed in
    ``on_cpu["api_servers"]`` when both are busy (the engine core may share a physical core with either), the idle
    root is not. The processes and their command lines are real; their busy share is given (psutil's cpu_percent
    answers 80% for the two children, 1% for the root), so the test checks the placement, not how busy this host lets two
    spinning children be."""
    import psutil

    if not hasattr(psutil.Process, "cpu_num"):
        pytest.skip("psutil has no cpu_num on this platform")
    real_cmdline = psutil.Process.cmdline

    def given_share(self, interval=None):
        try:
            args = real_cmdline(self)
            return 80.0 if args and args[-1].startswith("APIServer_") else 1.0  # a child, not the root's code
        except psutil.Error:
            return 0.0

    monkeypatch.setattr(psutil.Process, "cpu_percent", given_share)
    root = subprocess.Popen([sys.executable, "-c",
                             "import subprocess, sys, time\n"
                             "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', "
                             "'APIServer_%d' % i]) for i in (0, 1)]\n"
                             "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 30  # both children exist (a loaded host can be slow to start them)
        while time.monotonic() < deadline and len(psutil.Process(root.pid).children()) < 2:
            time.sleep(0.05)
        mon = bottleneck.ServerMonitor(1, root.pid, interval_s=0.3)
        mon._cpu_by_role()  # prime: every process is seen once before it is measured
        out, on, busy = mon._cpu_by_role()
    finally:
        for p in psutil.Process(root.pid).children(recursive=True):
            p.kill()
        root.kill()
        root.wait()
    assert bottleneck.BUSY_API_SERVER < 80.0, "the given share must count as busy"
    assert out["api_server"] == 80.0
    assert len(busy) == 2 and all(0 <= c < os.cpu_count() for c in busy)


def test_task_prompts_from_the_demo_slice(tmp_path):
    from conftest import ROOT
    from suite.stages.benchmark.workload import task_prompts, write_dataset

    prompts = task_prompts(ROOT / "tasks" / "data", seed=1)
    gsm = [p for p in prompts if p.startswith("Question: ") and p.endswith("\nAnswer:")]
    code = [p for p in prompts if p.lstrip().startswith(("def ", "from ", "import "))]
    cn = [p for p in prompts if p.endswith("答案：")]
    mmlu = [p for p in prompts if p.endswith("\nD. " + p.split("\nD. ")[-1]) and p.endswith("Answer:")
            and not p.startswith("Question: ")]
    assert len(gsm) == 40 and len(code) == 40 and len(cn) == 52 * 4 and len(mmlu) == 57 * 4
    assert prompts == task_prompts(ROOT / "tasks" / "data", seed=1) != task_prompts(ROOT / "tasks" / "data", seed=2)
    path = write_dataset(prompts[:3], 5, tmp_path / "p.jsonl", "r7")
    rows = [json.loads(line)["prompt"] for line in path.read_text().splitlines()]
    assert len(rows) == 5 and rows[0].startswith("[r7-0] ") and rows[3].endswith(prompts[0])  # cycled
    with pytest.raises(FileNotFoundError):
        task_prompts(tmp_path)


def test_api_servers_double_only_when_frontend_bound():
    from suite.stages.benchmark.stage import next_api_server_count

    fe, eng = point(bottleneck="frontend"), point(bottleneck="engine")
    assert next_api_server_count([eng, fe], 1, 4) == 2
    assert next_api_server_count([fe], 2, 4) == 4 and next_api_server_count([fe], 3, 4) == 4
    assert next_api_server_count([fe], 4, 4) is None      # at the limit: report it, bound as it is
    assert next_api_server_count([eng], 1, 4) is None     # not frontend-bound: nothing to gain
    assert next_api_server_count([fe], 1, None) is None   # the recipe does not allow scaling


def bursty_server(capacity: float, life_s: float = 4.0):
    """The H200 study's server (Qwen 0.5B, issue 16): every request lives ~4 s. A probe whose arrivals are shorter
    than a few lifetimes runs all at once and its p99 TTFT is one burst's noise around the limit (here: 273 ms at
    64 req/s, 156 ms at 256); a probe long enough to settle shows the real capacity."""
    calls = []

    def probe(rate: float, n: int) -> LoadPoint:
        calls.append((rate, n))
        life = life_s
        if n / rate < 3 * life_s:  # a burst
            ttft = {64: 273.0, 128: 136.0, 256: 156.0}.get(rate, 180.0)
        else:  # long enough: below capacity it settles; above, the queue (and every lifetime) grows while it lasts
            ttft, life = (120.0, life_s) if rate <= capacity else (9000.0, 5 * life_s)
        return point(request_rate=rate, req_s=min(rate, capacity), ttft_p99_ms=ttft, tpot_p99_ms=20.0,
                     output_tok_s=256 * min(rate, capacity), e2el_p50_ms=1000 * life,
                     max_concurrent_requests=min(n, int(rate * life)))
    return probe, calls


def test_a_burst_probe_is_run_again_long_enough_and_the_rate_comes_from_steady_probes():
    probe, calls = bursty_server(capacity=100.0)
    spec = SloSpec(ttft_p99_ms=200, tpot_p99_ms=50, start_rate=64, max_rate=256, max_probes=3)
    r = slo.search(probe, spec, 300)
    # 300 prompts at 64 req/s arrive in 4.7 s < 3 x 4 s: resized to 64 x 3 x 1.25 x 4 = 960 prompts, then 1,920 at 128
    assert calls[:4] == [(64, 300), (64, 960), (128, 300), (128, 1920)]
    assert r.sustainable_rate == 96 and r.bracket_high == 128 and r.steady is True
    superseded = [p for p in r.probes if p.get("superseded")]
    assert [p["rate"] for p in superseded] == [64, 128, 96] and all(p["steady"] is False for p in superseded)
    assert "a burst, not a sustained rate: 300 arrivals over 4.7 s" in superseded[0]["steady_why"]
    # 128 req/s is above capacity: its 1,920-prompt probe's requests lived 20 s (a growing queue), and it failed
    (over,) = [p for p in r.probes if p["rate"] == 128 and not p.get("superseded")]
    assert over["steady"] is True and over["steady_why"].startswith("overloaded") and not over["meets"]
    assert len([p for p in r.probes if not p.get("superseded")]) == 3  # resizing does not use up max_probes
    # the bursts alone would have said 64 fails and 256 holds (what the H200 run reported for two builds)
    assert not slo.meets(probe(64, 300), spec)[0] and slo.meets(probe(256, 300), spec)[0]


def test_a_probe_that_stays_a_burst_under_the_cap_leaves_no_sustainable_rate():
    probe, calls = bursty_server(capacity=1000.0)
    spec = SloSpec(ttft_p99_ms=200, start_rate=64, max_rate=256, max_probes=2, max_num_prompts=600)
    r = slo.search(probe, spec, 300)
    # 64 req/s: 600 prompts (the cap) still arrive in 9.4 s < 12 s, and the burst fails; 32 req/s settles at 480
    assert calls == [(64, 300), (64, 600), (32, 300), (32, 480)]
    assert (r.sustainable_rate, r.bracket_high, r.steady) == (32, 64, False)
    assert "never reached a steady state (at 64 req/s with 600 prompts" in r.note
    assert "(slo.max_num_prompts 600 reached)" in r.note
    # the check off: one probe per rate, as before
    probe, calls = bursty_server(capacity=1000.0)
    r = slo.search(probe, spec.model_copy(update={"steady_windows": 0}), 300)
    assert calls == [(64, 300), (32, 300)] and r.steady is None
    # an unreadable lifetime (older vLLM: no e2e percentiles): not checked, not resized
    assert slo.steadiness(point(e2el_p50_ms=None), 64, 300, spec) == (None, "not checked")


def test_a_lifetime_that_grows_near_capacity_gets_another_resize_and_failed_requests_decide():
    # near capacity each run lives longer than the last (the batch grows): the re-run is sized from the last run's
    # lifetime until the arrivals span 3 of them (a helper's review found one re-run left these a burst)
    calls = []

    def probe(rate: float, n: int) -> LoadPoint:
        calls.append((rate, n))
        life = {300: 4.0, 1440: 5.6}.get(n, 5.8)
        return point(request_rate=rate, req_s=rate, ttft_p99_ms=150.0, tpot_p99_ms=20.0, output_tok_s=256 * rate,
                     e2el_p50_ms=1000 * life, max_concurrent_requests=min(n, int(rate * life)))

    spec = SloSpec(ttft_p99_ms=200, start_rate=96, max_rate=96, max_probes=1)
    r = slo.search(probe, spec, 300)
    assert calls == [(96, 300), (96, 1440), (96, 2016)] and r.steady is True and r.sustainable_rate == 96
    # requests that failed (a timeout, an overloaded server) decide the probe, however long it ran
    def failing(rate: float, n: int) -> LoadPoint:
        return point(request_rate=rate, ok=False, error="12 requests failed", e2el_p50_ms=None)

    r = slo.search(failing, SloSpec(ttft_p99_ms=200, start_rate=64, min_rate=32, max_probes=2), 300)
    assert r.sustainable_rate is None and r.bracket_high == 32 and r.steady is True
    assert r.probes[0]["steady_why"].startswith("requests failed (12 requests failed)")


def test_a_rate_above_the_saturated_capacity_is_decided_without_running():
    # the same server as above, 100 req/s of capacity, whose saturation point completed 70 req/s in its median
    # repetition and 80 in its fastest: 128 and 256 req/s are above 1.5 x 80, so they are overloads by arithmetic
    sat = point(request_rate="inf", req_s=70.0, output_tok_s=17920.0)
    sat = sat.model_copy(update={"output_tok_s_max": 17920.0 * 80 / 70})
    assert slo.capacity([sat, point(request_rate=64, req_s=64.0, output_tok_s=16384.0)]) == pytest.approx(80.0)
    assert slo.capacity([point(request_rate=64, req_s=64.0, output_tok_s=16384.0)]) is None  # offered, not capacity
    probe, calls = bursty_server(capacity=100.0)
    spec = SloSpec(ttft_p99_ms=200, tpot_p99_ms=50, start_rate=64, max_rate=256, max_probes=3)
    r = slo.search(probe, spec, 300, capacity_req_s=slo.capacity([sat]))
    # 64 (resized to 960), 128 not run, then 96 (resized) and 112 (resized): the third and last probe that ran
    assert [c for c in calls if c[0] == 128] == [] and [c[0] for c in calls].count(64) == 2
    (skipped,) = [p for p in r.probes if p.get("not_run")]
    assert skipped["rate"] == 128 and skipped["num_prompts"] == 0 and not skipped["meets"] and skipped["steady"]
    assert "80.0 req/s this server completed at saturation" in skipped["why"]
    assert len({c[0] for c in calls}) == 3 and r.steady is True  # three rates run: not_run rows use no probe
    assert r.sustainable_rate == 96 and r.bracket_high == 112
    # with the steadiness check off (slo.steady_windows 0), the capacity check is off too: every rate runs
    probe, calls = bursty_server(capacity=100.0)
    r0 = slo.search(probe, spec.model_copy(update={"steady_windows": 0, "start_rate": 128}), 300, capacity_req_s=80.0)
    assert calls[0] == (128, 300) and not any(p.get("not_run") for p in r0.probes)
    # the report's chart draws the probes that ran, and leaves out the row decided without a point
    from conftest import make_summary
    from suite.outputs.report import throughput_chart

    s = make_summary({"bf16": {"tput.output_tok_s": 17920.0}, "fp8": {"tput.output_tok_s": 17920.0}})
    s.variants[0].result(BenchmarkResult).slo = r
    svg = throughput_chart(s)
    assert "SLO probe 96" in svg and "SLO probe 112" in svg and "SLO probe 128" not in svg
