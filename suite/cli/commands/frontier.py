"""`suite frontier RUN...`."""

from __future__ import annotations

NAME = "frontier"
HELP = ("accuracy against throughput across runs and recipes, Pareto front "
        "marked (PNG + self-contained HTML)")
DESCRIPTION = "Each variant of each run is a point; BF16 baselines are marked."
EXAMPLES = (
    "suite frontier runs/llama3-8b-A runs/qwen-B --out frontier/",
    "suite frontier runs/llama3-8b-A --accuracy acc.suite_gsm8k --throughput slo",
)


def add_arguments(fr) -> None:
    fr.add_argument("runs", nargs="+", help="run folders (with summary.json)")
    fr.add_argument("--out", default=".", help="folder for frontier.png and frontier.html (default: here)")
    fr.add_argument("--accuracy", default="acc.mean", help="acc.mean (default) or acc.<task>")
    fr.add_argument("--throughput", choices=["saturation", "slo"], default="saturation",
                    help="headline load point's tok/s (default) or tok/s at the sustainable SLO rate; runs whose "
                    "recipe prices a GPU hour (throughput.gpu_hour_cost) also get frontier-cost.png and cost charts: "
                    "accuracy against cost per 1M output tokens at the same point (lower is better)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.report import cmd_frontier

    return cmd_frontier(args)
