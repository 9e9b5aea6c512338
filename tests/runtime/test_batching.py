"""The server's batch limits for engines that must batch as `vllm serve` does (suite.runtime.engine.batching): the offline
ceiling fills what a recipe leaves unset the server's way, the evaluation engines only where it sets none."""

from __future__ import annotations

import pytest

from suite.runtime.engine import batching
from suite.stages.registry import BENCHMARK


@pytest.fixture
def h200(monkeypatch):
    # what EngineArgs.get_batch_defaults gives the OpenAI server on an H200 (vLLM 0.26); LLM's are 16,384 / 1,024
    monkeypatch.setattr(batching, "_serve_defaults", lambda engine_args: (8192, 1024))


@pytest.mark.parametrize("engine_args,limits", [
    ({}, {"max_num_batched_tokens": 8192, "max_num_seqs": 1024}),
    ({"max_num_seqs": 2048}, {"max_num_batched_tokens": 8192, "max_num_seqs": 2048}),        # LLM: 16,384 tokens
    ({"performance_mode": "throughput"}, {"max_num_batched_tokens": 16384, "max_num_seqs": 2048}),
    ({"performance_mode": "throughput", "max_num_seqs": 512}, {"max_num_batched_tokens": 16384, "max_num_seqs": 512}),
    ({"max_num_batched_tokens": 512}, {"max_num_batched_tokens": 512, "max_num_seqs": 512}),   # seqs capped at tokens
    ({"enable_chunked_prefill": False}, {"max_num_batched_tokens": 8192, "max_num_seqs": 1024}),
    ({"max_num_seqs": 1}, {"max_num_batched_tokens": 4096, "max_num_seqs": 1}),              # tokens <= seqs x len
])
def test_the_offline_engine_gets_the_servers_limits_whatever_the_recipe_sets(h200, engine_args, limits):
    assert batching.serve_engine_limits(engine_args, max_model_len=4096) == limits


def test_without_chunked_prefill_the_tokens_reach_max_model_len(h200):
    got = batching.serve_engine_limits({"enable_chunked_prefill": False}, max_model_len=32768)
    assert got == {"max_num_batched_tokens": 32768, "max_num_seqs": 1024}


def test_the_evaluation_engines_leave_vllms_derivation_alone_where_the_recipe_sets_any(h200):
    assert batching.serve_batch_limits({}, 4096) == {"max_num_batched_tokens": 8192, "max_num_seqs": 1024}
    assert batching.serve_batch_limits({"max_num_seqs": 2048}, 4096) == {}


def test_no_server_default_means_no_limits(monkeypatch):
    monkeypatch.setattr(batching, "_serve_defaults", lambda engine_args: (None, None))
    assert batching.serve_engine_limits({}, 4096) == {}
    assert batching.serve_engine_limits({"max_num_seqs": 8}, 4096) == {}
    assert batching.serve_engine_limits({"max_num_seqs": 8, "max_num_batched_tokens": 64}, 4096) == {
        "max_num_batched_tokens": 64, "max_num_seqs": 8}


def test_a_resumed_runs_older_ceiling_is_not_divided_by_a_newer_one():
    """A run resumed after the change keeps an older benchmark whose ceiling had LLM's own limits: its offline ratio
    against a ceiling with the server's limits would compare two engines, so there is none."""
    from suite.records.summary import VariantSummary
    from suite.analysis.assemble import with_metrics
    from suite.analysis.summary import delta_metrics
    from suite.records.benchmark import BenchmarkResult

    def variant(name, base, limits):
        bench = BenchmarkResult(points=[], offline_tok_s=100.0, offline_batch_limits=limits, server_start_s=1.0, wall_s=1.0,
                                server_log="server.log")
        return VariantSummary(name=name, is_baseline=base, model_path="m", stages={BENCHMARK: bench},
                              metrics={"tput.offline_tok_s": 100.0 if base else 130.0})

    old, new, new2 = variant("bf16", True, None), variant("fp8", False, {"max_num_seqs": 1024}), variant("fp8b", False, None)
    old, new, new2 = with_metrics([old, new, new2], delta_metrics([old, new, new2]))
    assert "tput.offline_tok_s.ratio" not in new.metrics and new2.metrics["tput.offline_tok_s.ratio"] == 1.3
