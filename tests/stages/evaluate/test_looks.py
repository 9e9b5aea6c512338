"""eval.sequential's looks in the evaluate stage (suite.stages.evaluate.looks), with a stand-in for lm-eval's
simple_evaluate: it answers the samples it is asked for with the rows lm-eval logs (true doc_id, filter, the metric),
so the loop, the order, the stopping and the records are checked without an engine (the real one runs in
tests/test_sequential_demo.py). The stand-in refuses what lm-eval gets wrong: an empty or unsorted index list."""

from __future__ import annotations

import json

import pytest

from suite.records.evaluate import EngineConfig, EvaluateConfig, EvaluateResult, SequentialConfig, TaskRun
from suite.runtime import sequential as seq
from suite.stages.evaluate import looks
from suite.stages.registry import EVALUATE

SIZES = {"grp": {"grp_a": 60, "grp_b": 50}, "solo": {"solo": 80}}


class StandIn:
    """simple_evaluate's answer: each listed document scored by ``score(leaf, doc_id)``."""

    def __init__(self, score):
        self.score, self.calls = score, []

    def __call__(self, tasks, samples, num_fewshot):
        assert sorted(tasks) == sorted(samples) and all(samples.values())
        assert all(ix == sorted(ix) for ix in samples.values())
        self.calls.append({leaf: list(ix) for leaf, ix in samples.items()})
        rows = {leaf: [{"doc_id": i, "filter": "none", "acc": self.score(leaf, i)} for i in ix]
                for leaf, ix in samples.items()}
        return {"samples": rows, "configs": {}, "task_hashes": {}, "versions": {}}


@pytest.fixture(autouse=True)
def sizes(monkeypatch):
    monkeypatch.setattr(looks, "leaf_sizes", lambda tm, name: SIZES[name])
    monkeypatch.setattr("suite.stages.evaluate.tasks.primary_metric", lambda name, metric=None: "acc,none")


def config(tmp_path, name, **seq_fields) -> EvaluateConfig:
    return EvaluateConfig(engine=EngineConfig(model="m"), tasks=[TaskRun(name="grp", limit=40), TaskRun(name="solo")],
                          data_dir=".", include_path=".", output_dir=str(tmp_path / name),
                          sequential=SequentialConfig(looks=4, seed=3, **seq_fields))


def write_result(tmp_path, name, merged, records) -> str:
    """The stage's files as run() writes them: one samples file per task, and the result."""
    out = tmp_path / name
    out.mkdir(exist_ok=True)
    files = {}
    for task, leaves in {"grp": ["grp_a", "grp_b"], "solo": ["solo"]}.items():
        path = out / f"samples_{task}.jsonl"
        path.write_text("".join(json.dumps({"task": leaf, **r}) + "\n" for leaf in leaves
                                for r in merged["samples"].get(leaf, [])))
        files[task] = str(path)
    res = EvaluateResult(scores=[], results_file="x", samples_files=files, wall_s=0, engine_load_s=0,
                         sequential=records)
    res.write(tmp_path / f"{name}.result.json")
    return str(tmp_path / f"{name}.result.json")


def test_baseline_scores_every_look_in_the_seeded_order(tmp_path):
    ev = StandIn(lambda leaf, i: 1.0)
    merged, scores, records = looks.score_in_looks(config(tmp_path, "base"), None, None, ev)
    assert len(ev.calls) == 4
    # the limit is applied here (lm-eval refuses limit with samples): each leaf's first 40 documents
    items = [("grp_a", i) for i in range(40)] + [("grp_b", i) for i in range(40)]
    scored = [(leaf, i) for c in ev.calls for leaf, ix in c.items() if leaf != "solo" for i in ix]
    assert sorted(scored) == sorted(items) and len(set(scored)) == 80
    per_look = seq.look_items(items, 3, 4)
    for call, part in zip(ev.calls, per_look):
        assert sorted((leaf, i) for leaf, ix in call.items() if leaf != "solo" for i in ix) == sorted(part)
    assert {t: (r.items_used, r.items_saved, r.looks_scored, r.decision) for t, r in records.items()} == {
        "grp": (80, 0, 4, "unjudged"), "solo": (80, 0, 4, "unjudged")}
    assert merged["group_subtasks"] == {"grp": ["grp_a", "grp_b"]}
    assert [(s.task, s.value, s.n) for s in scores] == [("grp", 1.0, 80), ("solo", 1.0, 80)]


