"""Accuracy's dependence on the engine: one variant scored under several engine configurations, item by item.

A score can move with things that are not the model: ``max_num_seqs`` (which requests share a batch, hence which
kernels and reduction orders run), the API-server count, the order of requests. The FP8-KV build of
Qwen2.5-Coder-0.5B scored 0.0933-0.1114 on GSM8K depending on how it was run (studies/2026-12-01-fp8-kv-cache),
a spread twice its cost against BF16. The paired CI of a variant's delta counts item
sampling only; this module measures the engine's share, per task, from two or more recorded evaluations of the
same variant (their lm-eval samples files, as ``suite.analysis.paired`` reads them):

- ``engine_spread``: max - min of the task's headline score across the configurations;
- ``flip_rate``: the share of the items every configuration scored whose score differs between any two of them
  (for 0/1 scores: items answered right under one configuration and wrong under another);
- ``items``: those items (the flip rate's n).

Summary metrics (a contract with ``suite gate``): ``acc.<task>.engine_spread``, ``acc.<task>.flip_rate``,
``acc.<task>.engine_items``, ``acc.<task>.engine_configs`` (how many configurations were compared).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from suite.analysis.paired import is_perplexity_metric, item_scores
from suite.records.evaluate import EvaluateResult


@dataclass
class EngineSpread:
    task: str
    metric: str
    configs: list[str]  # the configurations' labels, in the order given
    scores: list[float]  # the task's headline score under each
    spread: float  # max - min of scores
    items: int  # items every configuration scored
    flipped: int  # of those, items whose score differs between configurations
    flip_rate: float  # flipped / items (NaN without common items)

    def as_dict(self) -> dict:
        return asdict(self)


def task_spread(task: str, metric: str, labelled: list[tuple[str, float, dict]]) -> EngineSpread:
    """``labelled``: (configuration label, headline score, {item: score}) per configuration."""
    common = set.intersection(*(set(items) for _, _, items in labelled)) if labelled else set()
    flipped = sum(1 for k in common if len({items[k] for _, _, items in labelled}) > 1)
    scores = [score for _, score, _ in labelled]
    return EngineSpread(task, metric, [label for label, _, _ in labelled], scores, max(scores) - min(scores),
                        len(common), flipped, flipped / len(common) if common else float("nan"))


def engine_spreads(evaluations: dict[str, object]) -> list[EngineSpread]:
    """Every accuracy task that each evaluation (``{label: EvaluateResult}``, two or more) scored on the same
    headline metric with a samples file; perplexity tasks are left out (no per-item 0/1 score)."""
    if len(evaluations) < 2:
        return []
    results = list(evaluations.items())
    out = []
    for s in results[0][1].scores:
        found = []
        for label, ev in results:
            score = next((x for x in ev.scores if x.task == s.task and x.metric == s.metric), None)
            path = ev.samples_files.get(s.task)
            if score is None or not path:
                break
            found.append((label, score.value, item_scores(path, s.metric)))
        else:
            if not is_perplexity_metric(s.metric):
                out.append(task_spread(s.task, s.metric, found))
    return out


def spread_metrics(spreads: list[EngineSpread], metric_name) -> dict[str, float]:
    """The summary metrics of ``engine_spreads`` (``metric_name``: suite.analysis.summary.metric_name)."""
    m = {}
    for e in spreads:
        key = metric_name("acc", e.task)
        m.update({f"{key}.engine_spread": e.spread, f"{key}.engine_items": float(e.items),
                  f"{key}.engine_configs": float(len(e.configs))})
        if e.items:
            m[f"{key}.flip_rate"] = e.flip_rate
    return m


def add_engine_spread(variants, metric_name) -> list[str]:
    """Per task, how much each variant's score moves with the engine configuration: its main evaluation ('as run')
    beside each of its ``engine_checks`` (``VariantSummary``s), as records and metrics (``metric_name``: the
    summary's). Returns the warnings."""
    warnings = []
    for v in variants:
        v.engine_spread = []
        if (ev := v.result(EvaluateResult)) is None or not v.engine_checks:
            continue
        try:
            found = engine_spreads({"as run": ev, **v.engine_checks})
        except Exception as e:  # noqa: BLE001 - a samples file gone or broken: say so, no metric (the gate refuses)
            warnings.append(f"{v.name}: no engine spread: a samples file cannot be read: {type(e).__name__}: {e}")
            continue
        v.engine_spread = [e.as_dict() for e in found]
        v.metrics.update(spread_metrics(found, metric_name))
    return warnings
