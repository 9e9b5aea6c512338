"""`suite gate --junit FILE --json FILE`: one case per variant x gate with its numbers and outcome, inconclusive as
JUnit <skipped>, bad input (exit 2) as one <error> case; read back with the standard XML and JSON parsers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import build_gated_run, run_gate

TASK = "suite_gsm8k"
GATES = {"max_drop": {TASK: 0.05}, "non_inferiority_margin": {TASK: 0.06}, "min_throughput_gain": 1.2}


def reports(tmp_path, capsys, s, *extra):
    code, out, err = run_gate(tmp_path, capsys, s, "--junit", str(tmp_path / "ci" / "gate.xml"),
                              "--json", str(tmp_path / "ci" / "gate.json"), *extra)
    return code, ET.parse(tmp_path / "ci" / "gate.xml").getroot(), json.loads((tmp_path / "ci" / "gate.json")
                                                                               .read_text()), out + err


def cases(root):
    return {(tc.get("classname").split(".")[-1], tc.get("name")): tc for tc in root.iter("testcase")}


def test_a_pass_is_one_case_per_variant_and_gate_with_its_numbers(tmp_path, capsys):
    code, root, data, said = reports(tmp_path, capsys, build_gated_run(tmp_path, GATES))
    assert code == 0 and data["outcome"] == "pass" and data["exit_code"] == 0, said
    gates = {c["gate"] for c in data["cases"]}
    assert {c["variant"] for c in data["cases"]} == {"fp8"} and len(gates) == len(data["cases"]) >= 3, data
    drop = next(c for c in data["cases"] if c["gate"].startswith("max drop"))
    assert drop["outcome"] == "pass" and drop["threshold"] == 0.05 and drop["bound"] == "max" and drop["n"] == 300
    assert abs(drop["measured"]) < 1e-9 and drop["margin"] == 0.05 and "must be at most 0.05" in drop["reason"]
    ni = next(c for c in data["cases"] if c["interval"] is not None and c["gate"].startswith("non-inf"))
    assert ni["interval"][0] <= ni["interval"][1]
    assert root.tag == "testsuites" and root.get("tests") == str(len(data["cases"])) and root.get("failures") == "0"
    suite_el = root.find("testsuite")
    assert {p.get("name"): p.get("value") for p in suite_el.iter("property")}["outcome"] == "pass"
    for (variant, gate), tc in cases(root).items():
        assert variant == "fp8" and gate in gates and list(tc.iter("failure")) == list(tc.iter("skipped")) == []
        assert json.loads(tc.find("system-out").text)["threshold"] is not None


def test_a_failed_gate_is_a_failure_case_and_the_others_stay_passes(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {TASK: 0.02}, "min_throughput_gain": 1.2},
                        wrong={TASK: range(1, 60, 3)})  # 20 items lost: a drop of 0.067
    code, root, data, said = reports(tmp_path, capsys, s)
    assert code == 1 and data["outcome"] == "fail", said
    by_gate = {c["gate"]: c for c in data["cases"]}
    failed = [g for g, c in by_gate.items() if c["outcome"] == "fail"]
    assert failed == [f"max drop {TASK}"] and by_gate[failed[0]]["margin"] < 0, data
    tc = cases(root)[("fp8", failed[0])]
    assert tc.find("failure").get("type") == "fail" and "must be at most 0.02" in tc.find("failure").get("message")
    assert root.get("failures") == "1" and root.get("skipped") == "0" and root.get("errors") == "0"


def test_inconclusive_is_skipped_with_its_reason_not_a_failure(tmp_path, capsys):
    """A throughput interval straddling the gain threshold (repetitions 100..200 against 100): exit 3, and the case is
    <skipped message="inconclusive: ..."> (what GitLab's and GitHub's test reports show apart from a failure)."""
    s = build_gated_run(tmp_path, {"min_throughput_gain": 1.2}, var_reps=(100.0, 150.0, 200.0))
    code, root, data, said = reports(tmp_path, capsys, s)
    assert code == 3 and data["outcome"] == "inconclusive" and data["exit_code"] == 3, said
    undecided = [c for c in data["cases"] if c["outcome"] == "inconclusive"]
    assert undecided and all(c["reason"] and c["interval"] for c in undecided), data
    tc = cases(root)[("fp8", undecided[0]["gate"])]
    skipped = tc.find("skipped")
    assert skipped is not None and skipped.get("message").startswith("inconclusive: ") and tc.find("failure") is None
    assert root.get("skipped") == str(len(undecided)) and root.get("failures") == "0"


def test_bad_input_writes_one_error_case_and_exits_2(tmp_path, capsys):
    """Before a verdict (a run.json that is not JSON) and at the verdict (a policy naming a task the run did not
    evaluate): both reports still say why, as one error case."""
    s = build_gated_run(tmp_path, GATES)
    policy = tmp_path / "policy.yaml"
    policy.write_text("max_drop: {suite_mmlu: 0.02}\n")
    code, root, data, said = reports(tmp_path, capsys, s, "--policy", str(policy))
    assert code == 2 and data["outcome"] == "bad input" and data["exit_code"] == 2, said
    assert [c["outcome"] for c in data["cases"]] == ["error"] and "suite_mmlu" in data["cases"][0]["reason"]
    error = root.find("testsuite/testcase/error")
    assert root.get("errors") == "1" and error.get("type") == "bad input" and "suite_mmlu" in error.text

    from suite import cli

    (tmp_path / "run" / "run.json").write_text("{not json")  # the run's record broken: no summary to judge
    assert cli.main(["gate", str(tmp_path / "run"), "--no-record", "--junit", str(tmp_path / "b.xml"),
                     "--json", str(tmp_path / "b.json")]) == 2
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["outcome"] == "bad input" and "run.json" in data["problems"][0], data
    assert ET.parse(tmp_path / "b.xml").getroot().find("testsuite/testcase/error") is not None


def test_a_report_path_that_cannot_be_written_is_bad_input(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, out, err = run_gate(tmp_path, capsys, build_gated_run(tmp_path, GATES), "--json",
                              str(tmp_path / "file" / "gate.json"))
    assert code == 2 and "--json: cannot write the gate report" in err and "Traceback" not in err, out + err
