"""The gate reads each variant's own stage result (issue 40, part 1): samples_files dropped from summary.json change
nothing (the summary judged is the stage results'), dropped from the stage result itself they leave the task without
per-item records; a judged accuracy task without per-item records is inconclusive on a run that recorded per-item
hashes, and judged on its aggregates (as before) on a run made before the field existed."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import STALE, edit_record
from test_gate_recompute import TASK, bf16, build, fp8, gate


def stage_results(tmp_path, s: dict) -> None:
    """variants/<v>/evaluate.result.json as the evaluate stage writes them, from the summary's (untampered) copy."""
    for v in s["variants"]:
        d = tmp_path / "run" / "variants" / v["name"]
        d.mkdir(parents=True, exist_ok=True)
        (d / "evaluate.result.json").write_text(json.dumps(v["stages"]["evaluate"]))


def test_samples_files_deleted_from_the_summary_are_refused(tmp_path, capsys):
    """The attack: the variant's samples_files (and hashes) removed from summary.json, the aggregates raised to the
    baseline's; its stage result still names them."""
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})
    stage_results(tmp_path, s)
    assert gate(tmp_path, capsys, s)[0] == 1
    fp8(s)["stages"]["evaluate"]["samples_files"] = {}
    fp8(s)["stages"]["evaluate"]["samples_sha256"] = {}
    fp8(s)["metrics"][f"acc.{TASK}"] = bf16(s)["metrics"][f"acc.{TASK}"]
    fp8(s)["stages"]["evaluate"]["scores"][0]["value"] = bf16(s)["stages"]["evaluate"]["scores"][0]["value"]
    code, out, err = gate(tmp_path, capsys, s)  # summary.json alone: the stage result still names them
    assert code == 1 and "FAILED fp8: max drop" in out and STALE in err, out + err
    value = bf16(s)["stages"]["evaluate"]["scores"][0]["value"]  # the stage result edited alike: nothing to recompute from

    def drop(d):
        d.update(samples_files={}, samples_sha256={})
        d["scores"][0]["value"] = value
    edit_record(tmp_path / "run", "fp8", "evaluate.result.json", drop)
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 3 and "gate: PASS" not in out and "no per-item records" in out, out + err


def test_the_summary_may_name_the_evaluation_caches_copy_of_the_stages_records(tmp_path, capsys):
    """A stage result that names the evaluation cache's copy of its samples (eval-cache/<key>/, an evaluation reused
    by content) is judged on that copy under the recorded sha256: an edited copy is refused by its hash."""
    import shutil

    s = build(tmp_path, gates={"max_drop": {TASK: 0.05}})
    stage_results(tmp_path, s)
    for v in s["variants"]:
        for task, f in v["stages"]["evaluate"]["samples_files"].items():
            copy = tmp_path / "eval-cache" / v["name"] / Path(f).name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, copy)
            edit_record(tmp_path / "run", v["name"], "evaluate.result.json",
                        lambda d, task=task, copy=copy: d["samples_files"].update({task: str(copy)}))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out, out + err
    copy = tmp_path / "eval-cache" / "fp8" / f"samples_fp8_{TASK}.jsonl"
    copy.write_text(copy.read_text().replace('"acc": 0.0', '"acc": 1.0', 1))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "gate: PASS" not in out and "was changed after the evaluation" in err, out + err


def test_a_summary_hash_that_differs_from_the_stage_result_is_refused(tmp_path, capsys):
    s = build(tmp_path)
    stage_results(tmp_path, s)
    fp8(s)["stages"]["evaluate"]["samples_sha256"][TASK] = "0" * 64
    code, out, err = gate(tmp_path, capsys, s)  # summary.json alone: not read
    assert code == 0 and STALE in err, out + err
    edit_record(tmp_path / "run", "fp8", "evaluate.result.json", lambda d: d["samples_sha256"].update({TASK: "0" * 64}))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and f"fp8: evaluate.samples_files.{TASK}" in err and "0" * 64 in err, out + err


def test_samples_files_the_stage_result_names_missing_are_refused(tmp_path, capsys):
    s = build(tmp_path)
    stage_results(tmp_path, s)
    f = tmp_path / "run" / f"samples_fp8_{TASK}.jsonl"
    f.unlink()
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and str(f) in err and "not in the run folder" in err, out + err


def test_an_unreadable_stage_result_is_refused(tmp_path, capsys):
    s = build(tmp_path)
    stage_results(tmp_path, s)
    (tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json").write_text("{not json")
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "evaluate.result.json" in err and "does not parse" in err, out + err


def test_no_per_item_records_on_a_run_with_hashes_is_inconclusive(tmp_path, capsys):
    """A run made since samples_sha256 existed (the baseline recorded it), but the variant has no per-item records
    (a stand-in): its passing accuracy check cannot be recomputed, so it is inconclusive, not a pass."""
    s = build(tmp_path, gates={"max_drop": {TASK: 0.05}})
    fp8(s)["stages"]["evaluate"]["samples_files"], fp8(s)["stages"]["evaluate"]["samples_sha256"] = {}, {}
    for k in [k for k in fp8(s)["metrics"] if k.startswith(f"acc.{TASK}.")]:
        del fp8(s)["metrics"][k]  # no paired record either: nothing per item
    fp8(s)["paired"] = []
    stage_results(tmp_path, s)  # the stand-in stage wrote none either
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 3 and "gate: INCONCLUSIVE" in out, out + err
    assert "no per-item records: the figures cannot be recomputed" in out, out


def test_a_run_from_before_the_hashes_is_judged_on_its_aggregates(tmp_path, capsys):
    """The old behaviour, for a summary made before samples_sha256 existed: no per-item records anywhere, no hashes
    anywhere; the gate judges its aggregates (checked against each other) and passes."""
    s = build(tmp_path, gates={"max_drop": {TASK: 0.05}})
    for v in s["variants"]:
        v["stages"]["evaluate"]["samples_files"], v["stages"]["evaluate"]["samples_sha256"] = {}, {}
        for k in [k for k in v["metrics"] if k.startswith(f"acc.{TASK}.")]:
            del v["metrics"][k]
        v["paired"] = []
    stage_results(tmp_path, s)  # the stage results of that time had none either
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out, out + err


def test_the_reports_verdict_uses_the_trusted_recipe(tmp_path, capsys):
    """recipe_verdict takes the gates as `suite gate` does: an edited recipe.yaml (its sha256 no longer the recorded
    one) or loosened gates in the summary's copy give "no verdict: <why>", never a PASS on the summary's own gates."""
    from suite.analysis.load import load_summary
    from suite.outputs.report import recipe_verdict

    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(s))
    assert recipe_verdict(load_summary(str(run)), run).outcome == "fail"
    s["recipe"]["gates"] = {"default_max_drop": 1.0}
    (run / "summary.json").write_text(json.dumps(s))
    got = recipe_verdict(load_summary(str(run)), run)
    assert got.outcome == "bad input" and got.missing[0].split(": recipe.gates: ")[1].startswith("no verdict: "), got
    (run / "recipe.yaml").write_text((run / "recipe.yaml").read_text() + "\n# edited\n")
    got = recipe_verdict(load_summary(str(run)), run)
    assert got.outcome == "bad input" and "no verdict: " in got.missing[0] and "recipe_sha256" in got.missing[0], got
