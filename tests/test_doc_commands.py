"""Every `suite` command the guide and the README quote still exists as written: the guide cannot drift.

Each command quoted in ``docs/*.md`` and ``README.md`` (lines of fenced blocks that start with ``suite`` or
``.venv/bin/suite``, and inline code spans that do) is checked against the CLI's own parser: its command exists and
so does every ``--option`` it names; every file it names exists in the checkout. A quoted command with no
placeholder (RUN_DIR, RECIPE, [..], <..>) that runs on a CPU machine in seconds (``RUN_ON_CPU``) is also run, and must
exit 0. The rest are not run here: ``suite run`` of a GPU recipe (GPU only), and commands on a run folder, which
the tests of each command cover on folders they make.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b|[\[\]<>|]|\.\.\.")
RUN_ON_CPU = {"schema", "tasks", "validate", "plan"}  # commands that need no model, GPU or run folder
GPU_ONLY_RECIPES = ("recipes/llama3-8b", "recipes/llama3-70b", "recipes/smollm2-gpu", "recipes/qwen2.5", "studies/")


def quoted() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.splitlines():
                line = line.strip()
                if re.match(r"(\.venv/bin/)?suite( |$)", line) and "─▶" not in line:  # 08's map is no command
                    found.append((page.name, line.split("  #")[0].split(" # ")[0].strip()))
        for span in re.findall(r"`((?:\.venv/bin/)?suite [^`]+)`", text):
            found.append((page.name, span.strip()))
    return sorted(set(found))


def _parser():
    from suite.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return parser, sub.choices


def test_the_pages_quote_commands():
    assert len(quoted()) >= 40  # the extraction still finds the guide's commands


@pytest.mark.parametrize("page,command", quoted())
def test_a_quoted_command_exists_with_its_options_and_files(page, command):
    parser, commands = _parser()
    words = command.replace(".venv/bin/suite", "suite", 1).split()[1:]
    if not words or words[0].startswith("-"):
        options = {o for a in parser._actions for o in a.option_strings} | {"--help"}
        sub = None
    else:
        name = words[0].split("|")[0]
        if PLACEHOLDER.search(name):  # `suite NAME --help`: any command
            return
        assert name in commands, f"{page}: `{command}`: no command `suite {name}`"
        sub = commands[name]
        options = {o for a in sub._actions for o in a.option_strings}
    for word in words:
        for flag in re.findall(r"--[a-z][a-z0-9-]*", word):
            assert flag in options, f"{page}: `{command}`: `{flag}` is not an option of it"
        path = word.strip("[]")
        if "/" in path and re.search(r"\.(ya?ml|json|py|jsonl)$", path) and not PLACEHOLDER.search(path):
            assert (ROOT / path).exists(), f"{page}: `{command}`: no file {path} in the checkout"


def runnable() -> list[tuple[str, str]]:
    """(first page quoting it, command), once per command."""
    out: list[tuple[str, str]] = []
    for page, command in quoted():
        words = command.split()[1:]
        if PLACEHOLDER.search(command) or any(g in command for g in GPU_ONLY_RECIPES):
            continue
        takes_none = words in (["schema"], ["tasks"])  # `suite plan` alone is a mention of the command, not a call
        if not words or words[-1] == "--help" or (words[0] in RUN_ON_CPU and (len(words) > 1 or takes_none)):
            if command not in {c for _, c in out}:
                out.append((page, command))
    return out


def test_some_quoted_commands_run():
    assert len(runnable()) >= 5


@pytest.mark.parametrize("page,command", runnable())
def test_a_quoted_command_runs_on_a_cpu_machine(page, command):
    argv = shlex.split(command.replace(".venv/bin/suite", "suite", 1))[1:]
    res = subprocess.run([sys.executable, "-m", "suite", *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"{page}: `{command}` exited {res.returncode}: {res.stderr[-1500:]}"
