"""Every verdict input bound to its job (issue 47, part 3): each stage result records the job that made it (variant,
stage, content key, its config's sha256) and the gate checks it against plan.json. A result made for another variant,
another config or with no key is not judged (exit 2, naming it); every planned (variant, task) is judged or reported
missing, never dropped in silence."""

from __future__ import annotations

import json
import shutil

from conftest import build_gated_run, run_gate

T1, T2 = "suite_gsm8k", "suite_mmlu"


def run(tmp_path, gates=None, wrong=None, tasks=(T1,)) -> dict:
    return build_gated_run(tmp_path, gates or {"max_drop": {T1: 0.02}}, wrong=wrong or {T1: range(1, 60, 3)},
                           tasks=tasks)


def vdir(tmp_path, name):
    return tmp_path / "run" / "variants" / name


def test_the_honest_run_is_judged(tmp_path, capsys):
    code, out, err = run_gate(tmp_path, capsys, run(tmp_path))
    assert code == 1 and "FAILED fp8: max drop" in out, out + err


def test_a_result_pointed_at_the_baselines_records_is_not_judged(tmp_path, capsys):
    """The issue's case: fp8's evaluate result replaced by the baseline's (its samples files and hashes), the
    baseline's evaluate config copied beside it, the summary's copy edited to match: its failing check would pass."""
    s = run(tmp_path)
    for f in ("evaluate.result.json", "evaluate.config.json"):
        shutil.copy(vdir(tmp_path, "bf16") / f, vdir(tmp_path, "fp8") / f)
    s["variants"][1]["stages"]["evaluate"] = json.loads((vdir(tmp_path, "fp8") / "evaluate.result.json").read_text())
    s["variants"][1]["metrics"][f"acc.{T1}"] = s["variants"][0]["metrics"][f"acc.{T1}"]
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "gate: PASS" not in out, out + err
    assert "variants/fp8/evaluate.result.json: job: was made by bf16's evaluate job, not fp8's evaluate" in err, err


def test_a_result_restamped_for_the_variant_but_made_with_the_baselines_config_is_not_judged(tmp_path, capsys):
    """The same forgery with the job stamp rewritten to name fp8 and the copied config's sha256: the config is not the
    one the plan has for fp8 (another model)."""
    s = run(tmp_path)
    for f in ("evaluate.result.json", "evaluate.config.json"):
        shutil.copy(vdir(tmp_path, "bf16") / f, vdir(tmp_path, "fp8") / f)
    res = json.loads((vdir(tmp_path, "fp8") / "evaluate.result.json").read_text())
    res["job"]["variant"] = "fp8"
    (vdir(tmp_path, "fp8") / "evaluate.result.json").write_text(json.dumps(res))
    s["variants"][1]["stages"]["evaluate"] = res
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "variants/fp8/evaluate.config.json: engine.model: differs from fp8's planned evaluate job" \
        in err, out + err


def test_a_config_edited_after_the_result_was_made_is_not_judged(tmp_path, capsys):
    s = run(tmp_path)
    path = vdir(tmp_path, "fp8") / "evaluate.config.json"
    path.write_text(path.read_text().replace("\n", "\n ", 1))
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "variants/fp8/evaluate.config.json: is not the config the evaluate result was made with" \
        in err, out + err


def test_a_result_without_its_key_is_not_judged(tmp_path, capsys):
    s = run(tmp_path)
    path = vdir(tmp_path, "fp8") / "evaluate.result.json"
    res = json.loads(path.read_text())
    del res["job"], res["cache_key"]
    path.write_text(json.dumps(res))
    for fld in ("job", "cache_key"):
        del s["variants"][1]["stages"]["evaluate"][fld]
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "variants/fp8/evaluate.result.json: job: records no job or content key" in err, out + err


def test_a_planned_result_that_is_missing_is_reported(tmp_path, capsys):
    s = run(tmp_path)
    (vdir(tmp_path, "fp8") / "benchmark.result.json").unlink()
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "fp8's planned benchmark job has no result: missing" in err, out + err


def test_a_run_folder_without_its_plan_gets_no_verdict(tmp_path, capsys):
    s = run(tmp_path)
    (tmp_path / "run" / "plan.json").unlink()
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "plan.json: variants: the run's plan is missing" in err, out + err


def drop(s: dict, task: str) -> dict:
    """``task`` removed from summary.json everywhere: its task list, its recipe copy, each variant's scores, metrics
    and paired records."""
    s["tasks"] = [t for t in s["tasks"] if t != task]
    s["recipe"]["eval"]["tasks"] = [t for t in s["recipe"]["eval"]["tasks"] if t["name"] != task]
    for v in s["variants"]:
        ev = v["stages"]["evaluate"]
        ev["scores"] = [sc for sc in ev["scores"] if sc["task"] != task]
        for fld in ("samples_files", "samples_sha256"):
            ev[fld].pop(task, None)
        v["metrics"] = {k: x for k, x in v["metrics"].items() if f".{task}" not in k}
        v["paired"] = [p for p in v["paired"] if p["task"] != task]
    return s


def test_a_task_dropped_from_summary_and_results_with_the_recipe_deleted_does_not_pass(tmp_path, capsys):
    """The issue's case: recipe.yaml deleted, the failing task removed from summary.json and from both stage results,
    `suite gate --policy` with the team's default_max_drop: the plan says the task was to be scored."""
    s = run(tmp_path, gates={"default_max_drop": 0.02}, wrong={T2: range(1, 60, 3)}, tasks=(T1, T2))
    policy = tmp_path / "policy.yaml"
    policy.write_text("default_max_drop: 0.02\n")
    assert run_gate(tmp_path, capsys, s, "--policy", str(policy))[0] == 1
    recipe = (tmp_path / "run" / "recipe.yaml").read_bytes()
    (tmp_path / "run" / "recipe.yaml").unlink()
    s = drop(s, T2)
    for v in s["variants"]:
        path = vdir(tmp_path, v["name"]) / "evaluate.result.json"
        res = json.loads(path.read_text())
        res["scores"] = [sc for sc in res["scores"] if sc["task"] != T2]
        for fld in ("samples_files", "samples_sha256"):
            res[fld].pop(T2, None)
        path.write_text(json.dumps(res))
        v["stages"]["evaluate"] = res
    code, out, err = run_gate(tmp_path, capsys, s, "--policy", str(policy))
    assert code == 2 and "gate: PASS" not in out, out + err
    assert "not a run folder (no recipe.yaml)" in err, err  # the summary is the records': without the recipe, none
    (tmp_path / "run" / "recipe.yaml").write_bytes(recipe)  # the recipe back, the task still dropped from the results
    code, out, err = run_gate(tmp_path, capsys, s, "--policy", str(policy))
    assert code == 2 and "gate: PASS" not in out, out + err
    assert f"variants/fp8/evaluate.result.json: scores: no score for {T2}, which the plan has fp8 evaluate" in err, err
