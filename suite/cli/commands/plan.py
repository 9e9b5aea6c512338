"""`suite plan RECIPE`."""

from __future__ import annotations

from suite.cli.overrides import add_argument

NAME = "plan"
HELP = "print the stage jobs a recipe would run (JSON), without running them"
DESCRIPTION = None
EXAMPLES = (
    "suite plan recipes/demo-cpu.yaml",
    "suite plan recipes/llama3-8b.yaml --jobs --executor ray",
)


def add_arguments(plan) -> None:
    plan.add_argument("recipe")
    plan.add_argument("--out", help="parent folder for run folders")
    plan.add_argument("--jobs", action="store_true",
                      help="a table of the jobs instead of JSON: what each waits for and the GPUs, CPUs and memory "
                           "it asks for")
    plan.add_argument("--executor", help="as `suite run --executor`")
    add_argument(plan)


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.recipe import cmd_plan

    return cmd_plan(args)
