"""Reading a recipe: YAML without duplicate keys, validation errors as Problems that name the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import BaseModel, ValidationError

from suite._data import folder
from suite.recipe.checks import check_references
from suite.recipe.loaded import LoadedRecipe
from suite.recipe.schema import GateSpec, Recipe
from suite.runtime import safeio
from suite.runtime.yaml_aliases import alias_problem
from suite.runtime.errors import Problem, SuiteError


def _strip(t):
    """The type under Optional[...] / Annotated[...] (one level of each)."""
    import typing

    if typing.get_origin(t) is Annotated:
        t = typing.get_args(t)[0]
    if typing.get_origin(t) in (Union, getattr(__import__("types"), "UnionType", Union)):
        members = [a for a in typing.get_args(t) if a is not type(None)]
        if len(members) == 1:
            return _strip(members[0])
    return t


def _walk(root, loc: tuple) -> tuple[str, object]:
    """(the field path as a recipe writes it, the type there) for a pydantic error location; the union
    member tags pydantic puts in locations ('int', "literal['inf']", 'list[CalibrationMix]') are dropped."""
    import typing

    out, t = "", root
    for part in loc:
        t = _strip(t)
        origin, args = typing.get_origin(t), typing.get_args(t)
        if isinstance(part, int) and origin in (list, tuple):
            out, t = out + f"[{part}]", args[0] if args else Any
        elif isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(t, type) and issubclass(t, BaseModel) and part in t.model_fields:
            out, t = out + ("." if out else "") + part, t.model_fields[part].annotation
        elif origin is dict:
            out, t = out + ("." if out else "") + str(part), args[1] if args else Any
        elif origin is Union:  # a member tag: follow the member it names, if one does
            named = [a for a in args if str(part).startswith((getattr(typing.get_origin(a), "__name__", "") or "~")
                                                             + "[") or getattr(a, "__name__", None) == part]
            t = named[0] if named else t
        elif t is root or t is Any or isinstance(t, type) and issubclass(t, BaseModel):
            out += ("." if out else "") + str(part)  # a key the schema does not know (extra_forbidden)
    return out, t


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a string",
               "dict": "a mapping (key: value)", "model": "a mapping (key: value)", "list": "a list"}


def _describe(e: dict, quiet: bool) -> tuple[str, str]:
    """(what is wrong, the fix) for one pydantic error."""
    kind, ctx = e["type"], e.get("ctx") or {}
    got = "" if quiet or kind == "missing" else f"; got {_show(e.get('input'))}"
    if kind == "suite":
        return ctx["what"], ctx["fix"]
    if kind == "missing":
        return "required field is missing", "add it (`suite schema` describes it)"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}", f"use one of {ctx.get('expected')}"
    bounds = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
              "less_than_equal": ("<=", "le")}
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {ctx.get(key)}{got}", f"give a value {op} {ctx.get(key)}"
    if kind == "finite_number":
        return f"must be a finite number{got}", "give a finite number (not .inf or .nan)"
    if kind == "int_from_float":
        return f"must be a whole number{got}", "give an integer"
    for prefix, words in _TYPE_WORDS.items():
        if kind.startswith(prefix + "_") and kind.endswith(("_type", "_parsing", "_attributes_type")):
            return f"must be {words}{got}", {"string": "quote it ('...')", "list": "write [a, b] or one '- item' per line",
                                             "dict": "write key: value lines under it",
                                             "model": "write key: value lines under it (`suite schema` lists them)",
                                             }.get(prefix, f"give {words}, without quotes")
    if kind == "string_pattern_mismatch":
        return f"not a valid name{got}", "use letters, digits, '_', '.' and '-', starting with a letter or digit"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)", "add one"
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} item(s)", "remove some"
    if kind == "value_error":
        return e["msg"].removeprefix("Value error, "), "see `suite schema` for what this field takes"
    return e["msg"] + got, "see `suite schema` for what this field takes"


def validation_problems(file: str, err: ValidationError, root=None) -> list[Problem]:
    """Every pydantic error as `FILE: FIELD: what (fix: ...)`; a value that fits no member of a union is
    one problem naming what each member wanted. ``root``: the model validated (default: by the error's
    title, else Recipe)."""
    import difflib

    root = root or {"GateSpec": GateSpec}.get(err.title, Recipe)
    grouped: dict[str, list[tuple[str, str]]] = {}
    for e in err.errors():
        field, _ = _walk(root, e["loc"])
        quiet = field.startswith(("runtime", "tracking"))  # never echo what may be a credential
        if e["type"] == "extra_forbidden":
            parent = _strip(_walk(root, e["loc"][:-1])[1])
            known = list(parent.model_fields) if isinstance(parent, type) and issubclass(parent, BaseModel) else []
            near = difflib.get_close_matches(str(e["loc"][-1]), known, n=1, cutoff=0.6)
            what = "unknown key" + (f"; did you mean {near[0]!r}?" if near else "")
            fix = f"rename it to {near[0]!r}" if near else "remove it or check its spelling (`suite schema` lists every field)"
            grouped.setdefault(field, []).append((what, fix))
        else:
            grouped.setdefault(field, []).append(_describe(e, quiet))
    problems = []
    for field, found in grouped.items():
        if field and any(other.startswith((field + ".", field + "[")) for other in grouped):
            # a union member took the value's shape and reported what is wrong inside it: the other
            # members' "must be a string" for the whole value is noise
            found = [(w, f) for w, f in found if not w.startswith("must be")]
            if not found:
                continue
        if len(found) > 1 and len({w for w, _ in found}) > 1 and all(w.startswith("must be") for w, _ in found):
            # one value, several union members refusing it
            wants = " or ".join(dict.fromkeys(w.removeprefix("must be ").split("; got")[0] for w, _ in found))
            got = next((w.split("; got", 1)[1] for w, _ in found if "; got" in w), "")
            problems.append(Problem(file, field, f"must be {wants}" + (f"; got{got}" if got else ""), f"give {wants}"))
        else:
            problems += [Problem(file, field, w, f) for w, f in dict.fromkeys(found)]
    return problems


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    continue
                if first is not key_node:  # (also two keys on one line, in a flow mapping {a: 1, a: 2})
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (lines {first.start_mark.line + 1} and "
                        f"{key_node.start_mark.line + 1}); the later one would silently replace the first",
                        key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


MAX_DEPTH = 64  # nested mappings/sequences a recipe or policy may hold (a real recipe needs fewer than 8)


def _nesting_depth_problem(text: str, file: str) -> Problem | None:
    """The first place the YAML nests deeper than MAX_DEPTH, read from PyYAML's event stream (its parser is a
    loop, its composer recursive: 20,000 levels would end in a RecursionError), or None."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                return Problem(file, f"line {event.start_mark.line + 1}",
                               f"nested more than {MAX_DEPTH} levels deep: no recipe or gate policy needs that",
                               "flatten the YAML (a recipe nests fewer than 8 levels; `suite schema` shows its shape)")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def load_yaml(text: str, file: str):
    """YAML text -> data, refusing duplicate keys and nesting deeper than MAX_DEPTH; a SuiteError naming the file
    and line otherwise."""
    try:
        if (problem := _nesting_depth_problem(text, file)) is not None:
            raise SuiteError(problem)
        if (aliases := alias_problem(text, _UniqueKeyLoader)) is not None:  # what the aliases expand to, capped
            raise SuiteError(Problem(file, f"line {aliases[0]}", aliases[1], aliases[2]))
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        dup = "appears twice" in str(what)
        raise SuiteError(Problem(file, where, f"{'' if dup else 'not valid YAML: '}{what}",
                                 "keep one of the two keys" if dup else "fix the YAML syntax at that line")) from None


