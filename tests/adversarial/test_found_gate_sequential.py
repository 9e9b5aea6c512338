"""Found by the adversarial review: a task's sequential record (``evaluate.sequential``) is taken at its word. A run
made without eval.sequential, every item scored, is given a record claiming an early stop with a seed and a look count
picked afterwards; the fixed-size gates then skip the task and the group-sequential test, run on an item order the
writer chose, passes what the fixed-size gate calls inconclusive. No samples file and no hash is touched."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import build_gated_run, run_gate
from suite.analysis.paired import item_scores
from suite.runtime import sequential as seq

T1 = "suite_gsm8k"
LOOKS = 10
MARGIN = 0.02


def shopped_seed(s: dict) -> int:
    """A seed whose item order lets the sequential test pass at an early look on the run's own per-item records."""
    b = item_scores(s["variants"][0]["stages"]["evaluate"]["samples_files"][T1], "acc,none")
    w = item_scores(s["variants"][1]["stages"]["evaluate"]["samples_files"][T1], "acc,none")
    for seed in range(2000):
        res = seq.run([w[k] - b[k] for k in seq.item_order(b, seed)], MARGIN, LOOKS, n_items=len(b))
        if res.decision == seq.PASS:
            return seed
    pytest.fail("no seed passes (the test's premise)")


def claim_stop(tmp_path, s: dict, seed: int) -> dict:
    """Both variants' evaluate results and summary copies given a sequential record (the variant's 'stopped')."""
    for v in s["variants"]:
        used = 300 if v["is_baseline"] else 30
        rec = {"metric": "acc,none", "margin": MARGIN, "n_items": 300, "seed": seed, "looks_planned": LOOKS,
               "looks_scored": 1, "items_used": used, "items_saved": 300 - used, "decision": "pass", "looks": []}
        res = tmp_path / "run" / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        data["sequential"] = {T1: rec}
        res.write_text(json.dumps(data))
        v["stages"]["evaluate"]["sequential"] = {T1: rec}
        for k in ("looks_scored", "items_used", "items_saved"):
            v["metrics"][f"seq.{T1}.{k}"] = float(rec[k])
    return s


def test_sequential_stop_claimed_on_a_full_evaluation_is_refused(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {T1: MARGIN}}, wrong={T1: [1, 2, 4]})
    assert run_gate(tmp_path, capsys, copy.deepcopy(s))[0] == 3  # honest: the interval straddles 0.02
    code, out, err = run_gate(tmp_path, capsys, claim_stop(tmp_path, s, shopped_seed(s)))
    # expected: a sequential record in a run whose plan has no eval.sequential, or one whose items_used is not the
    # number of items scored, is bad input (2); at the least the verdict is not a pass
    assert code in (2, 3), out + err


@pytest.mark.parametrize("looks", [14, 20])
def test_every_look_count_the_recipe_accepts_can_be_judged(looks):
    from suite.recipe.evalspec import SequentialSpec

    assert SequentialSpec.model_validate({"looks": looks}).looks == looks  # the recipe accepts it
    n = 1319  # GSM8K's test items
    res = seq.run([0.0] * n, MARGIN, looks, n_items=n)
    assert res.decision in (seq.PASS, seq.FAIL, seq.CONTINUE)
