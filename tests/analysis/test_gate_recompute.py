"""The gate judges the records, trusts only the team's policy, and says "inconclusive" when the data cannot decide
(issues 40 and 41): each case starts from a run folder made the way `suite run` makes one (per-item samples files with
their recorded sha256, stage results, run.json with the recipe's recorded hash, recipe.yaml, load points with their
repetitions) and changes one thing an adversary or a noisy machine would. An edit of summary.json alone (a cache of
what the records give) changes no verdict and is said in one warning line; its stage-record equivalent is refused."""

from __future__ import annotations

import hashlib
import json

import yaml

from conftest import STALE, build_gated_run, edit_record, publish_summary, run_cli, run_gate
from suite.recipe import Recipe

TASK = "suite_gsm8k"
GATES = {"max_drop": {TASK: 0.05}, "non_inferiority_margin": {TASK: 0.06}, "min_throughput_gain": 1.2}


def build(tmp_path, var_wrong=range(0), base_reps=(100.0, 101.0, 99.0), var_reps=(150.0, 151.0, 149.0),
          gates=None, n=300) -> dict:
    """A finished run's summary.json (as a dict), its recipe.yaml and samples files under tmp_path/run
    (conftest.build_gated_run, with the samples files at run/samples_<variant>_<task>.jsonl): the baseline right on
    items i % 3 != 0, the variant the same except it also gets the items ``var_wrong`` wrong."""
    return build_gated_run(tmp_path, gates or GATES, wrong={TASK: var_wrong}, n=n, base_reps=base_reps,
                           var_reps=var_reps, tasks=(TASK,),
                           samples_path=lambda run, name, task: run / f"samples_{name}_{task}.jsonl")


gate = run_gate


def fp8(s):
    return s["variants"][1]


def bf16(s):
    return s["variants"][0]


def test_the_untouched_run_passes(tmp_path, capsys):
    """No false alarm: the run every case below tampers passes every gate, recomputed, from its recipe.yaml."""
    s = build(tmp_path)
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out and "recipe.yaml, sha256 as recorded" in out, out + err


# --------------------------------------------------------------------------------------------------------------------
# (a)-(d): aggregates that disagree with the per-item records


def test_accuracy_set_to_the_baselines_with_the_delta_untouched_is_refused(tmp_path, capsys):
    """Issue 40's attack: acc.<task> and evaluate.scores.value of the variant raised to the baseline's, its recorded
    delta, gained/lost and paired record left alone; a max_drop that failed must not pass."""
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})  # 20 items lost: drop 0.067
    assert gate(tmp_path, capsys, s)[0] == 1
    fp8(s)["metrics"][f"acc.{TASK}"] = bf16(s)["metrics"][f"acc.{TASK}"]
    fp8(s)["stages"]["evaluate"]["scores"][0]["value"] = bf16(s)["stages"]["evaluate"]["scores"][0]["value"]
    code, out, err = gate(tmp_path, capsys, s)  # summary.json alone: the records' verdict, said stale
    assert code == 1 and "FAILED fp8: max drop" in out and STALE in err, out + err
    value = bf16(s)["stages"]["evaluate"]["scores"][0]["value"]  # the stage result itself raised: refused by its per-item records
    edit_record(tmp_path / "run", "fp8", "evaluate.result.json", lambda d: d["scores"][0].update(value=value))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "gate: PASS" not in out, out + err
    assert f"fp8: evaluate.scores.{TASK}.value: recorded" in err and "recomputed" in err and "samples_fp8" in err, err


def test_an_impossible_interval_is_refused(tmp_path, capsys):
    """delta_ci_low above delta_ci_high (metric and paired record edited together) gives no verdict."""
    s = build(tmp_path)
    low, high = fp8(s)["metrics"][f"acc.{TASK}.delta_ci_low"], fp8(s)["metrics"][f"acc.{TASK}.delta_ci_high"]
    fp8(s)["metrics"][f"acc.{TASK}.delta_ci_low"], fp8(s)["metrics"][f"acc.{TASK}.delta_ci_high"] = high + 0.01, low
    fp8(s)["paired"][0].update(ci_low=high + 0.01, ci_high=low)
    code, out, err = gate(tmp_path, capsys, s)  # the interval is derived from the per-item records, not read
    assert code == 0 and "gate: PASS" in out and STALE in err, out + err
    # the records it comes from edited: refused by their hash (test_an_edited_samples_file_is_refused_by_its_hash)