def read_text(path: Path, kind: str = "recipe") -> str:
    """A recipe or policy file's text: a SuiteError (not a traceback) when it is missing, unreadable or
    not UTF-8."""
    if not path.is_file():
        raise SuiteError(Problem(str(path), "", "file not found" if not path.exists() else "not a file",
                                 "check the path"))
    try:
        return safeio.read_bytes(path, kind).decode("utf-8")
    except UnicodeDecodeError as e:
        raise SuiteError(Problem(str(path), "", f"not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})",
                                 "save the file as UTF-8")) from None
    except OSError as e:
        raise SuiteError(Problem(str(path), "", f"cannot be read: {e.strerror or e}", "check its permissions")) from None


def _packaged_data_dir_by_default(loaded: LoadedRecipe) -> None:
    """A recipe that does not set eval.data_dir and has no ``../tasks/data`` beside it (a recipe outside the
    checkout, run from an installed wheel) reads the suite's own copy of the task data (suite._data)."""
    ev = loaded.recipe.eval
    if "data_dir" in ev.model_fields_set or loaded.resolve(ev.data_dir).is_dir():
        return

    packaged = folder("tasks") / "data"
    if packaged.is_dir():
        ev.data_dir = str(packaged)


def load_recipe(path: str | Path, serving: bool = True, text: str | None = None,
                references: bool = True) -> LoadedRecipe:
    """Parse and validate a recipe file, then check what it refers to (files, calibration, tasks) and,
    with ``serving``, whether the serve environment's vLLM can serve every variant and takes its engine
    arguments (commands that only quantize or analyse pass False). ``text``: the recipe as it was (a run
    folder's copy), placed at ``path`` (where it was, for its relative paths). ``references=False``: parsed and
    validated only (a finished run's recipe read as a record: its model and data need not be on this machine)."""
    path = Path(path)
    if text is None:
        if not path.is_file() and not path.exists():
            raise SuiteError(Problem(str(path), "", "recipe file not found", "check the path"))
        text = read_text(path)
    data = load_yaml(text, str(path))
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", f"a recipe is a YAML mapping (name:, model:, ...), not "
                                 f"{type(data).__name__ if data is not None else 'an empty file'}",
                                 "start from recipes/demo-cpu.yaml (`suite schema` lists every field)"))
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        raise SuiteError(validation_problems(str(path), e)) from None
    loaded = LoadedRecipe(recipe=recipe, path=path.resolve(), text=text)
    _packaged_data_dir_by_default(loaded)
    problems = check_references(loaded, serving) if references else []
    if problems:
        raise SuiteError(problems)
    return loaded


def load_run_recipe(run_dir: Path, serving: bool = False, references: bool = True) -> LoadedRecipe:
    """The recipe a run folder was made from: its copy (recipe.yaml), placed where the original was
    (plan.json or summary.json say), so that its relative paths resolve as they did. ``references=False`` (a run
    read, not run: ``load_recipe``): not checked against this machine, and placed where the copy is when where the
    original was is not recorded."""
    copy = run_dir / "recipe.yaml"
    if not copy.is_file():
        raise SuiteError(Problem(str(run_dir), "", "not a run folder (no recipe.yaml)", "give a folder `suite run` made"))
    original = None
    for name in ("plan.json", "summary.json"):  # a plan.json written before --resume existed has none
        f = run_dir / name
        if f.is_file() and (original := safeio.read_json(f, "record").get("recipe_path")):
            break
    if not original and references:
        raise SuiteError(Problem(str(run_dir / "plan.json"), "recipe_path", "where the recipe was is not recorded",
                                 "start a new run with `suite run RECIPE`"))
    return load_recipe(original or copy, serving=serving, text=safeio.read_text(copy, "recipe"), references=references)
