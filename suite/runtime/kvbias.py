"""The KV pre-flight: k_proj/v_proj bias norms read from safetensors headers (numpy, no torch), and the run's warnings.

The tensors are read with ``safetensors.safe_open(path, framework="numpy")`` (it parses and checks the
header and reads each bias from its byte range alone); BF16, which numpy lacks, is ml_dtypes'
``bfloat16`` (importing ml_dtypes registers it with numpy, which is what safetensors' numpy loader asks
for). A file safetensors refuses raises ValueError here, which the pre-flight reports as unreadable.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from suite.runtime import safeio
from suite.records.kvcheck import Thresholds


@dataclass
class BiasOutlier:
    layer: int
    proj: str       # 'k_proj' or 'v_proj'
    norm: float
    median: float
    ratio: float


def bias_norms(model_dir: str | Path) -> dict[str, dict[int, float]]:
    """{'k_proj': {layer: ||bias||_2}, 'v_proj': {...}} from the safetensors files (``safe_open``, numpy:
    each bias tensor read alone, no torch, no model load: this runs in the parent process before any
    stage). Empty dicts for a model without attention biases; ValueError for a file safetensors refuses."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 and the FP8 types with numpy)
    import numpy as np
    from safetensors import SafetensorError, safe_open

    rx = re.compile(r"layers\.(\d+)\.(?:self_attn|attention|attn)\.([kv]_proj)\.bias$")
    out: dict[str, dict[int, float]] = {"k_proj": {}, "v_proj": {}}
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors files")
    for f in files:
        try:
            with safe_open(safeio.regular(f, "weights"), framework="numpy") as st:
                for key in st.keys():
                    m = rx.search(key)
                    if m:
                        t = np.asarray(st.get_tensor(key), dtype=np.float64)
                        out[m.group(2)][int(m.group(1))] = float(np.sqrt(np.sum(t ** 2)))
        except (SafetensorError, TypeError) as e:  # a bad header; a dtype numpy cannot hold
            raise ValueError(f"{f.name}: {e}") from e
    return out


def preflight_warnings(variant: str, model_dir: str | Path, calibrated: bool) -> list[str]:
    """The run's warning lines for a variant with an FP8 KV cache whose model has k/v_proj biases that
    stand out (``kv_bias_preflight``): per-tensor scales are risky there. ``calibrated``: the checkpoint
    carries llmcompressor-calibrated k/v scales (on Qwen2.5-Coder-0.5B those cost 9 GSM8K points while
    vLLM's unit scale stayed within the noise: docs/kv-scales.md)."""
    try:
        found = kv_bias_preflight(model_dir)
    except (OSError, ValueError, KeyError) as e:  # no safetensors (a hub id), an unusual file: say nothing
        return [] if isinstance(e, FileNotFoundError) else [f"{variant}: KV pre-flight could not read {model_dir}: {e}"]
    if not found:
        return []
    layers = ", ".join(f"{f.layer} ({f.proj} bias {f.ratio:.0f}x the median)" for f in found[:6])
    more = f" and {len(found) - 6} more" if len(found) > 6 else ""
    advice = ("calibrated per-tensor k/v scales are the riskiest choice here: compare the variant with vLLM's "
              "unit scale (kv_cache_dtype: fp8 without kv_cache calibration) before trusting it" if calibrated
              else "per-tensor FP8 KV scales are risky in these layers: check the variant's paired accuracy "
              "against BF16 before trusting it")
    return [f"{variant}: FP8 KV cache on a model whose attention biases stand out in layer(s) {layers}{more}; "
            f"{advice} (docs/kv-scales.md)"]


def kv_bias_preflight(model_dir: str | Path, factor: float = Thresholds().max_bias_vs_median) -> list[BiasOutlier]:
    """Layers whose k_proj / v_proj bias norm is more than ``factor`` x the median layer's: per-tensor FP8
    KV scales are risky there (a large constant vector, rotated by RoPE, sets the tensor's range)."""
    found = []
    for proj, norms in bias_norms(model_dir).items():
        if len(norms) < 2:
            continue
        median = statistics.median(norms.values())
        for layer, norm in sorted(norms.items()):
            if median > 0 and norm > factor * median:
                found.append(BiasOutlier(layer, proj, norm, median, norm / median))
    return found


def preflight_kv(variants) -> list[str]:
    """Warnings for variants (``VariantSummary``) with an FP8 KV cache on a model whose k/v_proj biases
    stand out (read from the safetensors headers, no model load): per-tensor FP8 KV scales are risky
    there (issue 18)."""
    return [w for v in variants if not v.errors and str(v.kv_cache_dtype).startswith("fp8")
            and Path(v.model_path).is_dir()
            for w in preflight_warnings(v.name, v.model_path, calibrated=bool(v.kv_cache))]
