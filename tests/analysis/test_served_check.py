"""The served check (suite.analysis.served_check): a served evaluation's first items against the in-process engine's,
from recorded per-item files (lm-eval's samples rows), and what the accuracy gates make of a disagreement."""

from __future__ import annotations

import json

import pytest

from conftest import build_gated_run
from suite.analysis.gates.recompute import sha256_file
from suite.analysis.served_check import CHECK_VERSION, LL_ATOL, add_served_check, compare_task, served_agreement
from suite.analysis.summary import metric_name
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.stages.registry import SERVED_CHECK

TASK = "suite_gsm8k"


def _gen_rows(n, answer=lambda i: str(i), score=lambda i: float(i % 2), text=lambda i: f"so the answer is {i}"):
    """Generation rows as lm-eval writes them: one per (doc_id, filter), the extracted answer in filtered_resps."""
    return [{"task": TASK, "doc_id": i, "filter": f, "prompt_hash": f"h{i}", "exact_match": score(i),
             "resps": [[text(i)]], "filtered_resps": [answer(i)]}
            for i in range(n) for f in ("strict-match", "flexible-extract")]


def _ll_rows(n, ll=lambda i, c: -1.0 - c - i / 10):
    """Loglikelihood rows: four choices, each (log p, is_greedy)."""
    return [{"task": "mmlu_x", "doc_id": i, "filter": "none", "prompt_hash": f"p{i}", "acc": float(i % 2 == 0),
             "resps": [[[ll(i, c), c == 0]] for c in range(4)], "filtered_resps": [[ll(i, c), c == 0] for c in range(4)]}
            for i in range(n)]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_identical_items_agree_and_only_the_checked_items_are_compared(tmp_path):
    served = _write(tmp_path / "served.jsonl", _gen_rows(50))
    check = _write(tmp_path / "check.jsonl", _gen_rows(20))  # the first 20 items, as eval.served_check_items: 20
    r = compare_task(TASK, "exact_match,strict-match", served, check, exact=True)
    assert (r["items"], r["disagree"], r["unmatched"], r["differing"]) == (20, 0, 0, [])
    assert r["version"] == CHECK_VERSION and r["exact"] and r["ll_atol"] == LL_ATOL


def test_a_different_answer_is_named_with_both_answers(tmp_path):
    served = _write(tmp_path / "served.jsonl", _gen_rows(20))
    other = _gen_rows(20, answer=lambda i: "7" if i == 3 else str(i), text=lambda i: f"so the answer is {7 if i == 3 else i}")
    check = _write(tmp_path / "check.jsonl", other)
    r = compare_task(TASK, "exact_match,strict-match", served, check, exact=True)
    assert r["disagree"] == 1 and r["differing"][0]["doc_id"] == 3
    assert "['3'] served" in r["differing"][0]["what"] and "['7'] in-process" in r["differing"][0]["what"]
    # scores only (no eval.deterministic): the same score with another text is no disagreement
    assert compare_task(TASK, "exact_match,strict-match", served, check, exact=False)["disagree"] == 0
    other_score = _gen_rows(20, score=lambda i: 1.0 - (i % 2) if i == 4 else float(i % 2))
    r = compare_task(TASK, "exact_match,strict-match", served, _write(tmp_path / "c2.jsonl", other_score), exact=False)
    assert r["disagree"] == 1 and r["differing"][0]["what"] == "score 0.0 served, 1.0 in-process"


def test_loglikelihoods_agree_within_the_tolerance_and_not_beyond(tmp_path):
    served = _write(tmp_path / "served.jsonl", _ll_rows(10))
    near = _write(tmp_path / "near.jsonl", _ll_rows(10, ll=lambda i, c: -1.0 - c - i / 10 + LL_ATOL / 2))
    far = _write(tmp_path / "far.jsonl", _ll_rows(10, ll=lambda i, c: -1.0 - c - i / 10 + (0.03 if i == 5 else 0)))
    assert compare_task("mmlu_x", "acc,none", served, near, exact=True)["disagree"] == 0
    r = compare_task("mmlu_x", "acc,none", served, far, exact=True)
    assert r["disagree"] == 1 and r["differing"][0]["doc_id"] == 5 and "filtered_resps" in r["differing"][0]["what"]
    assert compare_task("mmlu_x", "acc,none", served, far, exact=False)["disagree"] == 0  # the same answers' scores


def test_another_prompt_does_not_pair_and_a_missing_item_is_counted_apart(tmp_path):
    served = _write(tmp_path / "served.jsonl", _gen_rows(10))
    rows = _gen_rows(12)
    rows[0]["prompt_hash"] = "another"
    r = compare_task(TASK, "exact_match,strict-match", served, _write(tmp_path / "check.jsonl", rows), exact=False)
    assert r["items"] == 10 and r["unmatched"] == 2 and r["disagree"] == 1
    assert r["differing"][0]["what"] == "different prompts (the items do not pair)"


def test_exactness_follows_the_checks_engine(tmp_path):
    served_file = _write(tmp_path / "served.jsonl", _gen_rows(5))
    check_file = _write(tmp_path / "check.jsonl", _gen_rows(5, text=lambda i: f"answer: {i}"))
    ev = lambda f, inv: EvaluateResult(scores=[TaskScore(task=TASK, metric="exact_match,strict-match", value=0.4)],
                                       samples_files={TASK: str(f)}, results_file="r", wall_s=1, engine_load_s=1,
                                       batch_invariant=inv)
    (loose,) = served_agreement(ev(served_file, None), ev(check_file, False))
    (exact,) = served_agreement(ev(served_file, True), ev(check_file, True))
    assert (loose["exact"], loose["disagree"]) == (False, 0) and (exact["exact"], exact["disagree"]) == (True, 5)


