"""Reproducibility pre-flight: do the baseline and each variant see the same prompts?

A quantized checkpoint carries its own copy of the tokenizer. If its BOS handling or chat template
differs from the baseline's, accuracy deltas measure the prompt change, not FP8. Before evaluation,
``tokenizer_facts`` reads each variant's tokenizer files (no model is loaded): the BOS/EOS tokens,
whether encoding really prepends BOS (by encoding a string with ``tokenizers``), and the SHA-256 of the
chat template; ``compare`` turns differences from the baseline into warnings that are printed and kept
in ``summary.json``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from suite.runtime import safeio
from suite.runtime.kvbias import preflight_kv


def tokenizer_facts(model_path: str) -> dict:
    p = Path(model_path)
    facts: dict = {}
    cfg_path = p / "tokenizer_config.json"
    if not cfg_path.is_file():
        return {"found": False}
    cfg = safeio.read_json(cfg_path, "model_config")
    template = cfg.get("chat_template")
    if (p / "chat_template.jinja").is_file():
        template = safeio.read_text(p / "chat_template.jinja", "template")
    facts.update(found=True, bos_token=cfg.get("bos_token"), eos_token=cfg.get("eos_token"),
                 add_bos_token=cfg.get("add_bos_token"),
                 chat_template_sha256=hashlib.sha256(template.encode()).hexdigest()[:16] if isinstance(template, str) else None)
    if (p / "tokenizer.json").is_file():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(p / "tokenizer.json"))
            ids = tok.encode("The answer is").ids
            bos = cfg.get("bos_token")
            bos_id = tok.token_to_id(bos) if isinstance(bos, str) else None
            facts["encodes_bos"] = bool(ids) and bos_id is not None and ids[0] == bos_id
            facts["probe_ids"] = ids[:8]
        except Exception as e:  # noqa: BLE001 - a fact we could not establish is reported, not fatal
            facts["encode_error"] = f"{type(e).__name__}: {e}"[:200]
    return facts


def compare(base_name: str, base: dict, name: str, facts: dict) -> list[str]:
    if not base.get("found") or not facts.get("found"):
        return []
    out = []
    for key, what in (("encodes_bos", "prepends BOS when encoding"), ("bos_token", "BOS token"),
                      ("add_bos_token", "add_bos_token"), ("chat_template_sha256", "chat template (sha256)"),
                      ("probe_ids", "token ids of a probe string")):
        if key in base and key in facts and base[key] != facts[key]:
            out.append(f"{name}: {what} differs from {base_name}'s ({facts[key]!r} vs {base[key]!r}); accuracy deltas "
                       "would measure the prompt change, not FP8 (copy the baseline's tokenizer files into the checkpoint)")
    return out


def preflight_tokenizers(variants) -> list[str]:
    """Record each variant's tokenizer facts (``VariantSummary.tokenizer``) and return the warnings for
    those that differ from the baseline's."""
    base = next(v for v in variants if v.is_baseline)
    for v in variants:
        if not v.errors and Path(v.model_path).is_dir():
            v.tokenizer = tokenizer_facts(v.model_path)
    return [w for v in variants if not v.is_baseline and v.tokenizer
            for w in compare(base.name, base.tokenizer, v.name, v.tokenizer)]


def run(variants) -> list[str]:
    """The whole pre-flight, once every checkpoint exists (before the evaluations that wait for one; without GPUs the
    baseline's may have run already, LocalExecutor.order): tokenizers against the baseline's, then FP8 KV caches on
    models whose k/v biases stand out (suite.runtime.kvbias). Warnings only."""
    return preflight_tokenizers(variants) + preflight_kv(variants)
