"""`suite gate RUN_DIR`."""

from __future__ import annotations

NAME = "gate"
HELP = "pass/fail a finished run on its gates (exit 0 pass, 1 fail, 2 bad input, 3 inconclusive)"
DESCRIPTION = ("Check a finished run against its recipe's gates (or --policy FILE): "
               "accuracy drop (absolute, relative), non-inferiority on the paired CI, throughput "
               "gain, p99 latency. Prints every gate with measured value, threshold and margin. When "
               "the run is in MLflow, its runs are tagged gate.result / gate.failed, and on a pass each "
               "FP8 variant's checkpoint is registered as <recipe>-<variant> with the alias "
               "'candidate'.")
EXAMPLES = (
    "suite gate runs/20261207-120000-demo-cpu",
    "suite gate runs/20261207-120000-demo-cpu/summary.json --policy release.yaml --no-record",
    "suite gate runs/20261207-120000-demo-cpu --recipe recipes/demo-cpu.yaml",
)


def add_arguments(gate) -> None:
    gate.add_argument("run", help="run folder made by `suite run` (or its summary.json)")
    gate.add_argument("--policy", help="YAML gate policy (the recipe's `gates:` block) to use instead")
    gate.add_argument("--recipe", help="the team's own copy of the recipe (e.g. from its repository): its sha256 must "
                      "be the one the run recorded, and its gates are used (default: the run folder's recipe.yaml, "
                      "checked the same way); exit 3 = inconclusive")
    gate.add_argument("--verify", action="store_true", help="first check the run folder's signed manifest.json "
                      "(HMAC-SHA256 keyed by SUITE_MANIFEST_KEY, written by `suite run` when that variable is set): "
                      "a missing key or manifest, a changed, added or removed file or a bad HMAC is exit 2")
    gate.add_argument("--no-record", action="store_true", help="do not tag the MLflow runs or register anything")


def run(args) -> int:
    from suite.cli.gate import cmd_gate

    return cmd_gate(args)
