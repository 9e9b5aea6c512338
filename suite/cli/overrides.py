"""`--set PATH=VALUE` on `suite run`, `validate` and `plan`: a recipe field changed from the command line.

PATH is the field as the recipe nests it, with ``[i]`` for a list entry: ``eval.tasks[0].limit``,
``throughput.request_rates``, ``variants[1].engine_args.max_num_seqs``, ``gates.max_drop.suite_gsm8k``. It is typed
against the recipe's schema (``suite.recipe.Recipe``) before anything is read: a field the schema does not have, a
list index out of range or a path into a plain value is bad input naming it. VALUE is read as YAML, the way the recipe
file's own values are: ``50`` an integer, ``0.5`` a number, ``true`` a boolean, ``[10, inf]`` a flow sequence,
``{enforce_eager: true}`` a flow mapping, anything else a string; ``null`` removes the field (its default then).
The overrides are applied to the recipe's mapping before validation, so the recipe's own checks judge the values, and
the recipe that runs is the file's with them applied: a run folder's recipe.yaml is that text, headed by a comment
naming the overrides, and its sha256 the one the run records.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import yaml
from pydantic import BaseModel

from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError

MAX_SETS = 64
MAX_SET_CHARS = 4096  # one --set argument: a path and a value a person types, not a recipe
_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d{1,4}\])*)")
_INDEX = re.compile(r"\[(\d+)\]")
FIX = "PATH=VALUE with PATH as the recipe nests it, e.g. eval.tasks[0].limit=50 (`suite schema` lists the fields)"


def parse(items: list[str] | None) -> list[tuple[str, list, object]]:
    """Each ``PATH=VALUE`` as (PATH, its steps: names and list indices, VALUE read as YAML); bad input names it."""
    items = items or []
    if len(items) > MAX_SETS:
        raise SuiteError(Problem("--set", "", f"{len(items)} overrides (at most {MAX_SETS})", "edit the recipe"))
    out = []
    for item in items:
        if len(item) > MAX_SET_CHARS:
            raise SuiteError(Problem("--set", item[:40] + "...", f"{len(item)} characters (at most {MAX_SET_CHARS})",
                                     "edit the recipe for a value this long"))
        path, eq, raw = item.partition("=")
        path = path.strip()
        if not eq or not path:
            raise SuiteError(Problem("--set", item, "not PATH=VALUE", FIX))
        steps = _steps(path)
        try:
            value = safeio.loads_yaml(raw, "--set", "recipe") if raw.strip() else ""  # nesting bounded too
        except yaml.YAMLError as e:
            raise SuiteError(Problem("--set", path, f"the value {raw!r} is not YAML: "
                                     f"{getattr(e, 'problem', None) or str(e).splitlines()[0]}",
                                     "quote it for the shell, e.g. --set 'throughput.request_rates=[1, 4]'")) from None
        out.append((path, steps, value))
    return out


def _steps(path: str) -> list:
    steps: list = []
    for part in path.split("."):
        m = _STEP.fullmatch(part)
        if m is None:
            raise SuiteError(Problem("--set", path, f"{part!r} is not a field name or NAME[INDEX]", FIX))
        steps.append(m.group(1))
        steps += [int(i) for i in _INDEX.findall(m.group(2))]
    return steps


def _args(annotation) -> list:
    """The types a field may hold, Optional / Union / Annotated unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _args(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(annotation) for t in _args(a) if t is not type(None)]
    return [annotation]


def check_path(path: str, steps: list) -> None:
    """Each step must be a field of the schema at that place (a list index into a list, any key into a mapping)."""
    # lazy: `suite --help` imports this module; the recipe schema loads when a command runs
    from suite.recipe import Recipe

    kinds: list = [Recipe]
    where = "the recipe"
    for step in steps:
        if any(k is typing.Any or k is object for k in kinds):
            return  # a free-form field (a calibration reference, engine argument values): the recipe's checks judge it
        nxt: list = []
        for k in kinds:
            origin, args = typing.get_origin(k), typing.get_args(k)
            if isinstance(step, int) and origin in (list, tuple) and args:
                nxt += _args(args[0])
            elif isinstance(step, str) and isinstance(k, type) and issubclass(k, BaseModel) and step in k.model_fields:
                nxt += _args(k.model_fields[step].annotation)
            elif isinstance(step, str) and origin is dict and len(args) == 2:
                nxt += _args(args[1])
        if not nxt:
            raise SuiteError(Problem("--set", path, _not_there(step, kinds, where), FIX))
        kinds, where = nxt, f"{where}.{step}" if isinstance(step, str) else f"{where}[{step}]"


