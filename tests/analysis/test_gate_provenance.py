"""suite.analysis.gates.provenance: the metric, the per-item records and the tokenizer a verdict reads are the ones the
run planned and kept, and an honest run (a group's rows under its subtasks' names) is judged as before."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import build_gated_run, run_gate
from suite.analysis.gates.recompute import sha256_file

T1, T2 = "suite_gsm8k", "suite_mmlu"


def rewrite_rows(tmp_path, s: dict, task: str, rename) -> dict:
    """Every variant's ``task`` samples rows given the task field ``rename(row)``, their sha256 recorded again in the
    stage result and the summary (what an honest stage would have written)."""
    for v in s["variants"]:
        f = Path(v["stages"]["evaluate"]["samples_files"][task])
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        f.write_text("".join(json.dumps({**r, "task": rename(r)}) + "\n" for r in rows))
        sha = v["stages"]["evaluate"]["samples_sha256"][task] = sha256_file(f)
        res = tmp_path / "run" / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        data["samples_sha256"][task] = sha
        res.write_text(json.dumps(data))
    return s


def test_a_groups_rows_under_its_subtasks_names_are_judged(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {T2: 0.02}}, tasks=(T2,))
    leaves = ["suite_mmlu_anatomy", "suite_mmlu_astronomy", "suite_mmlu_virology"]
    s = rewrite_rows(tmp_path, s, T2, lambda r: leaves[r["doc_id"] % 3])
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out, out + err


def test_rows_of_another_task_in_a_file_of_its_own_are_refused(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}}, tasks=(T1, T2))
    s = rewrite_rows(tmp_path, s, T1, lambda r: T2)
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and f"holds rows of {T2}" in err and f"not of {T1}" in err, out + err


def test_a_headline_metric_other_than_the_planned_one_names_both(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}})
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["variants"]["fp8"]["evaluate"]["tasks"] == [{"name": T1, "metric": "acc,none"}]
    for v in s["variants"]:  # the summary alone says acc_norm: a cache, not judged (the records say acc)
        for sc in v["stages"]["evaluate"]["scores"]:
            sc["metric"] = "acc_norm,none"
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 0 and "summary.json is not what the run folder's records give" in err, out + err
    for v in s["variants"]:  # the stage results say acc_norm: the plan says acc
        res = tmp_path / "run" / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        for sc in data["scores"]:
            sc["metric"] = "acc_norm,none"
        res.write_text(json.dumps(data))
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "'acc_norm,none', but the run planned suite_gsm8k judged on 'acc,none'" in err, out + err


def plan_sequential(tmp_path, s: dict, spec: dict, records: dict) -> dict:
    """The run's plan and evaluate configs given eval.sequential ``spec`` (each job's config sha256 recorded again, as
    the stage would have), and each variant's evaluate result and summary the sequential records ``records[name]``."""
    import hashlib

    run = tmp_path / "run"
    plan = json.loads((run / "plan.json").read_text())
    for v in s["variants"]:
        vdir = run / "variants" / v["name"]
        config = {**plan["variants"][v["name"]]["evaluate"], "sequential": spec}
        plan["variants"][v["name"]]["evaluate"] = config
        (vdir / "evaluate.config.json").write_text(json.dumps(config))
        data = json.loads((vdir / "evaluate.result.json").read_text())
        data["job"]["config_sha256"] = hashlib.sha256((vdir / "evaluate.config.json").read_bytes()).hexdigest()
        data["sequential"] = v["stages"]["evaluate"]["sequential"] = records[v["name"]]
        (vdir / "evaluate.result.json").write_text(json.dumps(data))
        v["stages"]["evaluate"]["job"] = data["job"]
    (run / "plan.json").write_text(json.dumps(plan))
    return s


def full_record(seed: int, margin) -> dict:
    return {"metric": "acc,none", "margin": margin, "n_items": 300, "seed": seed, "looks_planned": 4,
            "looks_scored": 4, "items_used": 300, "items_saved": 0, "decision": "unjudged", "looks": []}


def test_a_sequential_record_is_held_to_the_planned_looks_and_seed(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}})
    spec = {"looks": 4, "seed": 7, "margins": {}}
    honest = plan_sequential(tmp_path, s, spec, {"bf16": {T1: full_record(7, None)}, "fp8": {T1: full_record(7, None)}})
    code, out, err = run_gate(tmp_path, capsys, honest)
    assert code == 0, out + err  # scored in full as planned: the fixed-size gates judge it
    shopped = plan_sequential(tmp_path, s, spec, {"bf16": {T1: full_record(7, None)}, "fp8": {T1: full_record(8, None)}})
    code, out, err = run_gate(tmp_path, capsys, shopped)
    assert code == 2 and "fp8: evaluate.sequential.suite_gsm8k.seed: 8, but the run planned 7" in err, out + err
