"""Adversarial review of `suite gate` (issues 40/41): an attacker who can write the run folder but not the team's
recipe file or the CI secret. Each test builds a run the way `suite run` writes one (samples files with their sha256,
stage result files, recipe.yaml with its recorded hash, summary derived from them), checks the honest verdict, then
makes one edit. xfail(strict) = a hole that still gets through; plain = a defence that holds."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import STALE, build_gated_run, plan_run, run_gate, write_run_recipe
from suite.stages.registry import ENGINE_CHECKS
from suite import cli
from suite.analysis.gates.recompute import sha256_file

T1, T2 = "suite_gsm8k", "suite_mmlu"


# a finished run as `suite run` writes one (conftest.build_gated_run), and `suite gate` on it
build, gate = build_gated_run, run_gate


def team_recipe(tmp_path, s) -> str:
    """The team's own copy of the recipe (byte-identical to the one the run was made from)."""
    p = tmp_path / "team-recipe.yaml"
    p.write_bytes((tmp_path / "run" / "recipe.yaml").read_bytes())
    return str(p)


def fp8(s):
    return s["variants"][1]


def bf16(s):
    return s["variants"][0]


def drop_task(s, task):
    """Summary-only edit: the task removed from summary.tasks and from the summary's recipe copy (recipe.yaml,
    its hash and every samples file untouched)."""
    s["tasks"] = [t for t in s["tasks"] if t != task]
    s["recipe"]["eval"]["tasks"] = [t for t in s["recipe"]["eval"]["tasks"] if t["name"] != task]
    return s


# ---------------------------------------------------------------------------------------------------------------
# HOLE 1: the run's structure (tasks, variants) is read from summary.json's recipe copy, which is never compared with
# the trusted recipe (recipe.yaml under its hash, or --recipe): a failing task is dropped by editing summary.json only.

FAIL_T2 = {"default_max_drop": 0.02}
WRONG_T2 = {T2: range(1, 90, 3)}  # 30 items lost on mmlu: drop 0.1


def test_failing_task_dropped_from_summary_only_is_refused(tmp_path, capsys):
    s = build(tmp_path, FAIL_T2, wrong=WRONG_T2, tasks=(T1, T2))
    assert gate(tmp_path, capsys, copy.deepcopy(s))[0] == 1
    code, out, err = gate(tmp_path, capsys, drop_task(s, T2))
    assert code != 0, out + err


def test_failing_task_dropped_from_summary_only_is_refused_with_team_recipe(tmp_path, capsys):
    s = build(tmp_path, FAIL_T2, wrong=WRONG_T2, tasks=(T1, T2))
    rec = team_recipe(tmp_path, s)
    assert gate(tmp_path, capsys, copy.deepcopy(s), "--recipe", rec)[0] == 1
    code, out, err = gate(tmp_path, capsys, drop_task(s, T2), "--recipe", rec)
    assert code != 0, out + err


def test_failing_task_dropped_is_caught_by_verify(tmp_path, capsys, monkeypatch):
    """--verify: the summary is signed, so the same edit is refused."""
    from suite.outputs import manifest

    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    s = build(tmp_path, FAIL_T2, wrong=WRONG_T2, tasks=(T1, T2))
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    manifest.write(tmp_path / "run", s["recipe_sha256"], "k" * 32)
    code, out, err = gate(tmp_path, capsys, drop_task(s, T2), "--verify")
    assert code == 2 and "changed since the run was signed" in err, out + err


