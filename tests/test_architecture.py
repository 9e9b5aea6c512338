"""The rules that keep the package's shape: import contracts (.importlinter), module size, module docstrings."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "suite"

# Issue 38's aims, reached and now held: no module over MODULE_LINES lines, no function over FUNCTION_LINES. An
# exception is an entry below with its reason (the lists start empty; a stale entry fails).
MODULE_LINES = 400
FUNCTION_LINES = 60
LONG_MODULES_ALLOWED: dict[str, str] = {}    # "suite/x/y.py": "why it must stay one module"
LONG_FUNCTIONS_ALLOWED: dict[str, str] = {}  # "suite/x/y.py:name": "why it must stay one function"


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    if exe.exists():
        return str(exe)
    found = shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]' (import-linter)")
    return found


def test_import_contracts_are_kept():
    """Every contract in .importlinter holds (ARCHITECTURE.md's import rules); the output names each broken
    one with the import chain that breaks it."""
    proc = subprocess.run([_lint_imports(), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"lint-imports failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"


def test_no_module_is_over_its_aim():
    lines = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in _modules()}
    over = {m: n for m, n in lines.items() if n > MODULE_LINES and m not in LONG_MODULES_ALLOWED}
    assert not over, (f"modules over {MODULE_LINES} lines: {over}: split them, or name the exception with its "
                      "reason in LONG_MODULES_ALLOWED")
    stale = [m for m in LONG_MODULES_ALLOWED if lines.get(m, 0) <= MODULE_LINES]
    assert not stale, f"LONG_MODULES_ALLOWED names modules that are not over {MODULE_LINES} lines: {stale}"


def _function_lengths() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{rel}:{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_is_over_its_aim():
    lengths = _function_lengths()
    over = {f: n for f, n in lengths.items() if n > FUNCTION_LINES and f not in LONG_FUNCTIONS_ALLOWED}
    assert not over, (f"functions over {FUNCTION_LINES} lines: {over}: split them into their steps, or name the "
                      "exception with its reason in LONG_FUNCTIONS_ALLOWED")
    stale = [f for f in LONG_FUNCTIONS_ALLOWED if lengths.get(f, 0) <= FUNCTION_LINES]
    assert not stale, f"LONG_FUNCTIONS_ALLOWED names functions that are not over {FUNCTION_LINES} lines: {stale}"


def test_every_module_opens_with_a_line_that_says_what_it_is():
    missing, blank_first_line = [], []
    for p in _modules():
        rel = p.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(p.read_text(), filename=rel), clean=True)
        if not doc:
            missing.append(rel)
        elif not doc.splitlines()[0].strip():
            blank_first_line.append(rel)
    assert not missing, f"modules without a docstring: {missing}"
    assert not blank_first_line, f"docstrings whose first line is blank: {blank_first_line}"


# Issue 38: the stage registry (suite/stages/registry.py) is the only place a stage is described. Outside
# suite/stages/, a stage is named by the registry's constants (QUANTIZE, EVALUATE, ...) and its properties are
# read from its StageSpec, never by a string literal. An environment's name is not a stage's even where the two
# are spelled alike ('quantize'): it is written as ``Environment("quantize")`` (suite.runtime.envs), and only the
# argument of such a call is told apart. What is left is listed here with its reason; this list only shrinks (a
# file's count may not grow, and an entry that no longer matches must be removed).
STAGE_NAMES = {"quantize", "kvcheck", "evaluate", "benchmark"}
STAGE_LITERALS_ALLOWED: dict[str, tuple[int, str]] = {
    "records/migrate.py": (4, "the version-1 summary's per-stage field names, a fixed past format the migration to "
                              "version 2 reads (records import nothing above them, so not the registry's constants)"),
}


def _environment_names(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are the one argument of an ``Environment(...)`` call."""
    return {id(node.args[0]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Environment"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)}


def _literal_lines(source: str, name: str = "<source>") -> list[int]:
    """The lines of ``source``'s stage-name string literals (an ``Environment(...)``'s argument is not one)."""
    tree = ast.parse(source, name)
    environments = _environment_names(tree)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in STAGE_NAMES and id(node) not in environments]


def _stage_literals() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("stages/") or not (lines := _literal_lines(path.read_text(), str(path))):
            continue
        found[rel] = lines
    return found


def test_the_literal_check_tells_an_environments_name_from_a_stages_only_in_environment_calls():
    source = """x = "evaluate"
QUANTIZE_ENV = Environment("quantize")
y = Environment("quantize", "kvcheck")
z = env(Environment, "benchmark")
w = {"quantize": Environment}
"""
    assert sorted(_literal_lines(source)) == [1, 3, 3, 4, 5]


def test_no_stage_name_literal_outside_the_stages():
    found = _stage_literals()
    problems = []
    for rel, lines in sorted(found.items()):
        allowed, _why = STAGE_LITERALS_ALLOWED.get(rel, (0, ""))
        if len(lines) > allowed:
            problems.append(f"suite/{rel}: {len(lines)} stage-name literal(s) (allowed {allowed}) at lines "
                            f"{sorted(set(lines))}: use suite.stages.registry's constants or a StageSpec property")
    problems += [f"suite/{rel}: listed in STAGE_LITERALS_ALLOWED but has none: remove the entry"
                 for rel in STAGE_LITERALS_ALLOWED if rel not in found]
    assert not problems, "\n".join(problems)


# Issue 38: a stage process says what it does through ``logging.getLogger(__name__)``; the stage entry
# (suite/stages/__main__.py setup_logging) sets up the one handler, which gives each line the time and the stage.
# Direct writes to stdout / stderr are left only where a line must be bare, each listed with its reason.
STREAM_WRITES_ALLOWED = {
    "stages/__main__.py": (2, "the usage line, before the handler exists; the refused result's 'RuntimeError: ...' "
                              "line, which the parent reports as the failure (procs.error_line matches it at a "
                              "line's start)"),
}


def _prints_and_stream_writes(rel_dir: str) -> tuple[list[str], dict[str, list[int]]]:
    prints, writes = [], {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(rel_dir):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "print":
                prints.append(f"suite/{rel}:{node.lineno}")
            elif (isinstance(func, ast.Attribute) and func.attr == "write" and isinstance(func.value, ast.Attribute)
                  and func.value.attr in ("stdout", "stderr") and isinstance(func.value.value, ast.Name)
                  and func.value.value.id == "sys"):
                writes.setdefault(rel, []).append(node.lineno)
    return prints, writes


def test_stage_processes_log_through_logging_not_print():
    prints, writes = _prints_and_stream_writes("stages/")
    assert not prints, ("print() in a stage module: log through logging.getLogger(__name__) (the stage entry's "
                        f"handler writes it to the stage's log): {prints}")
    problems = [f"suite/{rel}: {len(lines)} sys.stdout/sys.stderr write(s) (allowed "
                f"{STREAM_WRITES_ALLOWED.get(rel, (0, ''))[0]}) at lines {lines}: log through logging instead"
                for rel, lines in sorted(writes.items()) if len(lines) > STREAM_WRITES_ALLOWED.get(rel, (0, ""))[0]]
    problems += [f"suite/{rel}: listed in STREAM_WRITES_ALLOWED but has fewer: lower its count"
                 for rel, (n, _why) in STREAM_WRITES_ALLOWED.items() if len(writes.get(rel, [])) < n]
    assert not problems, "\n".join(problems)