def test_every_ci_low_raised_consistently_is_refused(tmp_path, capsys):
    """Every CI's low end raised by 0.05 in the metrics and the paired record alike (the consistency checks of the
    summary alone cannot see it): the interval recomputed from the samples disagrees. A non-inferiority failure
    before the edit; refused after it."""
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"non_inferiority_margin": {TASK: 0.08}})
    assert gate(tmp_path, capsys, s)[0] in (1, 3)
    fp8(s)["metrics"][f"acc.{TASK}.delta_ci_low"] += 0.05
    fp8(s)["paired"][0]["ci_low"] += 0.05
    before = gate(tmp_path, capsys, s)
    assert before[0] in (1, 3) and "gate: PASS" not in before[1] and STALE in before[2], before


def test_an_edited_samples_file_is_refused_by_its_hash(tmp_path, capsys):
    """One item of the variant's per-item records flipped after the evaluation: its sha256 no longer matches."""
    s = build(tmp_path)
    f = tmp_path / "run" / f"samples_fp8_{TASK}.jsonl"
    f.write_text(f.read_text().replace('"doc_id": 0, "filter": "none", "acc": 0.0', '"doc_id": 0, "filter": "none", '
                                                                                    '"acc": 1.0', 1))
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2 and "was changed after the evaluation" in err and str(f) in err, out + err


# --------------------------------------------------------------------------------------------------------------------
# (e): the policy comes from a trusted place


def test_loosened_gates_in_the_summary_are_refused(tmp_path, capsys):
    """Issue 40's attack: summary.json's recipe.gates edited to default_max_drop: 1.0 on a failing run."""
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})
    assert gate(tmp_path, capsys, s)[0] == 1
    s["recipe"]["gates"] = {**s["recipe"]["gates"], "max_drop": {}, "default_max_drop": 1.0}
    code, out, err = gate(tmp_path, capsys, s)  # summary.json's copy is not read: recipe.yaml's gates, as recorded
    assert code == 1 and "FAILED fp8: max drop" in out and STALE in err, out + err


def test_an_edited_recipe_copy_in_the_run_folder_is_refused(tmp_path, capsys):
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})
    copy = tmp_path / "run" / "recipe.yaml"
    copy.write_text(copy.read_text().replace("0.02", "1.0"))
    s["recipe"]["gates"]["max_drop"][TASK] = 1.0  # the summary's copy edited to match: still refused by the hash
    code, out, err = gate(tmp_path, capsys, s)  # that run.json recorded
    assert code == 2 and "the run folder's recipe.yaml has sha256" in err and s["recipe_sha256"] in err, out + err


def test_gate_with_the_teams_recipe(tmp_path, capsys):
    """--recipe FILE: a different file is refused naming both hashes; the file the run was made from is used."""
    s = build(tmp_path, var_wrong=range(1, 60, 3), gates={"max_drop": {TASK: 0.02}})
    mine = tmp_path / "team" / "recipe.yaml"
    mine.parent.mkdir()
    other = yaml.safe_load((tmp_path / "run" / "recipe.yaml").read_text())
    other["gates"]["max_drop"][TASK] = 1.0
    mine.write_text(yaml.safe_dump(other, sort_keys=False))
    code, out, err = gate(tmp_path, capsys, s, "--recipe", str(mine))
    theirs = hashlib.sha256(mine.read_bytes()).hexdigest()
    assert code == 2 and theirs in err and s["recipe_sha256"] in err, out + err
    mine.write_bytes((tmp_path / "run" / "recipe.yaml").read_bytes())
    code, out, err = gate(tmp_path, capsys, s, "--recipe", str(mine))
    assert code == 1 and "team/recipe.yaml" in out and "as recorded" in out and "FAILED fp8: max drop" in out, out + err


# --------------------------------------------------------------------------------------------------------------------
# (f): inconclusive when the data cannot decide (exit 3)


