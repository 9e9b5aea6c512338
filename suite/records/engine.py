"""One vLLM engine start as the start-up ledger records it (``EngineStart``): which start, cold or warm, and where its
seconds went, from vLLM's own log lines (suite.runtime.engine.startlog) and the compile store
(suite.runtime.engine.compilecache).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from suite.records.base import Record

# which start: the evaluation's in-process engine (lm-eval's), the benchmark's `vllm serve`, its offline ceiling's LLM
EngineRole = Literal["in-process", "server", "offline"]


class EngineStart(Record):
    """Where one vLLM engine start went, from vLLM's own log lines (suite.runtime.engine.startlog). ``total_s`` is
    the suite's measurement, the start's wall time (engine construction, or spawn to a ready server); each part is
    None when its line was not in the log (CUDA graphs and model_load_s are GPU-only; compile_s needs
    torch.compile)."""

    total_s: Optional[float] = None
    model_init_s: Optional[float] = Field(None, description="'Initializing model took' (building the module)")
    weights_s: Optional[float] = Field(None, description="'Loading weights took' (reading the checkpoint)")
    model_load_s: Optional[float] = Field(
        None, description="GPU runners: 'Model loading took X GiB memory and Y seconds' (init + weights + moves)")
    init_engine_s: Optional[float] = Field(
        None, description="'init engine (profile, create kv cache, warmup model) took': holds compile and graphs")
    compile_s: Optional[float] = Field(None, description="torch.compile (the init-engine line's 'compilation')")
    cuda_graphs_s: Optional[float] = Field(None, description="'Graph capturing finished in N secs' (whole seconds)")
    after_graphs_s: Optional[float] = Field(
        None, description="graph capture's end to 'Kernel JIT monitor activated' by the log's timestamps (whole "
        "seconds; part of init_engine_s): the worker's last warm-up, long for a machine's first engine (minutes on "
        "a GPU, seconds for later ones)")
    other_s: Optional[float] = Field(
        None, description="total minus loading and init engine: process start, imports, tokenizer, API server")
    # the ledger's fields (None in a record written before the ledger existed)
    role: Optional[EngineRole] = Field(None, description="which start: in-process (the evaluation's lm-eval engine), "
                                       "server (the benchmark's `vllm serve`), offline (the offline ceiling's LLM)")
    kv_cache_tokens: Optional[int] = Field(None, description="'KV cache size: N tokens' as this engine logged it")
    compile_cache: Optional[Literal["cold", "warm"]] = Field(
        None, description="whether the compile store held this configuration's folder before the start (warm) or not "
        "(cold); None: the start used no compile store (SUITE_STORE unset in the stage, an older result)")
    compile_key: Optional[str] = Field(None, description="the compile store's key (suite.runtime.engine.compilecache)")
    engine_key: Optional[str] = Field(
        None, description="the hash of the whole engine configuration (model, dtype, lengths, KV dtype, engine "
        "arguments): two starts with one engine_key should get one KV capacity (suite.analysis.ledger flags those "
        "that do not)")
    started_at: Optional[float] = Field(None, description="the start's beginning, Unix seconds (the timeline's bar)")
