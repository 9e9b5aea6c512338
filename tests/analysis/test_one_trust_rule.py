"""One trust rule for every verdict (issue 46, part 4): `suite gate`, `suite report`, `suite run`'s closing gate line and
``suite.load_run(...).gate()`` all take their gates from ``suite.analysis.gate.verdict`` (the run folder's recipe.yaml
under the sha256 the run recorded), so a run folder whose summary.json copy of the recipe was loosened gets the same
answer from each of them, and none of them passes it."""

from __future__ import annotations

import json

import pytest
import yaml

import suite
from conftest import build_gated_run, run_gate
from suite import cli
from suite.cli.talk import gate_line
from suite.outputs.report import recipe_verdict

TASK = "suite_gsm8k"


def failing_run(tmp_path) -> dict:
    """A finished run whose variant drops 20 of 300 items against max_drop 0.02: it fails on its own recipe's gates."""
    s = build_gated_run(tmp_path, {"max_drop": {TASK: 0.02}}, wrong={TASK: range(1, 60, 3)}, tasks=(TASK,))
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    return s


def four_verdicts(tmp_path, capsys) -> dict[str, str]:
    """The outcome each entry point gives the run folder tmp_path/run (in the words of ``GateResult.outcome``)."""
    run = tmp_path / "run"
    code, out, err = run_gate(tmp_path, capsys, json.loads((run / "summary.json").read_text()))
    by_exit = {0: "pass", 1: "fail", 2: "bad input", 3: "inconclusive"}
    line = gate_line(suite.load_run(run))  # what `suite run` prints last, on the Run it returns
    words = {"gate: PASS": "pass", "gate: FAIL": "fail", "gate: NO VERDICT": "bad input",
             "gate: INCONCLUSIVE": "inconclusive"}
    assert cli.main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    return {"suite gate": by_exit[code],
            "closing line": next(w for k, w in words.items() if line.startswith(k)),
            "Run.gate()": suite.load_run(run).gate().outcome,
            "report": recipe_verdict(suite.load_run(run).summary, run).outcome,
            "report page": "bad input" if "no verdict" in page else "seen"}


def test_an_untouched_run_gets_one_verdict_everywhere(tmp_path, capsys):
    failing_run(tmp_path)
    got = four_verdicts(tmp_path, capsys)
    assert got == {"suite gate": "fail", "closing line": "fail", "Run.gate()": "fail", "report": "fail",
                   "report page": "seen"}, got


@pytest.mark.parametrize("loosened", [{"default_max_drop": 1.0}, {"max_drop": {TASK: 0.5}}, {}])
def test_a_summary_whose_recipe_copy_was_loosened_gets_the_records_verdict_everywhere(tmp_path, capsys, loosened):
    """summary.json's recipe copy edited to a weaker policy (recipe.yaml and its recorded sha256 untouched): summary.json
    is a cache, never read for a verdict, so every entry point gives the run's own verdict (fail), none passes on the
    copy's gates; the gate says summary.json is stale. The same edit of recipe.yaml itself gets no verdict anywhere."""
    s = failing_run(tmp_path)
    s["recipe"]["gates"] = loosened
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    got = four_verdicts(tmp_path, capsys)
    assert set(got.values()) == {"fail", "seen"}, got
    copy = tmp_path / "run" / "recipe.yaml"
    recipe = yaml.safe_load(copy.read_text())
    recipe["gates"] = loosened
    copy.write_text(yaml.safe_dump(recipe, sort_keys=False))
    got = four_verdicts(tmp_path, capsys)
    assert set(got.values()) == {"bad input"}, got


def test_the_api_takes_a_policy_or_a_recipe_as_suite_gate_does(tmp_path):
    """``Run.gate(policy=...)`` and ``Run.gate(recipe=...)`` go through the same checks as --policy and --recipe: a
    recipe file other than the one the run recorded is no verdict; a policy file replaces the gates."""
    failing_run(tmp_path)
    run = suite.load_run(tmp_path / "run")
    other = tmp_path / "other.yaml"
    other.write_text((tmp_path / "run" / "recipe.yaml").read_text() + "\n# another file\n")
    got = run.gate(recipe=other)
    assert got.outcome == "bad input" and "recipe_sha256" in str(got.problems[0]), got.problems
    assert run.gate(recipe=tmp_path / "run" / "recipe.yaml").outcome == "fail"
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"max_drop:\n  {TASK}: 0.5\n")
    judged = run.verdict(policy=policy)
    assert judged.result.outcome == "pass" and judged.looser == [f"max_drop.{TASK}: 0.02 -> 0.5"], judged
