"""Paired accuracy statistics: a variant against the baseline, item by item, from lm-eval's samples.

lm-eval's stderr is the sampling error of one model's score. Two variants scored on the same items are
paired, and the delta's uncertainty is much smaller than the two stderrs suggest. For each task:
the mean per-item delta over the items both scored (``n``, always stated), its 95% confidence interval,
how many items flipped each way, and for 0/1 scores McNemar's exact test (``scipy.stats.binomtest``,
two-sided, on the discordant pairs). ``ci_method`` names the interval:
- 0/1 scores (accuracy, exact match, pass@1 of one sample): Tango's score interval for a paired difference of
  proportions ('tango', ``tango_interval``), from n and the items gained and lost. Why not the bootstrap: it
  collapses when few pairs disagree (every item agreeing gives [0, 0], a pass at any margin; at the margin with
  50 items it passed 35% of the time). The score interval inverts the test at the null's own variance, so
  agreeing items still leave +-z^2 / (n + z^2) (0.32 on 8 items, 0.003 on 1,319), and its one-sided error at
  the margin stays within 0.032 for the nominal 0.025 (computed exactly at every n from 2 to 120 and at 150, 200,
  300, 500, discordance 1-50%, margins 0.005-0.2; simulated up to n = 1,319 in
  tests/analysis/test_paired_small_n.py). Why Tango rather than
  Newcombe's hybrid score (a square-and-add of two Wilson intervals with a correlation correction) or an exact
  interval: it is one statistic, closed form at each delta, among those the published comparison recommends
  (Fagerland, Lydersen, Laake 2014, Statistics in Medicine 33: 2850-2875), and an exact unconditional interval
  costs a search over the nuisance discordance rate for each bound. It is not conservative: the far side (a
  build exactly at the margin judged a fail) reaches 0.047 when no item is gained at all.
- other scores (F1, BLEU): a bootstrap over items (``scipy.stats.bootstrap``, BCa, 2,000 resamples, seeded),
  only where at least MIN_CHANGED (30) items changed score: with fewer it collapses as above, and the interval
  is then the whole range a delta of these scores can take ('bounds': [-s, s], s the span of [0, 1] and every
  score seen), so a gate on it is inconclusive rather than passed. Simulated at the margin with 30 or more
  changed items: at most 0.030 false passes in five shapes (400 datasets each).

Where the bootstrap has nothing to say, the result says so instead of inventing an interval:
- fewer than 2 common items: delta (n = 0) and interval are NaN, ``ci_method`` 'none' (scipy refuses
  such a sample; the summary records the count and ``suite gate`` refuses a CI gate on it);
- every per-item delta equal and non-zero (other scores, 30 or more items): the interval is that value exactly
  ('constant'; BCa divides by zero there and scipy returns NaN);
- BCa undefined on other degenerate resamples (scipy's DegenerateDataWarning): the percentile interval
  of the same seeded resamples ('percentile').
Cost, measured on 14,042 MMLU-sized items (2 cores): the bootstrap 0.5 s a comparison (BCa's jackknife over the
items), the score interval 0.03 s (two bisections of a closed form).

Perplexity tasks (headline metric in ``PPL_METRICS``: lower is better, and a sample holds a
(log-likelihood, count) pair, not a score) are not compared here: ``suite.analysis.perplexity`` pairs
them document by document.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.runtime import safeio

N_BOOT = 2000
# scores other than 0/1: the bootstrap interval is used only over at least this many items whose score changed
MIN_CHANGED = 30
# lm-eval's perplexity metrics (wikitext, tasks/suite_longppl*): lower is better
PPL_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")


# ci_method in words, for the gate's and the report's lines
INTERVAL_NAMES = {"tango": "Tango score interval", "BCa": "BCa bootstrap", "percentile": "percentile bootstrap",
                  "constant": "every item moved alike", "bounds": "whole range: too few items changed"}


def interval_name(method) -> str:
    """``ci_method`` in words ('' when unknown or absent: a record from before the field)."""
    return INTERVAL_NAMES.get(method, "") if isinstance(method, str) else ""


def is_perplexity_metric(metric: str | None) -> bool:
    """Whether a task's 'metric,filter' is a perplexity (lower is better), not an accuracy."""
    return isinstance(metric, str) and metric.partition(",")[0] in PPL_METRICS


