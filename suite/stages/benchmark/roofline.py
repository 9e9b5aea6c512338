"""Roofline: how close a measured throughput runs to the GPU's physical limits.

From the model's files (weights bytes, linear-layer parameters, KV bytes per token) and one load
point's measurements (output and input tokens/s, mean running requests from ``/metrics``), the
implied rates are:

  decode steps/s   = output tok/s / mean running requests (one token per running request per step)
  HBM traffic      = steps/s x weight bytes  +  output tok/s x mean context x KV bytes per token
  tensor work      = 2 x linear parameters x (input + output tok/s)   (attention FLOPs left out)

as fractions of the GPU's peak bandwidth and dense tensor rate (BF16, or FP8 for FP8 weights). These
are lower bounds on what the GPU did (no activation traffic, no recomputation), and a model, not a
profiler: they say whether a variant is near the memory roof or far from every roof.

The GPU's name comes from NVML (nvidia-ml-py's ``pynvml``: the same library nvidia-smi is built on,
without parsing its text); no driver, no GPU or no nvidia-ml-py: no name, so no peak fractions.

Weight bytes are summed from the safetensors headers read here (8 bytes of length + the JSON header),
not through ``safetensors.safe_open``: the header's ``data_offsets`` give every tensor's exact size in
bytes for any dtype, while ``safe_open`` exposes only dtype and shape, so its byte count would need a
dtype-size table of our own that must follow every new safetensors dtype (FP8 variants, packed FP4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from suite.runtime import safeio

log = logging.getLogger(__name__)

# name fragment (as NVML and nvidia-smi give it, e.g. 'NVIDIA H200') -> (HBM TB/s, dense BF16 TFLOP/s, dense FP8 TFLOP/s)
GPU_PEAKS = {
    "H200": (4.8, 989.0, 1979.0),
    "H100 PCIe": (2.0, 756.0, 1513.0),
    "H100 NVL": (3.9, 835.0, 1671.0),
    "H100": (3.35, 989.0, 1979.0),
}
DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def detect_gpu() -> str | None:
    """The first GPU's name from NVML (index 0, as nvidia-smi lists it), or None where there is no NVIDIA
    driver or GPU (NVML raises NVMLError: the library is not found, no device, ...)."""
    try:
        import pynvml
    except ImportError:
        log.warning("roofline: nvidia-ml-py is not installed: no GPU name (set throughput.gpu)")
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return (name.decode() if isinstance(name, bytes) else name).strip() or None
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def gpu_peak(name: str | None) -> tuple[str, tuple[float, float, float]] | None:
    if not name:
        return None
    for key, peak in GPU_PEAKS.items():  # ordered: the specific names before "H100"
        if key.lower() in name.lower():
            return key, peak
    return None


@dataclass
class ModelCost:
    weight_bytes: float
    linear_params: float
    kv_bytes_per_token: float
    fp8_weights: bool

    @classmethod
    def from_folder(cls, folder: str, kv_cache_dtype: str = "auto") -> "ModelCost | None":
        """Sizes from safetensors headers when weights are there, else from config.json (a dummy-load
        model folder holds only the config)."""
        path = Path(folder)
        try:
            cfg = safeio.read_json(path / "config.json", "model_config")
        except (OSError, ValueError):
            return None
        cfg = cfg.get("text_config", cfg)
        h, n_layers = cfg.get("hidden_size"), cfg.get("num_hidden_layers")
        if not h or not n_layers:
            return None
        heads = cfg.get("num_attention_heads", 1)
        kv_heads = cfg.get("num_key_value_heads", heads)
        head_dim = cfg.get("head_dim") or h // heads
        inter = cfg.get("intermediate_size", 4 * h)
        vocab = cfg.get("vocab_size", 0)
        per_layer = h * heads * head_dim * 2 + h * kv_heads * head_dim * 2 + 3 * h * inter
        linear = n_layers * per_layer + (0 if cfg.get("tie_word_embeddings") else vocab * h)
        kv_bytes = 2 * n_layers * kv_heads * head_dim * DTYPE_BYTES.get(kv_cache_dtype, 2)
        qcfg = cfg.get("quantization_config") or {}
        fp8 = any((g.get("weights") or {}).get("num_bits") == 8 for g in (qcfg.get("config_groups") or {}).values())
        # bytes read per decode step: every linear layer (lm_head included); the input embedding is only
        # gathered row by row, unless it is tied to lm_head
        skip = () if cfg.get("tie_word_embeddings") else ("embed_tokens",)
        weights = safetensors_bytes(path, skip)
        if weights is None:
            weights = (linear + (vocab * h if cfg.get("tie_word_embeddings") else 0)) * 2
        return cls(weight_bytes=float(weights), linear_params=float(linear), kv_bytes_per_token=float(kv_bytes),
                   fp8_weights=fp8)


def safetensors_bytes(folder: Path, skip: tuple[str, ...] = ()) -> int | None:
    """Total tensor bytes from the safetensors headers (no tensor is read), leaving out names containing
    any of ``skip``."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with safeio.open_bytes(f, "weights") as fh:
            n = min(int.from_bytes(fh.read(8), "little"), safeio.limits("weights_header").max_bytes)
            header = safeio.loads_json(fh.read(n), f, "weights_header")
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
                     if k != "__metadata__" and not any(x in k for x in skip))
    return total


def implied(cost: ModelCost, peak: tuple[float, float, float] | None, output_tok_s: float, input_tok_s: float,
            running_mean: float | None, mean_context: float) -> dict[str, float]:
    """Implied HBM TB/s and tensor TFLOP/s of one point, and their fractions of the peak."""
    out: dict[str, float] = {}
    tflops = 2 * cost.linear_params * (output_tok_s + input_tok_s) / 1e12
    out["tensor_tflops"] = tflops
    if running_mean and running_mean > 0:
        steps = output_tok_s / running_mean
        out["decode_steps_s"] = steps
        out["hbm_tb_s"] = (steps * cost.weight_bytes + output_tok_s * mean_context * cost.kv_bytes_per_token) / 1e12
    if peak:
        bw, bf16, fp8 = peak
        out["tensor_frac"] = tflops / (fp8 if cost.fp8_weights else bf16)
        if "hbm_tb_s" in out:
            out["hbm_frac"] = out["hbm_tb_s"] / bw
    return out
