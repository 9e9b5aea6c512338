"""Loaders and scoring for the long-text perplexity tasks (suite_longppl, suite_longppl_pos*, suite_longppl_tail).

Standard library and ``datasets`` only: lm-eval imports this file from the task folder.

Metrics follow lm-eval 0.4.13's wikitext task: a document's (or span's) summed log-likelihood ``ll``
(natural log) is paired with its word and UTF-8 byte counts; ``weighted_perplexity`` aggregates
``exp(-sum(ll) / sum(words))`` and ``bits_per_byte`` ``-sum(ll) / sum(bytes) / ln 2``. Words are
``len(re.split(r"\\s+", text))`` as in wikitext (the texts have no leading or trailing whitespace; a
span that starts with whitespace is counted without it).
"""

from __future__ import annotations

import re

CHARS_PER_TOKEN = 4  # span edges: Austen's prose runs 4.25-4.55 characters a token (SmolLM2, Qwen2.5)
# (label, first token, end token): spans double in length, so the prompt tokens of all spans of a
# document add up to about twice the document
BUCKETS = (
    ("0_512", 0, 512),
    ("512_1k", 512, 1024),
    ("1k_2k", 1024, 2048),
    ("2k_4k", 2048, 4096),
    ("4k_8k", 4096, 8192),
    ("8k_16k", 8192, 16384),
    ("16k_32k", 16384, 32768),
)


def _words(text: str) -> int:
    return len(re.split(r"\s+", text.strip()))


def _counts(ll: float, text: str, suffix: str = "") -> dict:
    n_words, n_bytes = _words(text), len(text.encode("utf-8"))
    return {
        f"word_perplexity{suffix}": (ll, n_words),
        f"byte_perplexity{suffix}": (ll, n_bytes),
        f"bits_per_byte{suffix}": (ll, n_bytes),
    }


# ---------------------------------------------------------------- suite_longppl (loglikelihood_rolling)

def doc_to_target(doc: dict) -> str:
    return doc["text"]


def process_results(doc: dict, results) -> dict:
    (ll,) = results  # one float: the sum over every token of the document, all windows together
    return _counts(ll, doc["text"])


# ---------------------------------------------------------------- suite_longppl_pos (loglikelihood)

def _cut(text: str, at: int) -> int:
    """The offset of the whitespace run that starts at or before ``at`` (a word boundary), so that the
    context ends on a word and the continuation starts with the whitespace, as BPE tokenizers split."""
    if at >= len(text):
        return len(text)
    i = at
    while i > 0 and not text[i].isspace():
        i -= 1
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i


def spans(text: str, max_tokens: int | None = None) -> list[dict]:
    """The document's spans, one per bucket it reaches: [start_char, end_char) with approximate token
    positions (character offset / CHARS_PER_TOKEN). The last span ends at the document's end, or at
    the cap; a span left empty by the rounding is dropped."""
    out = []
    cap = len(text) if max_tokens is None else _cut(text, max_tokens * CHARS_PER_TOKEN)
    for label, lo, hi in BUCKETS:
        if max_tokens is not None and hi > max_tokens:
            break
        start = _cut(text, lo * CHARS_PER_TOKEN)
        end = min(_cut(text, hi * CHARS_PER_TOKEN), cap) if hi * CHARS_PER_TOKEN < len(text) else cap
        if start >= end:
            break
        out.append({"bucket": label, "token_lo": lo, "token_hi": hi, "start_char": start, "end_char": end})
    return out


def _position_spans(dataset, max_tokens: int | None):
    from datasets import Dataset

    rows = []
    for doc in dataset:
        text = doc["text"]
        for s in spans(text, max_tokens):
            rows.append({"id": f"{doc['id']}@{s['bucket']}", "doc_id": doc["id"], "doc_sha256": doc["sha256"],
                         **s, "context": text[:s["start_char"]], "continuation": text[s["start_char"]:s["end_char"]]})
    return Dataset.from_list(rows)


def position_spans(dataset):
    """process_docs: one row per (document, position bucket)."""
    return _position_spans(dataset, None)