def test_a_ci_straddling_the_margin_is_inconclusive_with_the_items_needed(tmp_path, capsys):
    s = build(tmp_path, var_wrong=range(1, 30, 3))  # 10 items lost of 300
    low, delta = fp8(s)["paired"][0]["ci_low"], fp8(s)["paired"][0]["delta"]
    margin = -(low + delta) / 2  # -margin between the CI's low end and the point: the CI straddles it
    s = build(tmp_path, var_wrong=range(1, 30, 3), gates={"non_inferiority_margin": {TASK: round(margin, 4)}})
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 3 and "gate: INCONCLUSIVE" in out, out + err
    assert "straddles the threshold" in out and "more than the 300 scored" in out, out


def test_a_13x_spread_between_repetitions_never_passes(tmp_path, capsys):
    """Issue 41's demo: the baseline measured 27 and 361 tok/s; the ratio looks like a pass (1.87), but the point is
    unstable (tput.stable 0): inconclusive."""
    s = build(tmp_path, base_reps=(27.0, 361.0), var_reps=(360.0, 366.0), gates={"min_throughput_gain": 1.2})
    assert bf16(s)["metrics"]["tput.stable"] == 0.0
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 3 and "unstable throughput point (bf16" in out and "gate: PASS" not in out, out + err


def test_a_throughput_interval_straddling_the_gain_is_inconclusive(tmp_path, capsys):
    s = build(tmp_path, var_reps=(112.0, 130.0, 121.0, 116.0, 126.0), gates={"min_throughput_gain": 1.2})
    low, high = fp8(s)["metrics"]["tput.output_tok_s.ratio.ci_low"], fp8(s)["metrics"]["tput.output_tok_s.ratio.ci_high"]
    assert low < 1.2 < high
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 3 and "INCONCLUSIVE fp8: min throughput gain" in out and "more repetitions" in out, out + err


def test_an_engine_spread_larger_than_the_margin_turns_a_pass_inconclusive(tmp_path, capsys):
    s = build(tmp_path, gates={"max_drop": {TASK: 0.02}})
    assert gate(tmp_path, capsys, s)[0] == 0
    fp8(s)["metrics"][f"acc.{TASK}.engine_spread"] = 0.03  # summary.json only: the records have no engine check
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 0 and STALE in err, out + err
    from suite.analysis.gate import GateConfig, run
    from suite.analysis.derive import summarize
    from suite.recipe import GateSpec

    judged = summarize(tmp_path / "run")  # the gate on a summary whose engine checks spread by 0.03
    judged.variants[1].metrics[f"acc.{TASK}.engine_spread"] = 0.03
    result = run(GateConfig(judged, GateSpec.model_validate({"max_drop": {TASK: 0.02}})))
    assert result.outcome == "inconclusive" and any("moves by 0.03 between engine configurations" in c.reason
                                                    for c in result.checks), result


# --------------------------------------------------------------------------------------------------------------------
# (g): nesting, through the real command


def _deep(depth: int) -> str:
    return "max_drop: " + "[" * depth + "]" * depth + "\n"


