"""The served check: a served evaluation's first items against the in-process engine's, item by item.

``eval.engine: served`` scores a variant on the benchmark's ``vllm serve``; the stage ``evaluate-served-check``
scores the first ``eval.served_check_items`` rows of each task again with lm-eval's in-process vLLM engine (the
default ``eval.engine: vllm``). Per item (task, doc_id, the headline metric's filter), from both samples files:

- the prompt (``prompt_hash``, where both rows have one): another prompt means the items do not pair;
- the score (the headline metric's value);
- under ``eval.deterministic`` (the check's engine ran batch-invariant): also the responses, raw (``resps``) and
  filtered (``filtered_resps``: the extracted answer), texts exactly and loglikelihoods within ``LL_ATOL`` nats.
  Without it the batch a request is computed in moves greedy texts and loglikelihoods (docs/02), so the check cannot
  be exact: it compares the scores only and says so (``exact: false``).

One record per task (``VariantSummary.served_agreement``, ``CHECK_VERSION``), the summary metrics
``acc.<task>.served_check_items`` and ``acc.<task>.served_check_disagree`` (which the accuracy gates read: a
disagreement makes them inconclusive), and one warning line per disagreeing item (the first ``SHOWN`` of a task).
"""

from __future__ import annotations

import math
from pathlib import Path

from suite.analysis.paired import samples_rows
from suite.records.evaluate import EvaluateResult

CHECK_VERSION = 1
# loglikelihoods may differ by this many nats and still agree (exact mode): float32 rounding between two prefill
# shapes is ~1e-6 relative; a BF16 step of a logit is ~0.03 nats, so a kernel or batch difference is well above it
LL_ATOL = 1e-3
SHOWN = 5  # disagreeing items named per task (the record and the warnings); the count covers all
TEXT_SHOWN = 80  # characters of an answer shown


def _rows(path: str | Path, filt: str, keep: set | None = None) -> dict[tuple[str, int], dict]:
    """{(subtask, doc_id): row} of one samples file's rows for the filter ``filt`` (only the keys in ``keep``)."""
    out = {}
    for _, row in samples_rows(path):
        if row.get("filter", "none") != filt:
            continue
        key = (str(row.get("task", "")), int(row["doc_id"]))
        if keep is None or key in keep:
            out[key] = row
    return out


def same(a, b, atol: float = LL_ATOL) -> bool:
    """Equal responses: the same structure, texts and flags equal, numbers within ``atol``."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, atol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=atol) or (a != a and b != b)
    return a == b


def _shown(x) -> str:
    text = repr(x)
    return text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + "..."


def item_difference(served: dict, checked: dict, name: str, exact: bool) -> str | None:
    """What differs between two rows of one item (None: they agree)."""
    if served.get("prompt_hash") and checked.get("prompt_hash") and served["prompt_hash"] != checked["prompt_hash"]:
        return "different prompts (the items do not pair)"
    a, b = served.get(name), checked.get(name)
    if a != b and not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b)):
        return f"score {a} served, {b} in-process"
    if exact:
        for field in ("filtered_resps", "resps"):  # where both rows keep it (an archived items file has no resps)
            if field in served and field in checked and not same(served[field], checked[field]):
                return f"{field} {_shown(served.get(field))} served, {_shown(checked.get(field))} in-process"
    return None


def compare_task(task: str, metric: str, served_file: str | Path, check_file: str | Path, exact: bool) -> dict:
    """The check of one task: the items both scored, those that disagree (the first ``SHOWN``, with what differs)."""
    name, _, filt = metric.partition(",")
    checked = _rows(check_file, filt or "none")
    served = _rows(served_file, filt or "none", keep=set(checked))
    common = sorted(set(checked) & set(served))
    differing = [(k, why) for k in common if (why := item_difference(served[k], checked[k], name, exact))]
    return {"version": CHECK_VERSION, "task": task, "metric": metric, "exact": exact,
            "ll_atol": LL_ATOL if exact else None, "items": len(common), "disagree": len(differing),
            "unmatched": len(set(checked) - set(served)),
            "differing": [{"subtask": k[0], "doc_id": k[1], "what": why} for k, why in differing[:SHOWN]]}


def served_agreement(served, check) -> list[dict]:
    """One record per task both evaluations scored with a samples file (``served``, ``check``: EvaluateResults)."""
    exact = bool(check.batch_invariant)
    out = []
    for s in check.scores:
        if s.task in served.samples_files and s.task in check.samples_files:
            out.append(compare_task(s.task, s.metric, served.samples_files[s.task], check.samples_files[s.task], exact))
    return out


def agreement_warnings(variant: str, records: list[dict]) -> list[str]:
    """One line per disagreeing item shown, and what the check could not be."""
    lines = []
    for r in records:
        for d in r["differing"]:
            lines.append(f"{variant}: served check: {r['task']} item {d['subtask']}/{d['doc_id']}: {d['what']}: its "
                         "accuracy gates are inconclusive (fix: score with eval.engine: vllm, or find why the server "
                         "scores it otherwise)")
        if r["disagree"] > len(r["differing"]):
            lines.append(f"{variant}: served check: {r['task']}: {r['disagree'] - len(r['differing'])} more "
                         "disagreeing items (served_agreement in summary.json)")
        if not r["items"]:
            lines.append(f"{variant}: served check: {r['task']}: no item scored both ways, nothing was checked")
    if records and not records[0]["exact"]:
        lines.append(f"{variant}: served check: scores compared only: without eval.deterministic the batch moves "
                     "greedy texts and loglikelihoods, so responses cannot be held equal")
    return lines


def add_served_check(variants, metric_name) -> list[str]:
    """Each variant's served check (its checking stage's ``EvaluateResult`` against its served evaluation) as records,
    metrics and warnings (``metric_name``: the summary's). Returns the warnings."""
    warnings = []
    for v in variants:
        v.served_agreement = []
        evaluation, check = v.result(EvaluateResult), v.check_result(EvaluateResult)
        if evaluation is None or check is None:
            continue
        try:
            records = served_agreement(evaluation, check)
        except Exception as e:  # noqa: BLE001 - a samples file gone or broken: say so, no metric (the gate says why)
            warnings.append(f"{v.name}: no served check: a samples file cannot be read: {type(e).__name__}: {e}")
            continue
        v.served_agreement = records
        for r in records:
            key = metric_name("acc", r["task"])
            v.metrics.update({f"{key}.served_check_items": float(r["items"]),
                              f"{key}.served_check_disagree": float(r["disagree"])})
        warnings += agreement_warnings(v.name, records)
        compared = {r["task"] for r in records}
        warnings += [f"{v.name}: served check: {sc.task}: not compared (no per-item records on one side): its "
                     "accuracy gates are inconclusive" for sc in evaluation.scores if sc.task not in compared]
    return warnings
