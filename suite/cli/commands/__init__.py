"""The registry of `suite` commands: one module per command, listed once below in the order `suite --help`
shows them. A command module defines

    NAME         the command as typed (`suite NAME ...`)
    HELP         one line for `suite --help`
    DESCRIPTION  the paragraph at the top of `suite NAME --help` (None: none)
    EXAMPLES     lines shown under "examples:" at the bottom of `suite NAME --help`
    add_arguments(parser)   its arguments
    run(args) -> int        what it does; returns the exit code (suite.runtime.errors)

Adding a command is one module here and one name below; a package outside ``suite`` adds one with an entry point of
the group ``suite.commands`` naming its module (``NAME = package.module``), listed after these. ``COMMANDS`` is a
``suite.records.registry.Registry``: each module is imported when the parser is built.
"""

from __future__ import annotations

from types import ModuleType

from suite.records.registry import Registry

COMMANDS: Registry[ModuleType] = Registry("command", "suite.commands", base=ModuleType)
# module names under suite.cli.commands, in `suite --help` order
for _name in (
    "init",
    "run",
    "sync",
    "summarize",
    "report",
    "compare",
    "frontier",
    "data",
    "sensitivity",
    "validate",
    "plan",
    "gate",
    "score_code",
    "schema",
    "tasks",
):
    COMMANDS.register(_name, f"{__name__}.{_name}")


def command_modules() -> list[ModuleType]:
    return list(COMMANDS.values())
