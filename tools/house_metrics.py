"""Issue 38's aims, measured: modules over 400 lines, functions over 60 lines, imports back up a floor, import
circles, KNOWN exceptions in .importlinter, the runner's suite imports, stage-name literals outside suite/stages/.

    .venv/bin/python tools/house_metrics.py [ROOT]     # ROOT: a checkout (default: this one)
    .venv/bin/python tools/house_metrics.py --json

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


def stage_literals(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in modules(root):
        rel = p.relative_to(root / "suite").as_posix()
        if rel.startswith("stages/"):
            continue
        tree = ast.parse(p.read_text())
        # the argument of Environment("quantize") is an environment's name, not a stage's (tests/test_architecture.py)
        environments = {id(c.args[0]) for c in ast.walk(tree) if isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Name) and c.func.id == "Environment"
                        and len(c.args) == 1 and not c.keywords}
        n = sum(isinstance(x, ast.Constant) and x.value in STAGE_NAMES and id(x) not in environments
                for x in ast.walk(tree))
        if n:
            out[rel] = n
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
