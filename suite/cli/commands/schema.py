"""`suite schema`."""

from __future__ import annotations

NAME = "schema"
HELP = "print the recipe JSON schema, with every field described"
DESCRIPTION = None
EXAMPLES = ("suite schema > recipe.schema.json",)


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.tasks import cmd_schema

    return cmd_schema(args)
