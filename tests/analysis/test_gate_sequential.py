"""The sequential gate (suite.analysis.gates.sequential) on a task eval.sequential stopped early: the items scored
must be a look's prefix of the seeded order, the test is recomputed from the two samples files at the policy's
margin; fixed-size gates leave the stopped task to it. Real records and a real GateSpec; the Context is built here as
suite.analysis.gate.run builds it."""

from __future__ import annotations

import json

import pytest

from suite.analysis.gates.registry import Context
from suite.analysis.gates.sequential import sequential_gate, stopped_tasks
from suite.recipe import GateSpec
from suite.records.evaluate import EvaluateResult, SequentialTask, TaskScore
from suite.records.summary import VariantSummary
from suite.runtime import sequential as seq
from suite.stages.registry import EVALUATE

N, SEED, LOOKS, TASK = 120, 5, 4, "suite_gsm8k"
KEYS = [(TASK, i) for i in range(N)]


def variant(tmp_path, name, scores: dict, items_used: int) -> VariantSummary:
    f = tmp_path / f"samples_{name}.jsonl"
    f.write_text("".join(json.dumps({"task": t, "doc_id": i, "filter": "none", "acc": s}) + "\n"
                         for (t, i), s in scores.items()))
    rec = SequentialTask(metric="acc,none", margin=0.1, n_items=N, seed=SEED, looks_planned=LOOKS, looks_scored=1,
                         items_used=items_used, items_saved=N - items_used, decision="pass")
    ev = EvaluateResult(scores=[TaskScore(task=TASK, metric="acc,none", value=0.5, n=len(scores))], results_file="r",
                        samples_files={TASK: str(f)}, wall_s=1, engine_load_s=1, sequential={TASK: rec})
    return VariantSummary(name=name, is_baseline=name == "bf16", model_path="/m", stages={EVALUATE: ev})


def judge(tmp_path, variant_score, scored, **policy):
    base_scores = {k: float(k[1] % 3 != 0) for k in KEYS}
    base = variant(tmp_path, "bf16", base_scores, N)
    v = variant(tmp_path, "fp8", {k: variant_score(k, base_scores[k]) for k in scored}, len(scored))
    problems = []
    ctx = Context(None, v, base, None, GateSpec(**policy), [], [], lambda *p: problems.append(p))
    sequential_gate(ctx)
    return ctx.checks, problems


def first(n):
    return seq.item_order(KEYS, SEED)[:n]


def test_a_stopped_pass_is_judged_by_the_sequential_test(tmp_path):
    n = seq.look_sizes(N, LOOKS)[2]  # 90
    checks, problems = judge(tmp_path, lambda k, b: b, first(n), default_max_drop=0.1)
    assert not problems and [c.outcome for c in checks] == ["pass"]
    assert checks[0].gate == f"sequential {TASK} (look 3 of 4, {n} of {N} items)" and checks[0].n == n


def test_a_clear_failure_fails_and_a_stricter_margin_is_inconclusive(tmp_path):
    n = seq.look_sizes(N, LOOKS)[1]
    checks, _ = judge(tmp_path, lambda k, b: 0.0, first(n), non_inferiority_margin={TASK: 0.02})
    assert [c.outcome for c in checks] == ["fail"]
    # equal scores pass at margin 0.1 by look 3, but at 0.001 the same items decide nothing
    checks, _ = judge(tmp_path, lambda k, b: b, first(seq.look_sizes(N, LOOKS)[2]), default_max_drop=0.001)
    assert [c.outcome for c in checks] == ["inconclusive"]


def test_items_that_are_not_the_orders_prefix_are_bad_input(tmp_path):
    n = seq.look_sizes(N, LOOKS)[2]
    picked = first(N)[N - n:]  # as many items as look 3, but the last ones of the order
    checks, problems = judge(tmp_path, lambda k, b: b, picked, default_max_drop=0.1)
    assert not checks and len(problems) == 1 and "not scored" in problems[0][1]


@pytest.mark.parametrize("policy", [{"default_max_relative_drop": 0.05}, {"min_recovery_lower_bound": {TASK: 0.9}}])
def test_a_gate_that_needs_every_item_is_inconclusive_on_a_stopped_task(tmp_path, policy):
    checks, _ = judge(tmp_path, lambda k, b: b, first(seq.look_sizes(N, LOOKS)[2]), default_max_drop=0.1, **policy)
    assert [c.outcome for c in checks] == ["inconclusive"]


def test_a_task_scored_in_full_is_left_to_the_fixed_gates(tmp_path):
    base_scores = {k: 1.0 for k in KEYS}
    v = variant(tmp_path, "fp8", base_scores, N)
    assert stopped_tasks(v) == set()
    assert stopped_tasks(variant(tmp_path, "fp8", dict(list(base_scores.items())[:60]), 60)) == {TASK}