@dataclass
class PairedComparison:
    task: str
    metric: str
    n: int  # items both scored: the delta and its interval are over these
    delta: float
    ci_low: float
    ci_high: float
    gained: int  # items the variant gets right and the baseline wrong (binary scores)
    lost: int
    mcnemar_p: float | None  # None when scores are not all 0/1, or there are no items
    confidence: float = 0.95
    # tango (0/1 scores), BCa, percentile or constant (other scores), bounds (other scores, fewer than MIN_CHANGED
    # items changed: the interval is the whole range the delta can take), none (fewer than 2 items)
    ci_method: str = "BCa"

    def as_dict(self) -> dict:
        return asdict(self)


# an archived items file's rows are short (task, doc_id, filter, the scores): a longer gzipped line is refused, not read
# whole into memory (a small .gz can unpack to gigabytes without a newline)
MAX_GZ_ROW_CHARS = 16 << 20


def samples_rows(samples_file: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, row) of each line of a samples_<task>.jsonl file, or of a gzipped file of the same rows (a name
    ending in .gz, each of its lines bounded by MAX_GZ_ROW_CHARS: a decompression bomb is a ValueError naming the
    line), read through the safe reader."""
    packed = str(samples_file).endswith(".gz")
    n = 0
    with safeio.open_text(samples_file, "samples") as fh:
        while line := (fh.readline(MAX_GZ_ROW_CHARS + 1) if packed else fh.readline()):
            n += 1
            if packed and len(line) > MAX_GZ_ROW_CHARS and not line.endswith("\n"):
                raise ValueError(f"line {n}: a row longer than {MAX_GZ_ROW_CHARS} characters")
            yield n, safeio.loads_json(line, samples_file, "samples", where=f"line {n}")


def item_scores(samples_file: str | Path, metric: str) -> dict[tuple[str, int], float]:
    """{(subtask, doc_id): score} for one 'metric,filter' from a samples_<task>.jsonl file, or from a gzipped file of
    the same rows (a name ending in .gz: an archived run folder's ``evaluate/items.jsonl.gz``, whose rows keep only
    task, doc_id, filter and the scores; studies/2026-12-05-verdicts/scripts/collect.py).
    A file that is not what it should be (not gzip, cut short, a line not a JSON object of a doc_id and a numeric
    score, a gzipped line over MAX_GZ_ROW_CHARS: a decompression bomb) is a ValueError naming the file and line."""
    name, _, filt = metric.partition(",")
    scores = {}
    n = 0
    try:
        for n, row in samples_rows(samples_file):
            if row.get("filter", "none") == (filt or "none") and name in row:
                scores[(row.get("task", ""), int(row["doc_id"]))] = float(row[name])
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, FileNotFoundError):
            raise  # a file gone: the callers say which and what to do
        where = f"line {n}: " if n and not str(e).startswith("line ") else ""
        raise ValueError(f"{samples_file}: {where}not a file of per-item records ({type(e).__name__}: {e})") from e
    return scores


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """McNemar's exact test: two-sided binomial test of min(gained, lost) of the discordant pairs at p = 1/2."""
    from scipy.stats import binomtest

    n = gained + lost
    if n == 0:
        return 1.0  # no discordant pair: no evidence of a difference
    return float(binomtest(min(gained, lost), n, 0.5, alternative="two-sided").pvalue)


