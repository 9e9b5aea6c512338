"""The house's aims, measured (issues 38 and 46): modules over 400 lines, functions over 60 lines, imports back up a
floor, import circles, KNOWN exceptions in .importlinter, the runner's suite imports, stage-name literals outside
suite/stages/; and how big it is: lines in suite/, function-local imports of suite.* (each listed, with the comment
that says why it is not at the top), re-export shims, stage-name attribute reads outside suite/stages/ and
suite/records/, and the files a new stage touches.

    .venv/bin/python tools/house_metrics.py [ROOT]     # ROOT: a checkout (default: this one)
    .venv/bin/python tools/house_metrics.py --json

A function-local import's reason is a comment on its line or on the lines just above it. A re-export shim is a
module-level name a module binds from ``suite.*`` (``from suite.a import b``, ``x = module.x``) and never uses
itself: it is there only for others to import from it instead of from the name's home.

Imports back up a floor: the contracts lint-imports finds broken (run against ROOT) plus the ignore_imports lines
of the layers contract (each an import that runs up a floor, allowed by name). Circles: the ignore_imports lines
of the acyclic contract. KNOWN: the circles and the ignore lines under a comment marked KNOWN.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

MODULE_AIM = 400
FUNCTION_AIM = 60
STAGE_NAMES = {"quantize", "kvcheck", "evaluate", "benchmark"}


def modules(root: Path) -> list[Path]:
    return sorted(p for p in (root / "suite").rglob("*.py") if "__pycache__" not in p.parts)


def long_modules(root: Path) -> list[tuple[str, int]]:
    out = [(p.relative_to(root).as_posix(), len(p.read_text().splitlines())) for p in modules(root)]
    return sorted(((m, n) for m, n in out if n > MODULE_AIM), key=lambda x: -x[1])


def long_functions(root: Path) -> list[tuple[str, int]]:
    out = []
    for p in modules(root):
        rel = p.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_AIM:
                    out.append((f"{rel}:{node.name}", n))
    return sorted(out, key=lambda x: -x[1])


def _ignore_lines(text: str) -> dict[str, list[tuple[str, bool]]]:
    """contract section -> [(ignored import, marked KNOWN)]."""
    out: dict[str, list[tuple[str, bool]]] = {}
    section, in_ignores, known, prev_comment = None, False, False, False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            section, in_ignores, known, prev_comment = s[1:-1], False, False, False
            continue
        if re.match(r"^\w+\s*=", line):
            in_ignores, known, prev_comment = line.split("=")[0].strip() == "ignore_imports", False, False
            continue
        if not in_ignores or not s:
            continue
        if s.startswith("#"):  # a comment block says what the lines below it are
            known = ("KNOWN" in s) or (prev_comment and known)
            prev_comment = True
            continue
        prev_comment = False
        out.setdefault(section, []).append((s, known))
    return out


def importlinter(root: Path) -> dict:
    text = (root / ".importlinter").read_text()
    ignores = _ignore_lines(text)
    cfg = configparser.ConfigParser()
    cfg.read_string(text)
    types = {sec: cfg[sec].get("type") for sec in cfg.sections()}
    layers = [i for sec, lst in ignores.items() if types.get(sec) == "layers" for i, _ in lst]
    circles = [i for sec, lst in ignores.items() if types.get(sec) == "acyclic_siblings" for i, _ in lst]
    # every circle is a known departure; elsewhere, the lines under a comment marked KNOWN
    known = sorted({i for lst in ignores.values() for i, k in lst if k} | set(circles))
    return {"layers_ignores": layers, "circles": circles, "known": known}


def broken_contracts(root: Path) -> int | None:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        return None
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([str(exe), "--no-cache", "--config", str(root / ".importlinter")], cwd=root, env=env,
                          capture_output=True, text=True)
    m = re.search(r"(\d+) broken", done.stdout)
    return int(m.group(1)) if m else None


def runner_imports(root: Path) -> list[str]:
    path = root / "suite" / "orchestrate" / "runner.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("suite"):
            base = root.joinpath(*node.module.split("."))
            for a in node.names:  # `from suite.orchestrate import jobs`: the module suite.orchestrate.jobs
                sub = base / a.name
                found.add(f"{node.module}.{a.name}" if sub.with_suffix(".py").is_file() or sub.is_dir()
                          else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("suite"))
    return sorted(found)


def _count_outside(root: Path, skip: tuple[str, ...], count) -> dict[str, int]:
    """suite/-relative module -> ``count(tree)``, for each module not under ``skip`` whose count is not 0."""
    out: dict[str, int] = {}
    for p in modules(root):
        rel = p.relative_to(root / "suite").as_posix()
        if not rel.startswith(skip) and (n := count(ast.parse(p.read_text(), str(p)))):
            out[rel] = n
    return out


def _stage_literal_count(tree: ast.AST) -> int:
    # the argument of Environment("quantize") is an environment's name, not a stage's (tests/test_architecture.py)
    environments = {id(c.args[0]) for c in ast.walk(tree) if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Name) and c.func.id == "Environment"
                    and len(c.args) == 1 and not c.keywords}
    return sum(isinstance(x, ast.Constant) and x.value in STAGE_NAMES and id(x) not in environments
               for x in ast.walk(tree))


def stage_literals(root: Path) -> dict[str, int]:
    return _count_outside(root, ("stages/",), _stage_literal_count)


def suite_lines(root: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in modules(root))


def _reason(lines: list[str], lineno: int) -> str | None:
    """The comment that says why the import at ``lineno`` (1-based) is where it is: on its line, or just above."""
    own = lines[lineno - 1]
    if "#" in own:
        return own.split("#", 1)[1].strip()
    above = []
    for line in reversed(lines[:lineno - 1]):
        if not line.strip().startswith("#"):
            break
        above.insert(0, line.strip().lstrip("#").strip())
    return " ".join(above) or None


def _imported(node: ast.AST) -> str | None:
    """The suite module an import statement imports from (``suite.x``), else None."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "suite":
        return node.module
    if isinstance(node, ast.Import):
        return next((a.name for a in node.names if a.name.split(".")[0] == "suite"), None)
    return None


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_graph(root: Path) -> dict[str, set[str]]:
    """module -> the suite modules its module-level imports run (TYPE_CHECKING blocks and functions excluded)."""
    names = {_module_name(root, p) for p in modules(root)}
    graph: dict[str, set[str]] = {}
    for p in modules(root):
        found: set[str] = set()
        todo = list(ast.parse(p.read_text(), str(p)).body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.If, ast.Try)) and not _type_checking(node):
                todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                         *(n for h in getattr(node, "handlers", []) for n in h.body)]
            elif (module := _imported(node)) is not None:
                found |= _runs(node, module, names)
        graph[_module_name(root, p)] = found
    return graph


