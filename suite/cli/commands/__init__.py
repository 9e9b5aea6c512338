"""The registry of `suite` commands: one module per command, listed once below in the order `suite --help`
shows them. A command module defines

    NAME         the command as typed (`suite NAME ...`)
    HELP         one line for `suite --help`
    DESCRIPTION  the paragraph at the top of `suite NAME --help` (None: none)
    EXAMPLES     lines shown under "examples:" at the bottom of `suite NAME --help`
    add_arguments(parser)   its arguments
    run(args) -> int        what it does; returns the exit code (suite.runtime.errors)

Adding a command is one module here and one entry in COMMANDS.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module names under suite.cli.commands, in `suite --help` order
COMMANDS: tuple[str, ...] = (
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
)


def command_modules() -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{name}") for name in COMMANDS]
