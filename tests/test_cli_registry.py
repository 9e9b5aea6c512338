"""The command registry (suite.cli.commands): every command is one module with its arguments, its run and
examples in its --help; `suite --help` lists the exit codes from suite.runtime.errors."""

from __future__ import annotations

import pytest

from suite.cli import build_parser
from suite.cli.commands import COMMANDS, command_modules
from suite.runtime import errors


def test_every_command_module_declares_the_contract():
    names = []
    for mod in command_modules():
        for attr in ("NAME", "HELP", "DESCRIPTION", "EXAMPLES", "add_arguments", "run"):
            assert hasattr(mod, attr), f"{mod.__name__} lacks {attr}"
        assert mod.EXAMPLES, f"{mod.__name__}: add at least one example"
        names.append(mod.NAME)
    assert len(set(names)) == len(COMMANDS)


@pytest.mark.parametrize("name", [m.NAME for m in command_modules()])
def test_help_shows_examples(name, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([name, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:\n" in out and f"  suite {name}" in out


def test_run_help_shows_the_demo_recipe(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    assert "suite run recipes/demo-cpu.yaml" in capsys.readouterr().out


def test_exit_codes_come_from_errors():
    text = errors.exit_codes_text()
    assert text.startswith("exit codes: 0 ok, 1 a gate failed, 2 bad input or environment")
    assert text in build_parser().description
    for name in errors.EXIT_MEANINGS:
        if hasattr(errors, name):
            assert f"{getattr(errors, name)} " in text


def test_a_command_dispatches_to_its_run():
    args = build_parser().parse_args(["tasks"])
    from suite.cli.commands import tasks

    assert args.func is tasks.run
