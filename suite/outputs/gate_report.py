"""The gate's verdict for a CI system: ``suite gate --junit FILE`` (JUnit XML) and ``--json FILE``.

One test case per variant x gate, with its measured value, threshold, interval (when the outcome was judged on one),
margin, n, outcome and reason. Bad input (exit 2: no verdict) is one test case in error naming every problem, so a
CI job that fails before a verdict still shows why in its test tab.

How each outcome is written in JUnit, and why:
- pass: an empty ``<testcase>``;
- fail: ``<failure type="fail" message="...">``;
- inconclusive: ``<skipped message="inconclusive: REASON">``. GitLab's test report (Pipelines > Tests) and the usual
  GitHub Actions reporters (dorny/test-reporter, mikepenz/action-junit-report, EnricoMi/publish-unit-test-result-action)
  count and show four states: passed, failed, error and skipped. A ``<failure type="inconclusive">`` would be
  counted and shown as a failure, indistinguishable from a gate that was measured to fail; ``<skipped>`` is the one
  state they show apart from both pass and fail, and the message says it is inconclusive and why. The job itself
  still fails on it: ``suite gate`` exits 3, which a CI step treats as a failure unless told otherwise.
- bad input: one ``<error type="bad input">`` case (the JUnit meaning of "the test could not run").

The JSON report carries the same cases with ``outcome`` spelled out (``pass``, ``fail``, ``inconclusive``, ``error``)
and the run's ``outcome`` and ``exit_code``; its ``format`` field names this layout (``suite.gate-report/1``).

Where a report may go (``place_problem``, checked before the gate judges anything, and again when it writes): a new
file or an existing regular file (not a FIFO, a device, a folder or a link, which a rename would replace), outside
the run folder being judged (its summary, records and samples are what the gate reads), and not in '/' or a system
folder (``suite.recipe.guards.system_folder``: missing folders are made, but never there). It is written by the suite's
one atomic writer (``suite.runtime.atomic``: a new temporary file beside it, renamed over the path).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from suite.recipe.guards import system_folder
from suite.runtime import atomic
from suite.runtime.errors import EXIT_BAD_INPUT, Problem, SuiteError

FORMAT = "suite.gate-report/1"
ERROR = "error"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # characters XML 1.0 cannot hold


@dataclass
class GateReport:
    """What the reports say: the run, the policy, the verdict and its checks (``GateCheck``), or the problems that
    left no verdict."""

    run: str
    outcome: str  # pass, fail, inconclusive or "bad input"
    exit_code: int
    checks: list = field(default_factory=list)  # GateCheck
    problems: list[Problem] = field(default_factory=list)
    recipe: str = ""
    policy: str = ""
    registration: list[str] = field(default_factory=list)  # what registering said: a line per version, or why not


def bad_input(run: str, problems: list[Problem], recipe: str = "", policy: str = "") -> GateReport:
    return GateReport(run, "bad input", EXIT_BAD_INPUT, problems=list(problems), recipe=recipe, policy=policy)


def _num(x) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def case(c) -> dict:
    """One check as a JSON case."""
    return {"variant": c.variant, "gate": c.gate, "outcome": c.outcome, "measured": _num(c.measured),
            "threshold": _num(c.threshold), "bound": "max" if c.upper else "min",
            "interval": [_num(c.interval[0]), _num(c.interval[1])] if c.interval else None,
            "margin": _num(c.margin), "n": c.n, "reason": reason(c), "decide": c.decide or None}


def reason(c) -> str:
    """Why the check came out as it did, in one line."""
    if c.outcome == "inconclusive":
        return c.reason
    if c.detail:
        return c.detail
    side = "at most" if c.upper else "at least"
    shown = f"measured {c.measured:.6g}, must be {side} {c.threshold:.6g} (margin {c.margin:+.6g})"
    if c.interval:
        shown += f"; 95% interval [{c.interval[0]:.6g}, {c.interval[1]:.6g}]"
        shown += f" ({c.interval_method})" if c.interval_method else ""
    return shown + ("" if c.n is None else f", n = {c.n}")


def as_json(report: GateReport) -> dict:
    cases = [case(c) for c in report.checks]
    if report.problems:
        cases = [{"variant": None, "gate": "bad input", "outcome": ERROR, "measured": None, "threshold": None,
                  "bound": None, "interval": None, "margin": None, "n": None,
                  "reason": "; ".join(str(p) for p in report.problems), "decide": None}]
    return {"format": FORMAT, "run": report.run, "recipe": report.recipe or None, "policy": report.policy or None,
            "outcome": report.outcome, "exit_code": report.exit_code,
            "problems": [str(p) for p in report.problems], "registration": report.registration, "cases": cases}


def _text(s: str) -> str:
    return _NOT_XML.sub("?", s)


def as_junit(report: GateReport) -> ET.Element:
    """The report as a JUnit ``<testsuites>`` element with one ``<testsuite>``."""
    data = as_json(report)
    counts = {k: sum(1 for c in data["cases"] if c["outcome"] == k) for k in ("fail", "inconclusive", ERROR)}
    attrs = {"tests": str(len(data["cases"])), "failures": str(counts["fail"]), "errors": str(counts[ERROR]),
             "skipped": str(counts["inconclusive"])}
    root = ET.Element("testsuites", {"name": "suite gate", **attrs})
    suite = ET.SubElement(root, "testsuite", {"name": _text(f"suite gate {report.recipe or report.run}"), **attrs,
                                              "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")})
    props = ET.SubElement(suite, "properties")
    for k in ("run", "recipe", "policy", "outcome", "exit_code"):
        if data[k] not in (None, ""):
            ET.SubElement(props, "property", {"name": k, "value": _text(str(data[k]))})
    for c in data["cases"]:
        cls = f"{report.recipe or 'suite'}.{c['variant']}" if c["variant"] else "suite.gate"
        tc = ET.SubElement(suite, "testcase", {"classname": _text(cls), "name": _text(c["gate"])})
        why = _text(c["reason"] or "")
        if c["outcome"] == "fail":
            ET.SubElement(tc, "failure", {"type": "fail", "message": why}).text = why
        elif c["outcome"] == "inconclusive":
            decide = f"; to decide: {c['decide']}" if c["decide"] else ""
            ET.SubElement(tc, "skipped", {"message": _text(f"inconclusive: {c['reason']}{decide}")})
        elif c["outcome"] == ERROR:
            ET.SubElement(tc, "error", {"type": "bad input", "message": why}).text = "\n".join(
                _text(p) for p in data["problems"])
        facts = {k: c[k] for k in ("measured", "threshold", "bound", "interval", "margin", "n") if c[k] is not None}
        if facts:
            ET.SubElement(tc, "system-out").text = _text(json.dumps(facts))
    return root


def write(report: GateReport, junit: str | None, json_file: str | None, run_dir: Path | None = None) -> None:
    """Write the reports asked for; a path ``place_problem`` refuses (``run_dir``: the run folder judged), or a file
    that cannot be written, is bad input (SuiteError)."""
    if junit:
        tree = ET.ElementTree(as_junit(report))
        ET.indent(tree)
        _write(junit, "--junit", lambda f: tree.write(f, encoding="utf-8", xml_declaration=True), run_dir)
    if json_file:
        text = json.dumps(as_json(report), indent=2, allow_nan=False) + "\n"
        _write(json_file, "--json", lambda f: f.write(text.encode()), run_dir)


def place_problem(path: str, flag: str, run_dir: Path | None = None) -> Problem | None:
    """Why the report may not be written at ``path`` (see the module's docstring), or None."""
    p = Path(path)
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        mode = None
    except OSError:  # a parent that is a file, a folder that cannot be read: the write says why
        mode = None
    fix = "give a new file, or a regular file, outside the run folder and the system's folders"
    if mode is not None and not stat.S_ISREG(mode):
        what = ("a link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else "a FIFO" if
                stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
        return Problem(path, flag, f"is {what}, not a regular file: the report would replace it", fix)
    try:
        where = p.resolve()
    except (OSError, RuntimeError) as e:  # a link loop in its folders
        return Problem(path, flag, f"cannot be resolved: {e}", fix)
    if run_dir is not None and (where == Path(run_dir).resolve() or Path(run_dir).resolve() in where.parents):
        return Problem(path, flag, f"is inside the run folder being judged ({run_dir}): the report would replace "
                       "what the gate reads", fix)
    if (why := system_folder(where)) is not None:
        return Problem(path, flag, f"{where} {why}: the gate report may not go there", fix)
    return None


def _write(path: str, flag: str, fill, run_dir: Path | None = None) -> None:
    if (problem := place_problem(path, flag, run_dir)) is not None:
        raise SuiteError(problem)
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(p, fill)
    except OSError as e:
        raise SuiteError(Problem(path, flag, f"cannot write the gate report: {e.strerror or e}",
                                 "give a path in a writable folder")) from None
