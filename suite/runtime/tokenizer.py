"""A model's tokenizer.json: where it is (a model folder, or a hub id in the local Hugging Face cache) and the copy a
perplexity evaluation keeps in the run folder, so that its token counts are recomputed without the model
(``suite.analysis.perplexity``, ``suite gate``)."""

from __future__ import annotations

from pathlib import Path

from suite.runtime import atomic, safeio

# lm-eval's perplexity metrics (= suite.analysis.paired.PPL_METRICS): a task scored on one counts tokens
PERPLEXITY_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")
KEPT_NAME = "tokenizer.json"


def tokenizer_json(model: str) -> Path | None:
    """The tokenizer.json of ``model`` (a folder, or a hub id in the local Hugging Face cache); None: none found."""
    path: Path | None = Path(model) / KEPT_NAME
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, KEPT_NAME)
            path = Path(cached) if isinstance(cached, str) else None
        except Exception:  # noqa: BLE001 - not a hub id, or no cache: no tokenizer
            path = None
    return path if path is not None and path.is_file() else None


def keep(model: str, metrics: list[str], out_dir: Path) -> tuple[str | None, str | None]:
    """(the copy, its sha256) of ``model``'s tokenizer.json written to ``out_dir`` when one of ``metrics`` ('metric,
    filter') is a perplexity; (None, None) when none is, or the model has no tokenizer.json."""
    if not any(m.partition(",")[0] in PERPLEXITY_METRICS for m in metrics):
        return None, None
    src = tokenizer_json(model)
    if src is None:
        return None, None
    dst = Path(out_dir) / KEPT_NAME
    atomic.write(dst, safeio.read_bytes(src, "run_file"))
    return str(dst), safeio.sha256(dst, "run_file")