def _gated(tmp_path, check_wrong=()):
    """A finished run (conftest.build_gated_run) whose variant was scored served, with its served check: the first
    40 items of the variant's samples again, items ``check_wrong`` scored otherwise."""
    from suite.analysis.derive import summarize

    tmp_path.mkdir(parents=True, exist_ok=True)
    build_gated_run(tmp_path, {"max_drop": {TASK: 0.05}}, wrong={TASK: ()}, n=300, tasks=(TASK,))
    s = summarize(tmp_path / "run")
    fp8 = s.variants[1]
    evaluation = fp8.result(EvaluateResult)
    rows = [json.loads(line) for line in open(evaluation.samples_files[TASK])][:40]
    for r in rows:
        if r["doc_id"] in check_wrong:
            r["acc"] = 1.0 - r["acc"]
    check = _write(tmp_path / "check.jsonl", rows)
    fp8.stages[SERVED_CHECK] = evaluation.model_copy(update={"samples_files": {TASK: str(check)},
                                                             "samples_sha256": {TASK: sha256_file(check)}})
    return s


def _gate(s):
    from suite.analysis.gate import GateConfig, run
    from suite.recipe import GateSpec

    return run(GateConfig(s, GateSpec.model_validate({"max_drop": {TASK: 0.05}})))


def test_an_agreeing_check_leaves_the_pass_and_a_disagreeing_one_makes_it_inconclusive(tmp_path):
    s = _gated(tmp_path / "agree")
    (said,) = add_served_check(s.variants, metric_name)  # no eval.deterministic: the scores compared, and said so
    assert said.startswith("fp8: served check: scores compared only")
    fp8 = s.variants[1]
    assert fp8.metrics[f"acc.{TASK}.served_check_items"] == 40 and fp8.metrics[f"acc.{TASK}.served_check_disagree"] == 0
    assert _gate(s).outcome == "pass"

    s = _gated(tmp_path / "disagree", check_wrong=(4,))
    warnings = add_served_check(s.variants, metric_name)
    assert any(f"fp8: served check: {TASK} item {TASK}/4: score" in w for w in warnings), warnings
    result = _gate(s)
    assert result.outcome == "inconclusive", result
    (c,) = [c for c in result.checks if c.variant == "fp8"]
    assert "disagree with the in-process engine on 1 of 40 checked items" in c.reason


def test_a_check_without_a_comparison_is_never_a_pass(tmp_path):
    s = _gated(tmp_path)
    check = s.variants[1].stages[SERVED_CHECK]
    s.variants[1].stages[SERVED_CHECK] = check.model_copy(update={"samples_files": {}, "samples_sha256": {}})
    assert add_served_check(s.variants, metric_name) == [f"fp8: served check: {TASK}: not compared (no per-item "
                                                         "records on one side): its accuracy gates are inconclusive"]
    (c,) = [c for c in _gate(s).checks if c.variant == "fp8"]  # the task not compared: no figure, no pass
    assert c.outcome == "inconclusive" and "has no comparison" in c.reason


def test_a_checks_records_gone_or_changed_are_bad_input(tmp_path):
    s = _gated(tmp_path)
    path = s.variants[1].stages[SERVED_CHECK].samples_files[TASK]
    with open(path, "a") as fh:  # changed after the check recorded its sha256
        fh.write(json.dumps({"task": TASK, "doc_id": 999, "filter": "none", "acc": 1.0}) + "\n")
    add_served_check(s.variants, metric_name)
    result = _gate(s)
    assert result.outcome == "bad input" and any(f"fp8: served_check.samples_files.{TASK}" in p for p in result.missing)
    s.variants[1].stages[SERVED_CHECK].samples_files[TASK] = str(tmp_path / "gone.jsonl")
    warnings = add_served_check(s.variants, metric_name)
    assert any("fp8: no served check: a samples file cannot be read" in w for w in warnings), warnings
    assert _gate(s).outcome == "bad input"


def test_the_checks_evaluation_is_never_filed_as_the_variants():
    # the served check's result is an EvaluateResult of the first items only: filed under its own stage, it must not
    # replace the variant's evaluation (what its gates judge), nor be reported as the variant's scores
    from suite.plan.results import evaluation_of, record
    from suite.records.summary import VariantSummary
    from suite.stages.registry import EVALUATE

    main = EvaluateResult(scores=[TaskScore(task=TASK, metric="exact_match,strict-match", value=0.25, n=1319)],
                          results_file="r.json", wall_s=1, engine_load_s=1)
    check = EvaluateResult(scores=[TaskScore(task=TASK, metric="exact_match,strict-match", value=1.0, n=20)],
                           results_file="c.json", wall_s=1, engine_load_s=1)
    vs = VariantSummary(name="fp8", is_baseline=False, model_path="m")
    record(vs, EVALUATE, main)
    record(vs, SERVED_CHECK, check)
    assert vs.stages[EVALUATE] is main and vs.stages[SERVED_CHECK] is check
    assert evaluation_of(SERVED_CHECK, check) is None and evaluation_of(EVALUATE, main) is main
