"""`suite compare RUN_A RUN_B`."""

from __future__ import annotations

NAME = "compare"
HELP = ("two runs of the same recipe: which accuracy and throughput figures "
        "moved beyond noise, and which package versions changed")
DESCRIPTION = ("Accuracy: run B against run A item by item (paired 95% CI; moved when it "
               "excludes 0). Throughput: median and repetition range per load point (moved when the "
               "ranges do not overlap and the change exceeds --min-tput-change).")
EXAMPLES = (
    "suite compare runs/demo-cpu-A runs/demo-cpu-B",
    "suite compare runs/demo-cpu-A runs/demo-cpu-B --min-tput-change 0.1 --json",
)


def add_arguments(cmp_) -> None:
    cmp_.add_argument("run_a", help="the reference run folder")
    cmp_.add_argument("run_b", help="the run to compare with it")
    cmp_.add_argument("--min-tput-change", type=float, default=0.05, help="smallest relative throughput change "
                      "that counts (default 0.05)")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.compare import cmd_compare

    return cmd_compare(args)