def test_failing_variant_dropped_from_summary_only_is_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.02}}, wrong={T1: range(1, 90, 3)})
    # a second, passing variant: the run keeps a variant to judge
    good = copy.deepcopy(fp8(s))
    good["name"] = "fp8b"
    good["stages"]["benchmark"].pop("job", None)  # its own jobs (plan_run below stamps them), not fp8's or bf16's
    ev = json.loads(json.dumps(bf16(s)["stages"]["evaluate"]))
    ev.pop("job", None)
    # its own per-item records (the baseline's answers on every item, its own file), as its evaluate stage writes them
    vdir = tmp_path / "run" / "variants" / "fp8b"
    vdir.mkdir(parents=True)
    own = vdir / f"samples_{T1}.jsonl"
    own.write_text(open(ev["samples_files"][T1]).read().replace("bf16 answer", "fp8b answer"))
    ev["samples_files"][T1], ev["samples_sha256"][T1] = str(own), sha256_file(own)
    (vdir / "evaluate.result.json").write_text(json.dumps(ev))
    good["stages"]["evaluate"] = ev
    good["metrics"] = {**good["metrics"], f"acc.{T1}": bf16(s)["metrics"][f"acc.{T1}"]}
    good["paired"] = []
    for k in list(good["metrics"]):
        if ".delta" in k or "items_" in k:
            del good["metrics"][k]
    s["variants"].append(good)
    s["recipe"]["variants"].append({**s["recipe"]["variants"][0], "name": "fp8b"})
    s = plan_run(tmp_path / "run", write_run_recipe(tmp_path / "run", s))  # the run planned fp8b too
    assert gate(tmp_path, capsys, copy.deepcopy(s))[0] == 1
    s["variants"] = [v for v in s["variants"] if v["name"] != "fp8"]
    s["recipe"]["variants"] = [v for v in s["recipe"]["variants"] if v["name"] != "fp8"]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


# ---------------------------------------------------------------------------------------------------------------
# HOLE 2: inconclusive -> pass by editing summary.json figures the gate reads without checking them against a record
# (stability flag, throughput intervals, engine spread, the paired record of a drop gate). No hash is touched.

TPUT = {"min_throughput_gain": 1.2}


def test_honest_straddling_and_unstable_runs_are_inconclusive(tmp_path, capsys):
    s = build(tmp_path, TPUT, var_reps=(119.0, 121.0, 123.0))
    assert gate(tmp_path, capsys, s)[0] == 3
    s = build(tmp_path, TPUT, base_reps=(27.0, 361.0, 100.0), var_reps=(150.0, 151.0, 149.0))
    assert gate(tmp_path, capsys, s)[0] == 3


def test_narrowed_ratio_interval_is_refused(tmp_path, capsys):
    s = build(tmp_path, TPUT, var_reps=(119.0, 121.0, 123.0))  # stable; ratio 1.21, interval [1.169, 1.252]
    assert gate(tmp_path, capsys, copy.deepcopy(s))[0] == 3
    m = fp8(s)["metrics"]
    m["tput.output_tok_s.ratio.ci_low"] = m["tput.output_tok_s.ratio"]
    m["tput.output_tok_s.ratio.ci_high"] = m["tput.output_tok_s.ratio"]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


def test_unstable_point_marked_stable_is_refused(tmp_path, capsys):
    s = build(tmp_path, TPUT, base_reps=(27.0, 361.0, 100.0), var_reps=(150.0, 151.0, 149.0))
    for w in (bf16(s), fp8(s)):
        w["metrics"]["tput.stable"] = 1.0
    m = fp8(s)["metrics"]
    m["tput.output_tok_s.ratio.ci_low"] = m["tput.output_tok_s.ratio.ci_high"] = m["tput.output_tok_s.ratio"]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


def test_interval_invented_for_one_repetition_is_refused(tmp_path, capsys):
    s = build(tmp_path, TPUT, base_reps=(100.0,), var_reps=(150.0,))
    assert gate(tmp_path, capsys, copy.deepcopy(s))[0] == 3
    m = fp8(s)["metrics"]
    m["tput.output_tok_s.ratio.ci_low"] = m["tput.output_tok_s.ratio.ci_high"] = m["tput.output_tok_s.ratio"]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


