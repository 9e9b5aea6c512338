"""Paired perplexity: a variant against the baseline, document by document, from lm-eval's samples files.

Perplexity tasks are those whose headline metric is lm-eval's ``word_perplexity``, ``byte_perplexity`` or
``bits_per_byte`` (``paired.is_perplexity_metric``: ``suite_longppl``, ``suite_longppl_pos*``, wikitext):
lower is better, the opposite of accuracy, so accuracy's item-by-item pairing does not apply to them.

Per document (per span for the position tasks), from the sample row lm-eval wrote:
- ``ll``: the document's summed log-likelihood, the first number of the row's ``word_perplexity`` pair
  (the same as ``resps[0][0]`` for the rolling task; the span's ``ll_end - ll_start`` for the position tasks);
- ``tokens``: the text it scored (``doc.continuation`` for a span, else the row's ``target``, else
  ``doc.text``) tokenized with the **baseline's** tokenizer (its ``tokenizer.json`` through ``tokenizers``,
  no special tokens; what ``scripts/ppl_paired.py`` counted with transformers, to the token on the 30
  long-text documents and 174 spans with Qwen2.5's tokenizer). lm-eval does not report token counts. Both
  sides use the same counts, so the delta is the log-likelihoods' alone;
- token perplexity ``exp(-ll / tokens)``; delta = variant's minus baseline's.
``PerplexityComparison``: the mean delta over the documents both scored (``n``, always stated) with its
95% paired bootstrap interval (``paired.bootstrap_ci``, seeded), documents worse in the variant, and the
corpus perplexity ``exp(-sum ll / sum tokens)`` of each over those documents. A document in one samples
file only, scored twice, or whose text differs between the two is not paired: it is listed, counted
(``ppl.<task>.docs_unpaired``) and warned about, and ``suite gate`` refuses such a pairing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from suite.runtime import safeio
from suite.runtime.tokenizer import tokenizer_json
from suite.analysis.paired import N_BOOT, PPL_METRICS, bootstrap_ci, is_perplexity_metric

Counter = Callable[[list[str]], list[int]]  # texts -> token counts


@dataclass
class DocScore:
    ll: float  # summed natural-log likelihood of the scored text
    text: str  # the text scored (tokenized for the count)
    unit: str  # "document" or "span"


@dataclass
class PerplexityComparison:
    task: str
    unit: str  # "document" (suite_longppl) or "span" (suite_longppl_pos*)
    n: int  # documents both scored with the same text: the delta and its interval are over these
    delta: float  # mean of (variant - baseline) token perplexity per document
    ci_low: float
    ci_high: float
    ppl: float  # the variant's corpus token perplexity over the n documents
    baseline_ppl: float
    tokens: int  # tokens of the n documents (the baseline's tokenizer)
    worse: int  # documents whose perplexity rose
    unpaired: int = 0  # documents left out: in one side only, scored twice, or with different text
    unpaired_ids: list[str] = field(default_factory=list)  # the first few of them, with why
    confidence: float = 0.95
    ci_method: str = "BCa"

    def as_dict(self) -> dict:
        return asdict(self)


def doc_scores(samples_file: str | Path) -> tuple[dict[str, DocScore], list[str]]:
    """({document id: DocScore}, ids seen more than once) from one samples_<task>.jsonl of a perplexity task."""
    out: dict[str, DocScore] = {}
    twice: list[str] = []
    for row in safeio.iter_jsonl(samples_file, "samples"):
        if row.get("filter", "none") != "none":
            continue
        pair = next((row[m] for m in PPL_METRICS if isinstance(row.get(m), list) and len(row[m]) == 2), None)
        if pair is None:
            continue
        doc = row.get("doc") if isinstance(row.get("doc"), dict) else {}
        key = f"{row.get('task', '')}/{doc.get('id', row.get('doc_id'))}"
        if "continuation" in doc:
            text, unit = doc["continuation"], "span"
        else:
            target = row.get("target")
            text, unit = (target if isinstance(target, str) else doc.get("text", "")), "document"
        if key in out:
            twice.append(key)
        out[key] = DocScore(float(pair[0]), str(text), unit)
    return out, twice


def token_counter(model_path: str) -> Counter | None:
    """Token counts with the tokenizer.json of ``model_path`` (a folder, or a hub id in the local Hugging Face
    cache), no special tokens; None when there is none that can be read."""
    path = tokenizer_json(model_path)
    return token_counter_file(path) if path is not None else None


def token_counter_file(path: str | Path) -> Counter | None:
    """Token counts with the tokenizer.json at ``path`` (read within the safe reader's cap), no special tokens; None
    when it cannot be read."""
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(safeio.read_bytes(path, "run_file").decode("utf-8"))
    except Exception:  # noqa: BLE001 - an unreadable tokenizer counts nothing (the summary warns)
        return None
    seen: dict[str, int] = {}  # the baseline's texts are counted once for every variant

    def count(texts: list[str]) -> list[int]:
        new = [t for t in dict.fromkeys(texts) if t not in seen]
        seen.update(zip(new, (len(e.ids) for e in tok.encode_batch(new, add_special_tokens=False))))
        return [seen[t] for t in texts]
    return count


def token_ppl(ll: float, tokens: int) -> float:
    return math.exp(-ll / tokens)


def compare(task: str, base: dict[str, tuple[float, int]], variant: dict[str, tuple[float, int]], unit: str = "document",
            unpaired: list[str] | None = None, confidence: float = 0.95, n_boot: int = N_BOOT,
            seed: int = 0) -> PerplexityComparison:
    """The paired comparison from {id: (ll, tokens)} of each side; ids in one side only count as unpaired."""
    keys = sorted(set(base) & set(variant))
    why = list(unpaired or []) + [f"{k} (baseline only)" for k in sorted(set(base) - set(variant))] + \
        [f"{k} (variant only)" for k in sorted(set(variant) - set(base))]
    diffs = [token_ppl(variant[k][0], variant[k][1]) - token_ppl(base[k][0], base[k][1]) for k in keys]
    low, high, method = bootstrap_ci(diffs, confidence, n_boot, seed)
    tokens = sum(base[k][1] for k in keys)
    corpus = (lambda side: math.exp(-sum(side[k][0] for k in keys) / sum(side[k][1] for k in keys))) if tokens \
        else (lambda side: math.nan)
    return PerplexityComparison(task, unit, len(keys), sum(diffs) / len(diffs) if diffs else math.nan, low, high,
                                corpus(variant), corpus(base), tokens, sum(1 for d in diffs if d > 0), len(why),
                                why[:10], confidence, method)


def compare_variant(base_eval, variant_eval, count: Counter, seed: int = 0) -> list[PerplexityComparison]:
    """Every perplexity task both evaluations scored, paired by document (token counts from ``count``)."""
    out = []
    variant_scores = {s.task: s for s in variant_eval.scores}
    for s in base_eval.scores:
        v = variant_scores.get(s.task)
        bf, vf = base_eval.samples_files.get(s.task), variant_eval.samples_files.get(s.task)
        if v is None or not is_perplexity_metric(s.metric) or not bf or not vf:
            continue
        (b, b_twice), (w, w_twice) = doc_scores(bf), doc_scores(vf)
        bad = {k: "scored twice" for k in b_twice + w_twice}
        bad.update({k: "different text" for k in set(b) & set(w) if k not in bad and b[k].text != w[k].text})
        common = sorted(k for k in set(b) & set(w) if k not in bad)
        counts = dict(zip(common, count([b[k].text for k in common])))
        bad.update({k: "no tokens" for k, n in counts.items() if n <= 0})
        ok = [k for k in common if k not in bad]
        unpaired = [f"{k} ({why})" for k, why in sorted(bad.items())]
        unpaired += [f"{k} (baseline only)" for k in sorted(set(b) - set(w) - set(bad))]
        unpaired += [f"{k} (variant only)" for k in sorted(set(w) - set(b) - set(bad))]
        unit = next((d.unit for d in b.values()), "document")
        out.append(compare(s.task, {k: (b[k].ll, counts[k]) for k in ok}, {k: (w[k].ll, counts[k]) for k in ok}, unit,
                           unpaired, seed=seed))
    return out


def corpus_ppl(evaluate, task: str, count: Counter) -> float | None:
    """One evaluation's corpus token perplexity on ``task`` (every document it scored), or None."""
    f = evaluate.samples_files.get(task)
    if not f:
        return None
    docs, _ = doc_scores(f)
    if not docs:
        return None
    tokens = sum(count([d.text for d in docs.values()]))
    return math.exp(-sum(d.ll for d in docs.values()) / tokens) if tokens > 0 else None


# --------------------------------------------------------------------------------------------------
# What `suite gate` reads (suite.analysis.gate: max_perplexity_increase)


def _same(a, b) -> bool:
    return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
            and not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))


