"""`suite gate RUN_DIR`."""

from __future__ import annotations

from suite.runtime.errors import SuiteError

NAME = "gate"
HELP = "pass/fail a finished run on its gates (exit 0 pass, 1 fail, 2 bad input, 3 inconclusive)"
DESCRIPTION = ("Check a finished run against its recipe's gates (or --policy FILE), on what its run folder's records "
               "give (stage results, per-item records, run.json; summary.json is a cache: one that differs is a "
               "warning, never judged): "
               "accuracy drop (absolute, relative), non-inferiority on the paired CI, throughput "
               "gain, p99 latency. Prints every gate with measured value, threshold and margin. When "
               "the run is in MLflow, its runs are tagged gate.result / gate.failed, and on a pass each "
               "variant's checkpoint (built, or brought with variants[].model) is registered as "
               "<recipe>-<variant> with the alias 'candidate'; a variant that cannot be is named with the reason. "
               "--junit / --json write the verdict for a CI system (docs/12-ci.md).")
EXAMPLES = (
    "suite gate runs/20261207-120000-demo-cpu",
    "suite gate runs/20261207-120000-demo-cpu/summary.json --policy release.yaml --no-record",
    "suite gate runs/20261207-120000-demo-cpu --recipe recipes/demo-cpu.yaml",
    "suite gate run --recipe recipe.yaml --verify --junit gate.xml --json gate.json",
)


def add_arguments(gate) -> None:
    gate.add_argument("run", help="run folder made by `suite run` (or its summary.json: its folder is judged)")
    gate.add_argument("--policy", help="YAML gate policy (the recipe's `gates:` block) to use instead")
    gate.add_argument("--recipe", help="the team's own copy of the recipe (e.g. from its repository): its sha256 must "
                      "be the one the run recorded, and its gates are used (default: the run folder's recipe.yaml, "
                      "checked the same way); exit 3 = inconclusive")
    gate.add_argument("--verify", action="store_true", help="first check the run folder's signed manifest.json "
                      "(HMAC-SHA256 keyed by SUITE_MANIFEST_KEY, written by `suite run` when that variable is set): "
                      "a missing key or manifest, a changed, added or removed file or a bad HMAC is exit 2")
    gate.add_argument("--no-record", action="store_true", help="do not tag the MLflow runs or register anything")
    gate.add_argument("--uri", help="the MLflow server to record the verdict on (default: the --recipe's tracking.uri, "
                      "then MLFLOW_TRACKING_URI; the run folder's tracking.json is used only when it names a local "
                      "store: its credentials go only to a server you name)")
    gate.add_argument("--junit", metavar="FILE", help="also write the verdict as JUnit XML for a CI test report: one "
                      "test case per variant x gate (fail = <failure>, inconclusive = <skipped>, bad input = one "
                      "<error> case; written on exit 2 too)")
    gate.add_argument("--json", metavar="FILE", help="also write the verdict as JSON (format suite.gate-report/1): "
                      "one case per variant x gate with measured, threshold, interval, margin, n, outcome, reason")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.gate import cmd_gate, report_bad_input

    try:
        return cmd_gate(args)
    except SuiteError as e:  # bad input before a verdict: the CI report still says why, then exit 2 as ever
        report_bad_input(args, e.problems)
        raise
