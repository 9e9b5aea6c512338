"""Record files carry schema_version; each migration upgrades one version to the next (suite.records.migrate), and
file names are relative to the run folder on disk and resolved against wherever it is read (suite.records.paths)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.records import migrate
from suite.records.evaluate import EvaluateResult
from suite.records.kvcheck import KVCheckResult
from suite.records.summary import RunSummary, VariantSummary
from suite.stages.registry import EVALUATE, KVCHECK


def evaluation(folder: str) -> EvaluateResult:
    return EvaluateResult(scores=[], results_file=f"{folder}/variants/a/evaluate/lm_eval_results.json",
                          samples_files={"t": f"{folder}/variants/a/evaluate/samples_t.jsonl"}, wall_s=1,
                          engine_load_s=1)


def test_every_migration_has_a_test_and_leads_to_the_current_version():
    assert sorted(migrate.MIGRATIONS) == list(range(migrate.SCHEMA_VERSION))
    assert {f"test_v{n}_to_v{n + 1}" for n in migrate.MIGRATIONS} <= set(globals())


def test_v0_to_v1():
    """Version 0 named files by absolute path: those under the recorded run folder become relative to it; names
    elsewhere (an evaluation cache's copy) stay as they were; a summary's own run_dir is the recorded folder."""
    old = json.loads(evaluation("/old/run").model_dump_json())
    old["samples_files"]["u"] = "/out/eval-cache/k/samples_u.jsonl"
    new = migrate.v0_to_v1(old, "/old/run")
    assert new["results_file"] == "variants/a/evaluate/lm_eval_results.json"
    assert new["samples_files"] == {"t": "variants/a/evaluate/samples_t.jsonl", "u": "/out/eval-cache/k/samples_u.jsonl"}
    summary = {"run_dir": "/old/run", "artifacts": {"report_html": "/old/run/report.html"},
               "variants": [{"name": "a", "evaluate": old,
                                                    "engine_checks": {"x": json.loads(json.dumps(old))}}]}
    up = migrate.v0_to_v1(summary, None)
    assert up["variants"][0]["evaluate"]["samples_files"]["t"] == "variants/a/evaluate/samples_t.jsonl"
    assert up["variants"][0]["engine_checks"]["x"]["results_file"] == "variants/a/evaluate/lm_eval_results.json"
    assert up["artifacts"] == {"report_html": "report.html"}
    assert up["run_dir"] == "/old/run"  # where it was, recorded; readers use where it is


def v1_summary(run: str) -> dict:
    """A version-1 summary.json's data: one field per built-in stage in each variant."""
    ev = json.loads(evaluation(".").model_dump_json())
    ev.update(results_file="variants/a/evaluate/lm_eval_results.json",
              samples_files={"t": "variants/a/evaluate/samples_t.jsonl"})
    kvc = {"kv_scales": "unit", "option": "unit", "options": ["unit"], "num_layers": 4, "num_texts": 1, "tokens": 8,
           "rows": [], "flagged_layers": [3], "wall_s": 2.0}
    return {"schema_version": 1, "suite_version": "x", "recipe_name": "r", "recipe_path": "/r.yaml",
            "recipe_sha256": "0", "recipe": {}, "run_dir": run, "started": "t", "platform": "cpu",
            "variants": [{"name": "a", "is_baseline": True, "model_path": "/m", "quantize": None, "kvcheck": kvc,
                          "evaluate": ev, "benchmark": None, "engine_checks": {"x": ev}}]}


def test_v1_to_v2():
    """A version-1 summary's per-stage variant fields go into ``stages`` by stage name (empty ones left out); the
    engine checks stay by label; a record that is no summary (a stage result, plan.json) is left as it is."""
    old = v1_summary("/old/run")
    new = migrate.v1_to_v2(old, None)
    v = new["variants"][0]
    assert set(v["stages"]) == {KVCHECK, EVALUATE} and v["stages"][KVCHECK] == old["variants"][0]["kvcheck"]
    assert not set(migrate.V1_STAGE_FIELDS) & set(v) and v["engine_checks"] == old["variants"][0]["engine_checks"]
    held = {**old, "variants": [{**old["variants"][0], "evaluate": None, "stages": {"toy": {"files": 1}}}]}
    assert migrate.v1_to_v2(held, None)["variants"][0]["stages"] == {KVCHECK: v["stages"][KVCHECK], "toy": {"files": 1}}
    result = json.loads(evaluation("/r").model_dump_json())
    assert migrate.v1_to_v2(result, None) == result
    plan = {"variants": {"a": {"model_path": "/m", EVALUATE: {}}}, "jobs": []}
    assert migrate.v1_to_v2(plan, None) == plan


def test_a_version_1_summary_file_reads_with_its_results_typed_by_the_stage_registry(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(v1_summary(str(tmp_path))))
    s = RunSummary.read(tmp_path / "summary.json", root=tmp_path)
    v = s.variants[0]
    assert type(v.stages[EVALUATE]) is EvaluateResult and type(v.stages[KVCHECK]) is KVCheckResult
    assert v.result(KVCheckResult).flagged_layers == [3] and v.result(EvaluateResult).samples_files == {
        "t": str(tmp_path / "variants/a/evaluate/samples_t.jsonl")}
    again = json.loads(s.to_json(tmp_path))
    assert again["schema_version"] == migrate.SCHEMA_VERSION == 2 and list(again["variants"][0]["stages"]) == [
        KVCHECK, EVALUATE] and "evaluate" not in again["variants"][0]


def test_a_summary_naming_a_stage_no_registry_holds_is_refused(tmp_path):
    data = v1_summary(str(tmp_path))
    data["variants"][0]["kvcheck"] = None
    data["schema_version"] = migrate.SCHEMA_VERSION
    data["variants"][0]["stages"] = {"no-such-stage": {"x": 1}}
    for k in migrate.V1_STAGE_FIELDS:
        data["variants"][0].pop(k)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="stages: the stage registry: no-such-stage: no stage of that name"):
        RunSummary.read(tmp_path / "summary.json", root=tmp_path)