def with_engine_check(tmp_path, s, wrong_under_check):
    """eval.engine_check in the recipe, each variant scored again under it (its own samples file, as the stage writes
    it; the variant also wrong on ``wrong_under_check[name]`` there) and the engine spread derived as the summary does."""
    from suite.analysis.engine_spread import add_engine_spread
    from suite.analysis.summary import metric_name
    from suite.records.summary import RunSummary

    s["recipe"]["eval"]["engine_check"] = {"max_num_seqs": [1]}
    for v in s["variants"]:
        d = tmp_path / "run" / "variants" / v["name"] / "check"
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"samples_{T1}.jsonl"
        w = set(wrong_under_check.get(v["name"], ()))
        base_rows = [json.loads(line) for line in open(v["stages"]["evaluate"]["samples_files"][T1])]
        rows = [{**r, "acc": 0.0 if r["doc_id"] in w else r["acc"], "resps": [[f"{v['name']} check {r['doc_id']}"]]}
                for r in base_rows]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        ev = copy.deepcopy(v["stages"]["evaluate"])
        ev.pop("job", None), ev.pop("cache_key", None)  # its own job (plan_run stamps it), not the evaluation's
        ev["scores"][0]["value"] = sum(r["acc"] for r in rows) / len(rows)
        ev["samples_files"], ev["samples_sha256"] = {T1: str(f)}, {T1: sha256_file(f)}
        v["engine_checks"] = {"max_num_seqs=1": ev}
    summ = RunSummary.model_validate(s)
    add_engine_spread(summ.variants, metric_name)
    d = write_run_recipe(tmp_path / "run", summ.model_dump(mode="json"))
    for v in d["variants"]:  # each check's result as its stage writes it, planned and stamped
        v["stages"][ENGINE_CHECKS[0]] = v["engine_checks"]["max_num_seqs=1"]
    d = plan_run(tmp_path / "run", d)
    for v in d["variants"]:
        del v["stages"][ENGINE_CHECKS[0]]
    return d


def test_engine_spread_removed_is_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.05}})
    s = with_engine_check(tmp_path, s, {"fp8": range(1, 180, 3)})  # fp8 loses 60 items (0.2) under the check
    assert fp8(s)["metrics"][f"acc.{T1}.engine_spread"] == pytest.approx(0.2)
    assert gate(tmp_path, capsys, copy.deepcopy(s))[0] == 3
    del fp8(s)["metrics"][f"acc.{T1}.engine_spread"]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


def test_engine_checks_removed_are_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.05}})
    s = with_engine_check(tmp_path, s, {"fp8": range(1, 180, 3)})
    for v in s["variants"]:
        v["engine_checks"] = {}
        for k in [k for k in v["metrics"] if k.startswith(f"acc.{T1}.") and ("engine" in k or "flip" in k)]:
            del v["metrics"][k]
    code, out, err = gate(tmp_path, capsys, s)  # summary.json alone: the check results are still in the folder
    assert code == 3 and STALE in err, out + err
    for v in s["variants"]:  # the check results themselves removed: planned jobs without a result
        (tmp_path / "run" / "variants" / v["name"] / f"{ENGINE_CHECKS[0]}.result.json").unlink()
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and f"planned {ENGINE_CHECKS[0]} job has no result" in err, out + err


def test_paired_record_removed_is_refused(tmp_path, capsys):
    # drop 0.04 (12 items of 300), limit 0.05: its interval straddles the limit
    s = build(tmp_path, {"max_drop": {T1: 0.05}}, wrong={T1: range(1, 36, 3)})
    code, out, err = gate(tmp_path, capsys, copy.deepcopy(s))
    assert code == 3, out + err
    fp8(s)["paired"] = []
    for k in [k for k in fp8(s)["metrics"] if k.startswith(f"acc.{T1}.") and ("delta" in k or "items_" in k)]:
        del fp8(s)["metrics"][k]
    code, out, err = gate(tmp_path, capsys, s)
    assert code != 0, out + err


# ---------------------------------------------------------------------------------------------------------------
# HOLE 3 (with --verify): tracking.json is outside the manifest and summary.json is signed without its tracking
# state, yet the gate writes its verdict (and registers candidates) wherever that state points. A signed passing run
# whose tracking.json names another (failing) run's MLflow ids tags that run gate.result=pass.


class _FakeClient:
    def __init__(self):
        self.tags = []

    def set_tag(self, run_id, k, v):
        self.tags.append((run_id, k, v))


