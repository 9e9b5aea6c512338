"""`suite validate RECIPE`."""

from __future__ import annotations

from suite.cli.overrides import add_argument

NAME = "validate"
HELP = "check a recipe without loading any model"
DESCRIPTION = ("Validate a recipe: schema, files, calibration sets, task names, "
               "and what the installed vLLM build can serve. Exit 2 with one line per problem.")
EXAMPLES = ("suite validate recipes/demo-cpu.yaml",
            "suite validate recipes/demo-cpu.yaml --set eval.tasks[0].limit=50 --set throughput.request_rates=[10]")


def add_arguments(val) -> None:
    val.add_argument("recipe")
    add_argument(val)


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.recipe import cmd_validate

    return cmd_validate(args)
