"""docs/08-extending.md names the code a team extends: every path, ``file.py: NAME``, dotted name, constant and class
it cites in backticks exists in this checkout (a rename that leaves the page behind fails here)."""

from __future__ import annotations

import ast
import builtins
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "08-extending.md"
# names the page cites that are not suite's: another project's, or a placeholder the page explains
NOT_SUITE = {"EngineArgs", "Config", "Result", "NAME", "HH", "MM", "SS", "LEVEL"}


def spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


@lru_cache(maxsize=None)
def defined() -> dict[str, dict[str, set[str]]]:
    """module path -> {'': its top-level names, ClassName: the names its class body defines}."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in sorted([*(ROOT / "suite").rglob("*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("tools/*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        names: dict[str, set[str]] = {"": set()}
        for node in tree.body:
            names[""] |= _bound(node)
            if isinstance(node, ast.ClassDef):
                names[node.name] = set().union(*(_bound(n) for n in node.body)) if node.body else set()
        out[path.relative_to(ROOT).as_posix()] = names
    return out


def _bound(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def _in_module(path: str, dotted: list[str]) -> bool:
    """``dotted`` (NAME or Class.NAME) is defined in the module; a single NAME may also be a field of one of its
    classes (``executor.gpu_fraction``: the recipe section's field, ``summary.artifacts``: RunSummary's)."""
    names = defined().get(path)
    if names is None:
        return False
    if len(dotted) == 1:
        return dotted[0] in names[""] or any(dotted[0] in body for cls, body in names.items() if cls)
    return dotted[0] in names and dotted[1] in names[dotted[0]]


@lru_cache(maxsize=None)
def suite_text() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "suite").rglob("*.py"))


def _module_paths(head: str) -> list[str]:
    """The modules a short name stands for: ``store`` -> suite/orchestrate/store.py (every module of that name)."""
    return [p for p in defined()
            if Path(p).stem == head or (Path(p).stem == "__init__" and Path(p).parent.name == head)]


@lru_cache(maxsize=None)
def groups() -> set[str]:
    """The entry-point groups the five registries read (`suite.gates`, ...): names the page may cite."""
    from suite.analysis.gates.registry import GATES
    from suite.cli.commands import COMMANDS
    from suite.outputs.sinks import SINKS
    from suite.records.schemes import SCHEMES
    from suite.stages.registry import STAGES

    return {reg.group for reg in (STAGES, GATES, SINKS, SCHEMES, COMMANDS)}


def cited_problem(span: str) -> str | None:
    """What is wrong with one backticked citation, or None (it exists, or it is not a citation of code)."""
    text = span.strip()
    if m := re.fullmatch(r"((?:suite|tests|tools)/[\w/.-]+\.py): (\w+)", text):  # file.py: NAME
        return None if _in_module(m[1], [m[2]]) or any(m[2] in d for d in defined().get(m[1], {}).values()) \
            else f"{m[1]} defines no {m[2]}"
    if m := re.fullmatch(r"((?:suite|tests|tools|docs)/[\w/.-]*)", text):  # a path (placeholders <...> do not match)
        return None if (ROOT / m[1]).exists() else f"{m[1]} does not exist"
    name = re.sub(r"\(.*\)$", "", text)  # `register_stage(spec, before=None)` -> register_stage
    if (not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", name) or name in NOT_SUITE or name == "suite"
            or name in groups() or hasattr(builtins, name)):
        return None
    if re.search(r"\.(json|jsonl|py|png|html|yaml|txt|log|lock)$", name):  # a file's name
        return None
    parts = name.split(".")
    if parts[0] == "suite":
        module = "/".join(parts)
        for cut in range(len(parts), 1, -1):  # the longest prefix that is a module, then the names inside it
            for path in (f"{'/'.join(parts[:cut])}.py", f"{'/'.join(parts[:cut])}/__init__.py"):
                if path in defined():
                    rest = parts[cut:]
                    return None if not rest or _in_module(path, rest[:2]) else f"{path} defines no {'.'.join(rest)}"
        return f"no module {module}"
    if len(parts) >= 2 and (mods := _module_paths(parts[0])):  # store.job_key, eval_cache.lookup
        return None if any(_in_module(p, parts[1:3]) for p in mods) else f"no module {parts[0]} defines {parts[1]}"
    if len(parts) >= 2 and any(parts[0] in names for names in defined().values()):  # JobLoop.looked_up
        return None if any(parts[1] in names.get(parts[0], ()) for names in defined().values()) \
            else f"class {parts[0]} has no {parts[1]}"
    if len(parts) == 1 and (re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", name) or re.fullmatch(r"(?:[A-Z][a-z0-9]+){2,}", name)):
        found = any(name in names[""] for names in defined().values()) or f'"{name}"' in suite_text()  # or a setting
        return None if found else f"{name} is defined nowhere in suite/"
    return None


def test_every_name_the_extending_page_cites_exists():
    problems = sorted({f"`{s}`: {why}" for s in spans(PAGE.read_text()) if (why := cited_problem(s))})
    assert not problems, "docs/08-extending.md cites what is not there:\n" + "\n".join(problems)


def test_the_check_catches_a_name_that_is_gone():
    assert cited_problem("NO_SUCH_TABLE") == "NO_SUCH_TABLE is defined nowhere in suite/"
    assert cited_problem("store.STAGE_KEYS") == "no module store defines STAGE_KEYS"
    assert cited_problem("suite/orchestrate/store.py: RunFolder") is None
    assert cited_problem("suite/orchestrate/store.py: FILE_FIELDS") == \
        "suite/orchestrate/store.py defines no FILE_FIELDS"
    assert cited_problem("suite.stages.registry.run_order") is None
    assert cited_problem("suite.stages.registry.RUN_ORDER") == "suite/stages/registry.py defines no RUN_ORDER"
    assert cited_problem("suite/stages/nothing_here.py") == "suite/stages/nothing_here.py does not exist"
    assert cited_problem("JobLoop.looked_up") is None and cited_problem("JobLoop.gone") == "class JobLoop has no gone"
    assert cited_problem("suite.gates") is None and cited_problem("suite.widgets") == "no module suite/widgets"