def test_verified_pass_cannot_be_written_onto_another_mlflow_run(tmp_path, capsys, monkeypatch):
    from suite.outputs import manifest, mlflow as suite_mlflow

    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    s = build(tmp_path, {"max_drop": {T1: 0.05}})
    s["tracking"] = {"uri": "http://mlflow.team", "experiment": "e", "experiment_id": "1", "parent_run_id": "A",
                     "variant_run_ids": {"bf16": "A-bf16", "fp8": "A-fp8"}}
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(s))
    manifest.write(run, s["recipe_sha256"], "k" * 32)
    (run / "tracking.json").write_text(json.dumps({"tracking": {**s["tracking"], "parent_run_id": "B",
                                                               "variant_run_ids": {"fp8": "B-fp8-FAILED"}}}))
    client = _FakeClient()
    monkeypatch.setattr(suite_mlflow, "client_for", lambda uri: client)
    code = cli.main(["gate", str(run), "--verify"])
    capsys.readouterr()
    assert code == 0
    assert ("B-fp8-FAILED", "gate.result", "pass") not in client.tags, client.tags


# ---------------------------------------------------------------------------------------------------------------
# Per-item records of a run that records their hashes: every variant's stage result and a hash for every samples
# file must be there, and no two variants may be scored on the same file.

def test_deleted_stage_result_is_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.05}})
    (tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json").unlink()
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "evaluate.result.json" in err and "missing" in err, out + err


def test_missing_hash_entry_is_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.05}})
    for where in (fp8(s)["stages"]["evaluate"], ):
        del where["samples_sha256"][T1]
    stage = tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json"
    stage.write_text(json.dumps(fp8(s)["stages"]["evaluate"]))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and f"fp8: evaluate.samples_sha256.{T1}" in err, out + err


def test_variant_scored_on_the_baselines_samples_is_refused(tmp_path, capsys):
    s = build(tmp_path, {"max_drop": {T1: 0.02}}, wrong={T1: range(1, 90, 3)})
    for key in ("samples_files", "samples_sha256"):
        fp8(s)["stages"]["evaluate"][key] = dict(bf16(s)["stages"]["evaluate"][key])
    fp8(s)["stages"]["evaluate"]["scores"] = copy.deepcopy(bf16(s)["stages"]["evaluate"]["scores"])
    fp8(s)["metrics"][f"acc.{T1}"] = bf16(s)["metrics"][f"acc.{T1}"]
    (tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json").write_text(json.dumps(fp8(s)["stages"]["evaluate"]))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "the same file" in err, out + err


def test_variants_configured_alike_may_share_their_evaluation(tmp_path, capsys):
    """A variant evaluated exactly like the baseline (a BF16 rerun) reuses its evaluation from the cache and so names
    the same samples file: allowed when the two evaluate configs agree but for where each writes, refused when not."""
    s = build(tmp_path, {"max_drop": {T1: 0.02}}, wrong={T1: range(1, 90, 3)})
    for key in ("samples_files", "samples_sha256", "scores"):
        fp8(s)["stages"]["evaluate"][key] = copy.deepcopy(bf16(s)["stages"]["evaluate"][key])
    fp8(s)["metrics"][f"acc.{T1}"] = bf16(s)["metrics"][f"acc.{T1}"]
    (tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json").write_text(json.dumps(fp8(s)["stages"]["evaluate"]))
    config = {"engine": {"model": "/m", "kv_cache_dtype": "auto"}, "tasks": [T1]}
    for name, out in (("bf16", "a"), ("fp8", "b")):
        (tmp_path / "run" / "variants" / name / "evaluate.config.json").write_text(
            json.dumps({**config, "output_dir": out}))
    code, out, err = gate(tmp_path, capsys, s)
    assert "the same file" not in err and "the same sha256" not in err, out + err
    (tmp_path / "run" / "variants" / "fp8" / "evaluate.config.json").write_text(
        json.dumps({**config, "engine": {"model": "/m", "kv_cache_dtype": "fp8"}, "output_dir": "b"}))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "the same file" in err, out + err