def _executed(dotted: str, names: set[str]) -> set[str]:
    """The suite modules importing ``dotted`` runs: it and its packages."""
    parts = dotted.split(".")
    return {m for i in range(1, len(parts) + 1) if (m := ".".join(parts[:i])) in names}


def _runs(node: ast.AST, module: str, names: set[str]) -> set[str]:
    """The suite modules an import statement of ``module`` runs (``from a import b``: b too, when b is a module)."""
    found = _executed(module, names)
    if isinstance(node, ast.ImportFrom):
        found |= {m for a in node.names for m in _executed(f"{module}.{a.name}", names)}
    return found


def _reaches(graph: dict[str, set[str]], start: set[str], goal: str) -> bool:
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, ())
    return False


def local_imports(root: Path) -> list[dict]:
    """Every import of ``suite.*`` inside a function: where, what, the comment that says why (None: none), and
    ``circular``: whether the target's module-level imports lead back to this module (package ``__init__``s
    included)."""
    graph, names = _top_level_graph(root), {_module_name(root, p) for p in modules(root)}
    out = []
    for p in modules(root):
        rel, text = p.relative_to(root).as_posix(), p.read_text()
        lines, seen = text.splitlines(), set()
        for fn in ast.walk(ast.parse(text, str(p))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (module := _imported(node)) and node.lineno not in seen:
                    seen.add(node.lineno)
                    out.append({"at": f"{rel}:{node.lineno}", "module": module, "why": _reason(lines, node.lineno),
                                "circular": _reaches(graph, _runs(node, module, names), _module_name(root, p))})
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _package(rel: str) -> str:
    parts = rel[:-3].split("/")
    return ".".join(parts if parts[-1] == "__init__" else parts[:-1]).removesuffix(".__init__")


def reexport_shims(root: Path) -> list[str]:
    """Module-level names a module binds from ``suite.*`` only for others to import (it never uses them; a module of
    its own package imported unused is a registration, not a shim), and every ``x = module.x`` alias of a name
    another suite module holds. A package's ``__init__.py`` that declares ``__all__`` is an interface, counted apart
    (``package_interfaces``)."""
    out = []
    for p in modules(root):
        rel, tree = p.relative_to(root).as_posix(), ast.parse(p.read_text(), str(p))
        if p.name == "__init__.py" and any(isinstance(n, ast.Assign) and "__all__" in ast.unparse(n.targets[0])
                                           for n in tree.body):
            continue
        aliases = {a.asname or a.name.split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                   and _imported(n) for a in n.names}
        loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and _imported(node) and not _type_checking(node):
                for a in node.names:
                    name, dotted = a.asname or a.name, f"{node.module}.{a.name}"
                    if name in loads:
                        continue
                    if _is_module(root, dotted) and dotted.startswith(_package(rel) + "."):
                        continue  # one of its own package's modules, imported to register what it holds
                    out.append(f"{rel}:{node.lineno} {name}")
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                  and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name)
                  and node.value.value.id in aliases):
                out.append(f"{rel}:{node.lineno} {node.targets[0].id} = {ast.unparse(node.value)}")
    return sorted(out)


def package_interfaces(root: Path) -> list[str]:
    """Packages whose ``__init__.py`` re-exports names under ``__all__`` (their declared interface)."""
    out = []
    for p in modules(root):
        if p.name == "__init__.py" and "__all__" in p.read_text():
            tree = ast.parse(p.read_text())
            n = sum(len(x.names) for x in tree.body if isinstance(x, ast.ImportFrom) and _imported(x))
            out.append(f"{p.relative_to(root).as_posix()} ({n} names)")
    return out


