"""`suite tasks`."""

from __future__ import annotations

NAME = "tasks"
HELP = "list the local lm-eval tasks in tasks/"
DESCRIPTION = None
EXAMPLES = ("suite tasks",)


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    from suite.cli.recipe import cmd_tasks

    return cmd_tasks(args)
