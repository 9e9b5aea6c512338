"""Variants served from an existing checkpoint (``variants[].model``): its config.json read, its quantization described.

No model is loaded: config.json is read from the folder (a local checkpoint) or from the Hugging Face cache / hub (a
hub id, at its revision), and its ``quantization_config`` is summarised the way `suite plan` and the report show it:
compressed-tensors (llmcompressor's format: ``format``, ``config_groups``, ``kv_cache_scheme``) and vLLM's own
``fp8`` format (``activation_scheme``, ``weight_block_size``).
"""

from __future__ import annotations

import re
from pathlib import Path

from suite.runtime import safeio
from suite.records.schemes import args_summary, scheme_of


def read_config(model: str, revision: str | None = None) -> dict:
    """config.json of a local folder, or of a hub id (through huggingface_hub: its cache first, as vLLM would).
    Raises OSError / ValueError with the reason when it cannot be read."""
    p = Path(model)
    if p.is_dir():
        path = p / "config.json"
    else:
        from huggingface_hub import hf_hub_download  # a dependency of the suite's own stack, no torch

        try:
            path = Path(hf_hub_download(model, "config.json", revision=revision))
        except Exception as e:  # noqa: BLE001 - offline, gated, missing: the reason is the message
            raise OSError(f"{model}{'@' + revision if revision else ''}: config.json could not be fetched "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from e
    data = safeio.read_json(path, "model_config")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def quantization_of(config: dict) -> dict:
    """What a checkpoint's config.json says of its quantization: {} for an unquantized model, else quant_method,
    format, scheme (a preset name where it is one), weights / activations / kv_cache ('fp8 channel', ...) and
    ``summary``, one line for `suite plan` and the report."""
    qc = config.get("quantization_config") or config.get("compression_config")
    if not isinstance(qc, dict):
        return {}
    method = str(qc.get("quant_method") or "unknown")
    out: dict = {"quant_method": method}
    if method == "compressed-tensors":
        out["format"] = qc.get("format")
        groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
        w = sorted({s for g in groups if (s := args_summary(g.get("weights")))})
        a = sorted({s for g in groups if (s := args_summary(g.get("input_activations")))})
        out["weights"], out["activations"] = ", ".join(w) or None, ", ".join(a) or None
        out["scheme"] = scheme_of(w[0], a[0] if a else None) if len(w) == 1 and len(a) <= 1 else None
        out["kv_cache"] = args_summary(qc.get("kv_cache_scheme"))
    elif method == "fp8":  # vLLM's own FP8 format (Fp8Config)
        block = qc.get("weight_block_size")
        act = str(qc.get("activation_scheme") or "dynamic")
        out["weights"] = "fp8 " + (f"block {'x'.join(map(str, block))}" if block else "tensor")
        out["activations"] = "fp8 " + ("dynamic" if act == "dynamic" else "tensor")
        out["scheme"] = "FP8_BLOCK" if block else ("FP8" if act == "static" else "FP8_DYNAMIC")
        out["kv_cache"] = None
    else:
        out["format"] = qc.get("format") or qc.get("fmt")
        out["scheme"] = None
    parts = [method + (f" ({out['format']})" if out.get("format") else "")]
    for what in ("scheme", "weights", "activations", "kv_cache"):
        if out.get(what):
            parts.append(f"{what} {out[what]}")
    out["summary"] = "; ".join(parts)
    return {k: v for k, v in out.items() if v is not None}


def describe(model: str, revision: str | None = None) -> dict:
    """``quantization_of`` a checkpoint, with 'unquantized' as its summary when config.json names none."""
    q = quantization_of(read_config(model, revision))
    return q or {"summary": "unquantized"}


def label(q: dict) -> str | None:
    """A short name for the report's scheme column: the preset name, else the quant_method."""
    if not q or "quant_method" not in q:
        return None
    return q.get("scheme") or re.sub(r"\s+", "-", q["quant_method"])


def is_local_model(model_id: str) -> bool:
    """A model id that names a folder by its form (a path), not a hub repository (org/name)."""
    return model_id.startswith((".", "/", "~")) or not re.fullmatch(r"[\w.-]+/[\w.-]+", model_id)


def model_path(loaded, spec) -> str:
    """A variant's ``model`` (CheckpointSpec) as the engine is given it: an absolute folder for a local checkpoint
    (a path by its form, or an org/name that is a folder beside the recipe, as for the recipe's model), else the
    hub id."""
    local = is_local_model(spec.id) or loaded.resolve(spec.id).is_dir()
    return str(loaded.resolve(spec.id)) if local else spec.id
