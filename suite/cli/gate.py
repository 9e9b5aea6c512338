"""`suite gate`: the release gate on a run folder's records; exit 0 pass, 1 fail, 2 bad input, 3 inconclusive."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from suite import api
from suite.cli.render import _wide_console
from suite.outputs import gate_report, manifest
from suite.outputs.mlflow_registry import record_gate
from suite.outputs.tracking_target import check_uris, gate_uri
from suite.recipe import Recipe, load_yaml, read_text
from suite.runtime.errors import EXIT_BAD_INPUT, Problem, SuiteError
from suite.runtime.secrets import redact

SHOWN = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "inconclusive": "[yellow]INCONCLUSIVE[/]"}


def cmd_gate(args) -> int:
    """``--verify``: the run folder's files are read once, checked against its signed manifest, and the gate judges
    exactly those bytes (a private copy), never the folder again, which may change after it was verified."""
    if not args.no_record:  # where the verdict may go: no credential in the URI, no local store in a system folder
        check_uris(getattr(args, "uri", None))
    problems = [p for flag in ("junit", "json") if getattr(args, flag, None)
                and (p := gate_report.place_problem(getattr(args, flag), f"--{flag}", _folder(args.run))) is not None]
    if problems:  # before anything is judged or recorded
        raise SuiteError(problems)
    if not getattr(args, "verify", False):
        return _judge(args, args.run)
    folder = _folder(args.run)
    with tempfile.TemporaryDirectory(prefix="suite-verified-") as held:  # before anything is read or judged
        copy = Path(held) / folder.resolve().name  # the run folder's own name, as the table shows it
        _verify(folder, copy)
        run = copy / (Path(args.run).name if not Path(args.run).is_dir() else "")
        return _judge(argparse.Namespace(**{**vars(args), "run": str(run)}), args.run)


def _judge(args, shown: str) -> int:
    """The verdict on ``args.run`` (the folder, or the verified copy of it), reported under ``shown`` (as given)."""
    run = api.load_run(args.run, who="`suite gate`")
    summary = run.summary
    if getattr(summary, "recipe_changed_on_resume", None):  # the run's recipe changed part-way, and was accepted
        print(f"warning: this run was resumed with --accept-recipe-change: its recipe changed part-way in "
              f"{', '.join(summary.recipe_changed_on_resume)}", file=sys.stderr)
    judged = run.verdict(args.policy, getattr(args, "recipe", None))  # the one trust rule: suite.analysis.gate.verdict
    for line in judged.warnings:  # summary.json is a cache: one that is not the records' is said, never judged
        print(f"warning: {line}", file=sys.stderr)
    result, policy_label, policy_sha, looser = judged.result, judged.label, judged.policy_sha256, judged.looser
    if result.problems:  # no table: a partial one would show passes next to numbers that cannot be read
        for problem in result.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"gate: NO VERDICT ({len(result.problems)} problem(s) with the run or the policy)", file=sys.stderr)
        _reports(args, gate_report.bad_input(shown, result.problems, summary.recipe_name, policy_label), shown)
        return EXIT_BAD_INPUT
    for line in looser:  # a --policy replaces the recipe's gates: say what it lets through that they did not
        print(f"warning: the policy loosens the recipe's gate {line}", file=sys.stderr)
    _print_table(summary, result, policy_label)
    if not result.checks:
        print(f"{shown}: the gate policy checks nothing (`suite schema` lists the gates: max_drop, "
              "non_inferiority_margin, min_throughput_gain, ...)", file=sys.stderr)
        _reports(args, gate_report.bad_input(shown, [Problem(shown, "gates", "the gate policy checks nothing",
                                                                 "set a gate (`suite schema` lists them)")],
                                             summary.recipe_name, policy_label), shown)
        return EXIT_BAD_INPUT
    registered: list[str] = []
    if not args.no_record:
        where = Path(shown) if Path(shown).is_dir() else Path(shown).parent  # the folder gated, not a verified copy
        gated = summary.model_copy(update={"run_dir": str(where.absolute())})
        registered = _record(gated, result, args.policy or getattr(args, "recipe", None) or "recipe", policy_sha, looser,
                             _named_uris(args))
    _print_verdict(result)
    _reports(args, gate_report.GateReport(shown, result.outcome, result.exit_code, result.checks,
                                          recipe=summary.recipe_name, policy=policy_label, registration=registered),
             shown)
    return result.exit_code


def _folder(run: str) -> Path:
    """The run folder ``run`` names (the folder, or the folder of its summary.json), as given."""
    return Path(run) if Path(run).is_dir() else Path(run).parent


def _reports(args, report: gate_report.GateReport, run: str | None = None) -> None:
    """``--junit FILE`` / ``--json FILE``: the verdict for a CI system (``suite.outputs.gate_report``), never written
    into the run folder judged (``run`` as the user gave it, not a verified copy; default ``args.run``)."""
    gate_report.write(report, getattr(args, "junit", None), getattr(args, "json", None), _folder(run or args.run))


def report_bad_input(args, problems: list[Problem]) -> None:
    """The reports of a gate that stopped on bad input before a verdict: one error case naming the problems."""
    _reports(args, gate_report.bad_input(args.run, problems))


def _verify(folder: Path, held: Path) -> None:
    """``--verify``: every file of the run folder is as its manifest signed it (a SuiteError otherwise); the bytes
    verified are written into ``held``, which the gate then judges."""
    count = manifest.verify(folder, into=held)
    print(f"verified: {count} file(s) as signed in {folder / manifest.NAME}", file=sys.stderr)


def _print_table(summary, result, policy_label: str) -> None:
    """One row per check: variant, gate, n, measured, threshold, margin, outcome."""
    from rich.table import Table

    table = Table(title=f"gates: {summary.recipe_name} ({Path(summary.run_dir).name}) — {policy_label}")
    for col in ("variant", "gate", "n", "measured", "threshold", "margin", "result"):
        table.add_column(col, justify="left" if col in ("variant", "gate", "result") else "right")
    for c in result.checks:
        table.add_row(c.variant, c.gate, "" if c.n is None else str(c.n), f"{c.measured:.4f}", f"{c.threshold:.4f}",
                      f"{c.margin:+.4f}", SHOWN[c.outcome])
    _wide_console().print(table)


def _named_uris(args) -> tuple[str | None, str | None]:
    """The tracking URIs the caller gave: ``--uri`` and the ``--recipe``'s ``tracking.uri`` (its own copy, checked
    against the run's recorded sha256 by the verdict)."""
    recipe_uri = None
    if getattr(args, "recipe", None):
        recipe_uri = Recipe.model_validate(load_yaml(read_text(Path(args.recipe)), args.recipe)).tracking.uri
    return getattr(args, "uri", None), recipe_uri