def run_pair(tmp_path, variant_score, margins):
    base_ev = StandIn(lambda leaf, i: float(i % 2))
    merged, _, records = looks.score_in_looks(config(tmp_path, "base"), None, None, base_ev)
    path = write_result(tmp_path, "base", merged, records)
    ev = StandIn(variant_score)
    cfg = config(tmp_path, "var", margins=margins, baseline_result=path)
    return ev, *looks.score_in_looks(cfg, None, None, ev)


def test_a_variant_stops_a_decided_task_and_scores_the_others_in_full(tmp_path):
    # grp: the variant equals the baseline (a clear pass at margin 0.3); solo: no margin, scored in full
    ev, merged, scores, records = run_pair(tmp_path, lambda leaf, i: float(i % 2), {"grp": 0.3})
    grp, solo = records["grp"], records["solo"]
    assert grp.decision == "pass" and grp.looks_scored < 4 and grp.items_saved == 80 - grp.items_used > 0
    assert [x["items"] for x in grp.looks] == seq.look_sizes(80, 4)[:grp.looks_scored]
    assert (solo.decision, solo.items_used, solo.looks_scored) == ("unjudged", 80, 4)
    # after the stop the calls hold no item of grp's leaves
    assert all(not set(c) & {"grp_a", "grp_b"} for c in ev.calls[grp.looks_scored:])
    assert next(s for s in scores if s.task == "grp").n == grp.items_used


def test_a_clear_failure_stops_as_a_fail(tmp_path):
    _, _, _, records = run_pair(tmp_path, lambda leaf, i: 0.0, {"grp": 0.05, "solo": 0.05})
    assert {r.decision for r in records.values()} == {"fail"}
    assert all(r.items_used < r.n_items for r in records.values())


def test_a_baseline_scored_in_other_looks_is_refused(tmp_path):
    base_ev = StandIn(lambda leaf, i: 1.0)
    merged, _, records = looks.score_in_looks(config(tmp_path, "base"), None, None, base_ev)
    records = {t: r.model_copy(update={"seed": 4}) for t, r in records.items()}
    path = write_result(tmp_path, "base", merged, records)
    with pytest.raises(ValueError, match="not scored in eval.sequential's 4 looks"):
        looks.score_in_looks(config(tmp_path, "var", margins={"grp": 0.1}, baseline_result=path), None, None,
                             StandIn(lambda leaf, i: 1.0))


def test_task_items_follow_lm_evals_limit():
    assert looks.task_items(TaskRun(name="t", limit=0.5), {"a": 5}) == [("a", i) for i in range(3)]
    assert looks.task_items(TaskRun(name="t", limit=9), {"a": 5, "b": 20}) == \
        [("a", i) for i in range(5)] + [("b", i) for i in range(9)]


def test_the_summary_metrics_of_the_looks(tmp_path):
    from suite.analysis.summary import variant_metrics
    from suite.records.summary import VariantSummary

    _, merged, scores, records = run_pair(tmp_path, lambda leaf, i: float(i % 2), {"grp": 0.3})
    ev = EvaluateResult(scores=scores, results_file="r", wall_s=1, engine_load_s=1, sequential=records)
    m = variant_metrics(VariantSummary(name="v", is_baseline=False, model_path="/m", stages={EVALUATE: ev}), "max")
    g = records["grp"]
    assert (m["seq.grp.looks_scored"], m["seq.grp.items_used"], m["seq.grp.items_saved"]) == (
        g.looks_scored, g.items_used, g.items_saved)
    assert m["seq.solo.items_saved"] == 0 and m["acc.grp"] == next(s.value for s in scores if s.task == "grp")