def gate_reading(r, task: str, key: str, why: str, fix: str) -> tuple[float, int, str] | None:
    """(upper bound of the 95% CI of the delta, documents paired, what to show) for the variant ``r.v`` of a
    ``gate._Reader`` on ``task`` (metrics under ``key`` = ``ppl.<task>``), every figure checked against the
    perplexity record it came from; a figure that is missing, non-finite or disagrees is a problem (``r.bad``)."""
    v, base = r.v, r.base
    records = [p for p in v.perplexity if isinstance(p, dict) and p.get("task") == task]
    field_n = f"{v.name}: {key}.docs_paired"
    if len(records) > 1:
        r.bad(f"{v.name}: perplexity", f"{len(records)} perplexity records for {task}; there is one", fix)
        return None
    rec = records[0] if records else {}
    n = r.get(v, key + ".docs_paired", why, nonneg=True)
    if n is None:
        return None
    if n != int(n) or (rec and rec.get("n") != n):
        r.bad(field_n, f"is {n:g}, but the perplexity record says n = {rec.get('n')}" if rec and n == int(n)
              else f"the paired document count is {n!r}, not a count", fix)
        return None
    if n < 2:
        r.bad(field_n, f"paired over {int(n)} document(s): a confidence interval needs at least 2 (needed by {why})",
              "check that the variant and the baseline scored the same documents (their samples_*.jsonl)")
        return None
    unpaired = r.get(v, key + ".docs_unpaired", why, nonneg=True)
    high, delta = r.get(v, key + ".delta_ci_high", why), r.get(v, key + ".delta", why)
    if unpaired is None or high is None or delta is None:
        return None
    if not rec:
        r.bad(f"{v.name}: perplexity", f"no perplexity record for {task} to check {key}.delta_ci_high against "
              f"(needed by {why})", fix)
        return None
    if unpaired or rec.get("unpaired"):
        r.bad(f"{v.name}: {key}.docs_unpaired", f"{max(unpaired, rec.get('unpaired') or 0):g} document(s) of {task} "
              f"did not pair with the baseline's ({', '.join(map(str, rec.get('unpaired_ids') or [])) or '?'}): the "
              f"delta leaves them out (needed by {why})",
              "score both on the same documents (the same eval.tasks limit and data), then rerun")
        return None
    for metric, value, name in ((key + ".delta_ci_high", high, "ci_high"), (key + ".delta", delta, "delta"),
                                (key, v.metrics.get(key), "ppl")):
        if not _same(value, rec.get(name)):
            r.bad(f"{v.name}: {metric}", f"is {value} but the perplexity record says {rec.get(name)}", fix)
            return None
    low = rec.get("ci_low")
    if not (_same(low, low) and math.isfinite(low) and low <= high):
        r.bad(f"{v.name}: perplexity", f"the record's interval [{low}, {high}] of {task} is not an interval", fix)
        return None
    b = r.get(base, key, why)
    if b is None:
        return None
    if not _same(b, rec.get("baseline_ppl")):  # every document paired: the baseline's corpus perplexity is its own
        r.bad(f"{base.name}: {key}", f"is {b} but {v.name}'s perplexity record says the baseline's is "
              f"{rec.get('baseline_ppl')}", fix)
        return None
    unit = rec.get("unit", "document")
    return high, int(n), (f"token-perplexity delta {delta:+.4f} [95% CI {low:+.4f}, {high:+.4f}] over {int(n)} "
                          f"{unit}s ({b:.4f} -> {rec['ppl']:.4f})")