def test_a_policy_and_a_recipe_nested_20000_deep_are_bad_input(tmp_path):
    build(tmp_path)
    run = tmp_path / "run"
    publish_summary(run)  # as the runner leaves it
    (tmp_path / "deep.yaml").write_text(_deep(20_000))
    res = run_cli("gate", str(run), "--no-record", "--policy", str(tmp_path / "deep.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.startswith("error: "), res.stderr[-2000:]
    assert len(res.stderr.splitlines()) <= 2, res.stderr[-2000:]
    deep = (run / "recipe.yaml").read_text() + "deep: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n"
    (run / "recipe.yaml").write_text(deep)  # recorded as the run's recipe, so the gate reads it
    edit_record(run, None, "run.json", lambda d: d.update(recipe_sha256=hashlib.sha256(deep.encode()).hexdigest()))
    res = run_cli("gate", str(run), "--no-record")
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.startswith("error: "), res.stderr[-2000:]
    assert len(res.stderr.splitlines()) <= 2, res.stderr[-2000:]


# --------------------------------------------------------------------------------------------------------------------
# (h): a gate registered from outside suite/


def test_a_gate_registered_from_a_test_module_runs(tmp_path):
    from suite.analysis import gate
    from suite.analysis.gates.base import check
    from suite.analysis.gates.registry import GATES, register_gate, unregister_gate
    from suite.records.summary import RunSummary

    @register_gate("max_ttft_p99_ms", reads=("tput.ttft_p99_ms",), name="toy-ttft")
    def toy(ctx):
        if (limit := ctx.setting("max_ttft_p99_ms")) is not None:
            ctx.add(check(ctx.v.name, "toy ttft", ctx.v.metrics["tput.ttft_p99_ms"] / 2, limit, True))

    try:
        assert "toy-ttft" in GATES
        s = RunSummary.model_validate(build(tmp_path, gates={"max_ttft_p99_ms": 50}))
        result = gate.run(gate.GateConfig(s, Recipe.model_validate(s.recipe).gates))
        toys = [c for c in result.checks if c.gate == "toy ttft"]
        assert not result.problems and len(toys) == 1 and toys[0].measured == 45.0 and toys[0].passed
    finally:
        unregister_gate("toy-ttft")


# --------------------------------------------------------------------------------------------------------------------
# inconclusive is shown where pass and fail are: the report, the MLflow tags, `suite run`'s closing gate line


def _inconclusive(tmp_path):
    from suite.analysis import gate
    from suite.records.summary import RunSummary

    s = RunSummary.model_validate(build(tmp_path, base_reps=(27.0, 361.0), var_reps=(360.0, 366.0),
                                        gates={"min_throughput_gain": 1.2}))
    result = gate.run(gate.GateConfig(s, Recipe.model_validate(s.recipe).gates))
    assert result.outcome == "inconclusive" and not result.passed
    return s, result


def test_the_report_shows_an_inconclusive_gate(tmp_path):
    from suite.outputs import report

    s, result = _inconclusive(tmp_path)
    page = report.run(report.ReportConfig(s, tmp_path / "report.html", gate=result)).html.read_text()
    gates = page[page.index("<h2>Gates</h2>"):page.index("<h2>Accuracy</h2>")]
    assert '<p class="inconclusive">INCONCLUSIVE' in gates and '<span class="inconclusive">INCONCLUSIVE</span>' in gates
    assert "unstable throughput point (bf16" in gates and "to decide: rerun the benchmark" in gates
    assert '<p class="fail">FAIL</p>' not in gates and ">FAIL<" not in gates


def test_mlflow_tags_an_inconclusive_gate_and_registers_nothing(tmp_path, monkeypatch):
    from suite.outputs import mlflow as track
    from suite.outputs import mlflow_registry
    from suite.records.summary import TrackingInfo

    class Client:
        def __init__(self):
            self.tags = {}

        def set_tag(self, run_id, key, value):
            self.tags[(run_id, key)] = value

        def get_run(self, run_id):  # the identity the suite tagged its runs with (record_gate checks it first)
            from types import SimpleNamespace

            tags = ({"suite.run_dir": s.run_dir} if run_id == "P" else
                    {"mlflow.parentRunId": "P", "suite.variant": {"B": "bf16", "F": "fp8"}[run_id]})
            return SimpleNamespace(data=SimpleNamespace(tags=tags, params={"recipe_sha256": s.recipe_sha256}))

    client = Client()
    monkeypatch.setattr(track, "client_for", lambda uri: client)
    monkeypatch.setattr(mlflow_registry, "_register", lambda *a, **k: (_ for _ in ()).throw(AssertionError("registered")))
    s, result = _inconclusive(tmp_path)
    s.tracking = TrackingInfo(uri="file:x", experiment="e", experiment_id="1", parent_run_id="P",
                              variant_run_ids={"bf16": "B", "fp8": "F"})
    rec = mlflow_registry.record_gate(s, result)
    assert client.tags[("P", "gate.result")] == "inconclusive" and client.tags[("F", "gate.result")] == "inconclusive"
    assert "unstable throughput point" in client.tags[("F", "gate.inconclusive")] and ("F", "gate.failed") not in client.tags
    assert rec.registered == []


def test_the_closing_gate_line_says_inconclusive_and_no_verdict(tmp_path):
    from suite.cli.talk import gate_line
    from suite.analysis.gates.base import GateResult
    from suite.runtime.errors import Problem

    s, result = _inconclusive(tmp_path)

    class Run:
        run_dir = "RUN"

        def __init__(self, r):
            self.r = r

        def gate(self):
            return self.r

    assert gate_line(Run(result)).startswith("gate: INCONCLUSIVE (suite gate RUN")
    bad = GateResult(problems=[Problem("f", "x", "what", "fix")])
    assert gate_line(Run(bad)).startswith("gate: NO VERDICT")  # bad input (exit 2) is not inconclusive (exit 3)