def bootstrap_ci(diffs, confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, str]:
    """(low, high, method): the bootstrap interval of the mean of ``diffs`` (see the module docstring)."""
    import numpy as np
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return math.nan, math.nan, "none"
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0]), "constant"
    batch = max(1, 4_000_000 // d.size)  # bounded memory (resamples and BCa's jackknife) on full-size benchmarks
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = stats.bootstrap((d,), np.mean, n_resamples=n_boot, confidence_level=confidence, method=method,
                                 vectorized=True, batch=batch, rng=np.random.default_rng(seed)).confidence_interval
        low, high = float(ci.low), float(ci.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high, method
    return math.nan, math.nan, "none"


def tango_z(n, gained, lost, delta0):
    """Tango's score statistic for H0: (gained - lost) / n = delta0 (numpy arrays or numbers, broadcast): the
    observed difference minus delta0 over its standard error at the constrained maximum-likelihood cell
    probabilities (Tango 1998, Statistics in Medicine 17: 891-908; Fagerland, Lydersen, Laake 2017, section 8.5)."""
    import numpy as np

    a = 2.0 * n
    b = -gained - lost + (2.0 * n - gained + lost) * delta0
    c = -lost * delta0 * (1.0 - delta0)
    p_lost = (np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0)) - b) / (2.0 * a)  # P(lost) under H0
    var = np.maximum(n * (2.0 * p_lost + delta0 * (1.0 - delta0)), 1e-300)
    return (gained - lost - n * delta0) / np.sqrt(var)


def tango_interval(n, gained, lost, confidence: float = 0.95):
    """(low, high): Tango's score interval for the paired difference of proportions (gained - lost) / n, the delta
    values the two-sided score test at 1 - confidence does not reject. Numpy arrays (broadcast) or numbers; the
    statistic falls as delta0 rises, so each bound is found by bisection (64 halvings: to the last bit)."""
    import numpy as np
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    n, gained, lost = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(n, gained, lost))
    point = (gained - lost) / n
    bounds = []
    for end, side in ((-1.0, 1.0), (1.0, -1.0)):  # the low bound lies in [-1, point], the high one in [point, 1]
        out, inside = np.full(n.shape, end), point
        for _ in range(64):
            mid = (out + inside) / 2
            rejected = side * tango_z(n, gained, lost, mid) > z  # mid is beyond the interval on this side
            out, inside = np.where(rejected, mid, out), np.where(rejected, inside, mid)
        bounds.append(np.where(point == end, end, (out + inside) / 2))  # every item lost (gained): the end is -1 (1)
    return bounds[0], bounds[1]


def compare(task: str, metric: str, base: dict, variant: dict, confidence: float = 0.95,
            n_boot: int = N_BOOT, seed: int = 0) -> PairedComparison:
    keys = sorted(set(base) & set(variant))
    diffs = [variant[k] - base[k] for k in keys]
    delta = sum(diffs) / len(diffs) if diffs else math.nan  # no common item: no delta (not 0)
    binary = bool(keys) and all(base[k] in (0.0, 1.0) and variant[k] in (0.0, 1.0) for k in keys)
    gained = sum(1 for k in keys if variant[k] > base[k])
    lost = sum(1 for k in keys if variant[k] < base[k])
    if binary and len(keys) >= 2:
        low, high = (float(x) for x in tango_interval(len(keys), gained, lost, confidence))
        method = "tango"
    elif len(keys) >= 2 and sum(1 for d in diffs if d != 0) < MIN_CHANGED:
        scores = [base[k] for k in keys] + [variant[k] for k in keys]
        span = max(1.0, max(scores)) - min(0.0, min(scores))
        low, high, method = -span, span, "bounds"  # too few changed items to say more than the scores' range
    else:
        low, high, method = bootstrap_ci(diffs, confidence, n_boot, seed)
    return PairedComparison(task, metric, len(keys), delta, low, high, gained, lost,
                            mcnemar_exact_p(gained, lost) if binary else None, confidence, method)


def compare_variant(base_eval, variant_eval, seed: int = 0) -> list[PairedComparison]:
    """Every accuracy task both evaluations scored, on the task's headline metric (perplexity tasks: see
    ``suite.analysis.perplexity``)."""
    out = []
    variant_scores = {s.task: s for s in variant_eval.scores}
    for s in base_eval.scores:
        v = variant_scores.get(s.task)
        bf, vf = base_eval.samples_files.get(s.task), variant_eval.samples_files.get(s.task)
        if v is None or not bf or not vf or v.metric != s.metric or is_perplexity_metric(s.metric):
            continue
        out.append(compare(s.task, s.metric, item_scores(bf, s.metric), item_scores(vf, s.metric), seed=seed))
    return out