def stage_attribute_reads(root: Path) -> dict[str, int]:
    """``x.quantize``, ``vs.evaluate``...: reads of one stage's result by attribute, outside stages/ and records/."""
    return _count_outside(root, ("stages/", "records/"), lambda tree: sum(
        isinstance(x, ast.Attribute) and x.attr in STAGE_NAMES for x in ast.walk(tree)))


def files_a_new_stage_touches(root: Path) -> list[str]:
    """What adding a stage takes: its own package and its StageSpec, plus each file that lists the stages one by
    one (the summary's VariantSummary with a field per stage: a new stage's result needs its field there)."""
    out = ["its subpackage (suite/stages/NAME/, or a package of its own)",
           "its StageSpec (suite/stages/registry.py, register_stage, or an entry point of group suite.stages)"]
    summary = root / "suite" / "records" / "summary.py"
    if summary.is_file():
        for cls in ast.walk(ast.parse(summary.read_text())):
            if isinstance(cls, ast.ClassDef) and cls.name == "VariantSummary":
                fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target,
                                                                                                      ast.Name)}
                if STAGE_NAMES <= fields:
                    out.append("suite/records/summary.py (VariantSummary has a field per stage)")
    return out


def measure(root: Path) -> dict:
    lint = importlinter(root)
    broken = broken_contracts(root)
    return {
        "modules_over_400": long_modules(root),
        "functions_over_60": long_functions(root),
        "broken_contracts": broken,
        "imports_back_up_a_floor": (broken or 0) + len(lint["layers_ignores"]),
        "circles": lint["circles"],
        "known_ignores": lint["known"],
        "runner_suite_imports": runner_imports(root),
        "stage_literals_outside_stages": stage_literals(root),
        "suite_lines": suite_lines(root),
        "function_local_suite_imports": local_imports(root),
        "reexport_shims": reexport_shims(root),
        "package_interfaces": package_interfaces(root),
        "stage_attribute_reads_outside_stages_and_records": stage_attribute_reads(root),
        "files_a_new_stage_touches": files_a_new_stage_touches(root),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    m = measure(Path(args.root).resolve())
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    print(f"modules over {MODULE_AIM} lines: {len(m['modules_over_400'])}")
    for name, n in m["modules_over_400"]:
        print(f"  {n:5d}  {name}")
    print(f"functions over {FUNCTION_AIM} lines: {len(m['functions_over_60'])}")
    for name, n in m["functions_over_60"]:
        print(f"  {n:5d}  {name}")
    print(f"imports back up a floor: {m['imports_back_up_a_floor']} (broken contracts: {m['broken_contracts']}, "
          f"layers ignore lines: {m['imports_back_up_a_floor'] - (m['broken_contracts'] or 0)})")
    print(f"circles (acyclic ignore lines): {len(m['circles'])}")
    for c in m["circles"]:
        print(f"  {c}")
    print(f"KNOWN ignore lines: {len(m['known_ignores'])}")
    for c in m["known_ignores"]:
        print(f"  {c}")
    print(f"runner's suite imports: {len(m['runner_suite_imports'])} (aim <= 6)")
    for c in m["runner_suite_imports"]:
        print(f"  {c}")
    lits = m["stage_literals_outside_stages"]
    print(f"stage-name literals outside suite/stages/: {sum(lits.values())} in {len(lits)} modules")
    for name, n in sorted(lits.items(), key=lambda x: -x[1]):
        print(f"  {n:5d}  suite/{name}")
    print_size(m)
    return 0


def print_size(m: dict) -> None:
    """How big it is (issue 46.7)."""
    print(f"lines in suite/: {m['suite_lines']}")
    local = m["function_local_suite_imports"]
    bare = [i for i in local if not i["why"]]
    print(f"function-local imports of suite.*: {len(local)} ({len(bare)} without a comment saying why, "
          f"{sum(i['circular'] for i in bare)} of those with module-level imports leading back)")
    for i in local:
        why = i["why"] or ("(no reason given; the module-level imports from there lead back here)" if i["circular"]
                           else "(no reason given)")
        print(f"  {i['at']}  {i['module']}  -- {why}")
    print(f"re-export shims: {len(m['reexport_shims'])}")
    for shim in m["reexport_shims"]:
        print(f"  {shim}")
    print(f"package interfaces (__init__.py with __all__, not counted as shims): {len(m['package_interfaces'])}")
    for name in m["package_interfaces"]:
        print(f"  {name}")
    reads = m["stage_attribute_reads_outside_stages_and_records"]
    print(f"stage-name attribute reads outside suite/stages/ and suite/records/: {sum(reads.values())} in "
          f"{len(reads)} modules")
    touches = m["files_a_new_stage_touches"]
    print(f"files a new stage touches: {len(touches)}")
    for t in touches:
        print(f"  {t}")


if __name__ == "__main__":
    sys.exit(main())