def test_two_stages_with_one_result_type_are_named_not_guessed():
    ev = evaluation("/r")
    v = VariantSummary(name="a", is_baseline=True, model_path="/m", stages={EVALUATE: ev})
    assert v.result(EvaluateResult) is ev and v.result(KVCheckResult) is None
    check = evaluation("/r")
    v.stages["evaluate-served-check"] = check  # a checking stage's (StageSpec.check_of) is not the evaluation
    assert v.result(EvaluateResult) is ev and v.check_result(EvaluateResult) is check
    v.stages["another-evaluation"] = ev
    with pytest.raises(ValueError, match="stages evaluate, another-evaluation each hold a EvaluateResult"):
        v.result(EvaluateResult)


def test_a_file_without_a_version_is_upgraded_and_one_too_new_refused(tmp_path):
    old = json.loads(evaluation("/old/run").model_dump_json())  # version 0: no schema_version
    (tmp_path / "r.json").write_text(json.dumps(old))
    read = EvaluateResult.read(tmp_path / "r.json", root=tmp_path, recorded="/old/run")
    assert read.samples_files == {"t": str(tmp_path / "variants/a/evaluate/samples_t.jsonl")}
    (tmp_path / "r.json").write_text(json.dumps({**old, "schema_version": migrate.SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match="newer than this suite reads"):
        EvaluateResult.read(tmp_path / "r.json")
    for bad in (-1, "1", True):
        with pytest.raises(ValueError, match="not a version number"):
            migrate.upgrade({"schema_version": bad})


def test_names_are_written_relative_and_read_against_the_folder_where_it_is(tmp_path):
    run = tmp_path / "run"
    s = RunSummary(suite_version="x", recipe_name="r", recipe_path="/r.yaml", recipe_sha256="0", recipe={},
                   run_dir=str(run), started="t", platform="cpu",
                   variants=[VariantSummary(name="a", is_baseline=True, model_path="/m",
                                            stages={EVALUATE: evaluation(str(run))})])
    s.write(run / "summary.json", root=run)
    data = json.loads((run / "summary.json").read_text())
    assert data["schema_version"] == migrate.SCHEMA_VERSION
    assert data["variants"][0]["stages"][EVALUATE]["samples_files"] == {"t": "variants/a/evaluate/samples_t.jsonl"}
    moved = tmp_path / "elsewhere"
    (run / "summary.json").rename(tmp_path / "s.json")
    back = RunSummary.read(tmp_path / "s.json", root=moved)
    assert back.variants[0].result(EvaluateResult).samples_files == {
        "t": str(moved / "variants/a/evaluate/samples_t.jsonl")}


def test_a_name_that_leaves_its_folder_is_refused(tmp_path):
    text = evaluation("/r").to_json(Path("/r")).replace("variants/a/evaluate/samples_t", "../../etc/samples_t")
    with pytest.raises(ValueError, match="leaves the folder"):
        EvaluateResult.from_json(text, root=tmp_path)