def _record(summary, result, policy: str, policy_sha: str | None, looser: list[str],
            named: tuple[str | None, str | None] = (None, None)) -> list[str]:
    """The verdict on the run's MLflow runs (and, when every gate passed, the checkpoints registered) on the server
    the caller names (``named``: --uri, the --recipe's; ``tracking_target.gate_uri``); a warning when MLflow fails
    or nothing names where to record: the verdict stands. Returns what it said of each variant's registration."""
    said: list[str] = []
    if not summary.tracking:
        if result.passed:  # a pass registers: say why this one did not
            said.append("nothing registered: the run was not logged to MLflow (no tracking.json in the run folder; "
                        "fix: `suite sync RUN` logs it, then gate again)")
            print(said[-1], file=sys.stderr)
        return said
    try:
        uri, why = gate_uri(summary.tracking.uri, *named)
    except SuiteError as e:  # the --recipe's tracking.uri refused (`suite validate` refuses it too)
        uri, why = None, str(e.problems[0])
    if uri is None:
        said.append(f"gate verdict not recorded in MLflow: {why}")
        print(f"warning: {said[-1]}", file=sys.stderr)
        return said
    try:
        rec = record_gate(summary, result, policy=policy, policy_sha256=policy_sha, looser=looser, uri=uri)
        for name, version in rec.registered:
            again = (name, version) in (rec.reused or [])  # the same checkpoint key: no new version
            said.append(f"{'already registered' if again else 'registered'} {name} version {version} as "
                        f"'candidate' ({redact(uri)})")
            print(said[-1])
        for line in rec.not_registered:
            said.append(line)
            print(line, file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the verdict stands even when MLflow is unreachable
        said.append(f"gate verdict not recorded in MLflow: {type(e).__name__}: {e}")
        print(f"warning: {said[-1]}", file=sys.stderr)
    return said


def _print_verdict(result) -> None:
    """A line for each failed or inconclusive check (what to do about it), then the outcome."""
    for c in result.checks:
        if c.outcome == "fail":
            print(f"FAILED {c.variant}: {c.gate}: {c.detail}" if c.detail else
                  f"FAILED {c.variant}: {c.gate} = {c.measured:.4f}, threshold {c.threshold:.4f} "
                  f"(off by {-c.margin:.4f})" + ("" if c.n is None else f", n = {c.n}"))
        elif c.outcome == "inconclusive":
            print(f"INCONCLUSIVE {c.variant}: {c.gate}: {c.reason}" + (f"; to decide: {c.decide}" if c.decide else ""))
    print("gate: " + result.outcome.upper())