def position_spans_8k(dataset):
    """process_docs for 8k-context models: the spans that end within the first 8k buckets' tokens."""
    return _position_spans(dataset, 8192)


TAIL_FROM_TOKEN = 512


def tail_spans(dataset):
    """process_docs of suite_longppl_tail(_noprefix): one row per document, the span from ~512 tokens to its end.

    The long-context part of the corpus, without the first few hundred tokens, where an FP8 KV cache's effect on
    the attention sink is largest (docs/kv-ppl-sink.md). suite_longppl_tail scores it after lm-eval's prefix
    token (BOS, else EOS) as suite_longppl does; suite_longppl_tail_noprefix without it. On Qwen2.5-Coder-0.5B
    (H200, unit-scale FP8 KV) the two disagree in sign: -0.51 with the prefix, +0.64 without
    (docs/results/h200-kv-auto-20261201)."""
    from datasets import Dataset

    rows = []
    for doc in dataset:
        text = doc["text"]
        start = _cut(text, TAIL_FROM_TOKEN * CHARS_PER_TOKEN)
        if start >= len(text):
            continue  # shorter than 512 tokens: nothing past it (every document of tasks/data/longtext is > 2k)
        rows.append({"id": f"{doc['id']}@512_end", "doc_id": doc["id"], "doc_sha256": doc["sha256"],
                     "bucket": "512_end", "token_lo": TAIL_FROM_TOKEN, "token_hi": None, "start_char": start,
                     "end_char": len(text), "context": text[:start], "continuation": text[start:]})
    return Dataset.from_list(rows)


def tail_context(doc: dict) -> str:
    """doc_to_text of suite_longppl_tail_noprefix: the document's first ~512 tokens as the context, so that lm-eval
    puts no prefix token in front (a model without BOS, such as Qwen2.5, then starts at the document's first
    token; for a model with BOS, lm-eval's add_bos_token decides whether the context gets it)."""
    return doc["context"]


def tail_continuation(doc: dict) -> str:
    return doc["continuation"]


def process_tail_results(doc: dict, results) -> dict:
    if len(results) == 1:  # suite_longppl_tail_noprefix: one loglikelihood request, (ll, is_greedy)
        return _counts(results[0][0], doc["continuation"])
    (end, _), (start, _) = results  # ll(prefix + document), ll(prefix + document[:start]): see span_prefixes
    return _counts(end - start, doc["continuation"])


def span_context(doc: dict) -> str:
    return doc["context"]


def span_continuation(doc: dict) -> str:
    return doc["continuation"]


def span_prefixes(doc: dict) -> list[str]:
    """doc_to_choice: the document up to the span's end, then (not for the first span) up to its start.

    Both are scored with an EMPTY context, so lm-eval puts the model's prefix token (BOS, else EOS)
    in front of each, exactly as the rolling task does for the whole document. The span's
    log-likelihood is the difference (``process_span_results``): the continuation's tokens given
    prefix token + whole document before it, and the spans of a document telescope to the rolling
    score. Scoring ``(context=document[:start], continuation=span)`` instead puts NO prefix token in
    front of the context for models whose tokenizer adds no BOS (Qwen2.5, SmolLM2): the first span
    was conditioned on it and every later span was not (Qwen2.5-Coder-0.5B: 4-9 % lower perplexity
    than the rolling task on the same documents)."""
    text = doc["context"] + doc["continuation"]
    return [text] if not doc["context"] else [text, doc["context"]]


def process_span_results(doc: dict, results) -> dict:
    # results: [(ll(prefix + document[:end]), greedy), (ll(prefix + document[:start]), greedy)]; one for
    # the first span. Their difference is the span's summed log-likelihood given the whole prefix.
    ll = results[0][0] - (results[1][0] if len(results) > 1 else 0.0)
    text = doc["continuation"]
    return {**_counts(ll, text), **{k: v for k, v in _counts(ll, text, "_" + doc["bucket"]).items()
                                    if not k.startswith("byte_perplexity_")}}