def _not_there(step, kinds: list, where: str) -> str:
    models = [k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)]
    here = where.removeprefix('the recipe.')
    if any(typing.get_origin(k) in (list, tuple) for k in kinds):
        return f"{here} is a list: name an entry by its index, {here}[0].{step}"
    if isinstance(step, int):
        return f"{where.removeprefix('the recipe.')} is not a list: [{step}] indexes nothing"
    if models:
        fields = sorted({f for m in models for f in m.model_fields})
        return (f"unknown field {step!r} in {where.removeprefix('the recipe.')} (its fields: "
                f"{', '.join(fields[:30])}{', ...' if len(fields) > 30 else ''})")
    return f"{where.removeprefix('the recipe.')} is a value, not a section: it has no field {step!r}"


def apply(data: dict, path: str, steps: list, value) -> None:
    """Set ``value`` at ``steps`` in the recipe's mapping (``None``: remove the field); missing sections are made."""
    node = data
    for i, step in enumerate(steps[:-1]):
        here = ".".join(str(s) for s in steps[:i + 1])
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                size = len(node) if isinstance(node, list) else 0
                raise SuiteError(Problem("--set", path, f"[{step}] is out of range: the recipe's list has {size} "
                                         "entr" + ("y" if size == 1 else "ies"), "index an entry the recipe has"))
            node = node[step]
            continue
        if not isinstance(node, dict):
            raise SuiteError(Problem("--set", path, f"{here} is {node!r} in the recipe, not a mapping", FIX))
        if node.get(step) is None:  # a section the recipe leaves to its defaults
            node[step] = {}
        node = node[step]
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise SuiteError(Problem("--set", path, f"[{last}] is out of range", "index an entry the recipe has"))
        node[last] = value
    elif not isinstance(node, dict):
        raise SuiteError(Problem("--set", path, f"the recipe holds {node!r} there, not a mapping", FIX))
    elif value is None:
        node.pop(last, None)
    else:
        node[last] = value


def recipe_text(path: str | Path, items: list[str] | None) -> str | None:
    """The recipe's text with the ``--set`` overrides applied (None: there are none), headed by a comment naming them;
    every problem a SuiteError (exit 2)."""
    # lazy: `suite --help` imports this module; the recipe schema loads when a command runs
    from suite.recipe.load import load_yaml, read_text

    sets = parse(items)
    if not sets:
        return None
    for p, steps, _ in sets:  # typed before the file is read: an unknown field is named as given
        check_path(p, steps)
    data = load_yaml(read_text(Path(path)), str(path))
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", "a recipe is a YAML mapping", "start from `suite init MODEL`"))
    for p, steps, value in sets:
        apply(data, p, steps, value)
    head = "".join(f"# --set {item}\n" for item in items or [])
    return (f"# {Path(path).name} as run, with these overrides from the command line:\n{head}"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def load(path: str | Path, items: list[str] | None, serving: bool = True):
    """The recipe at ``path`` with the ``--set`` overrides applied, loaded and checked (``load_recipe``)."""
    # lazy: `suite --help` imports this module; the recipe schema loads when a command runs
    from suite.recipe import load_recipe

    text = recipe_text(path, items)
    return load_recipe(path, serving=serving) if text is None else load_recipe(path, serving=serving, text=text)


def add_argument(parser) -> None:
    parser.add_argument("--set", action="append", metavar="PATH=VALUE", help="change a recipe field for this "
                        "command: eval.tasks[0].limit=50, throughput.request_rates=[10] (VALUE read as YAML; PATH "
                        "typed against the schema: an unknown field is exit 2); repeatable; a run records the recipe "
                        "with them in its recipe.yaml")
