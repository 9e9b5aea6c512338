"""vLLM's EngineArgs as facts: read inside the serve interpreter (a probe), then used to check a recipe's
engine_args (names, types, choices) and to write them as ``vllm serve`` flags. Standard library only."""

from __future__ import annotations

import json

from suite.runtime.vllm_alias import install_vllm_version_alias


def _enum_field(t) -> bool:
    """Whether annotation ``t`` is an Enum, or an Optional/Union of one (vLLM upper-cases a name it is given)."""
    import enum
    import typing

    if isinstance(t, type) and issubclass(t, enum.Enum):
        return True
    return any(_enum_field(a) for a in typing.get_args(t) if a is not type(None))


def _type_facts(t) -> tuple[set[str], list | None, set[str] | None]:
    """(JSON kinds a value of annotation ``t`` may be, Literal/Enum choices, kinds of list items)."""
    import collections.abc
    import dataclasses
    import enum
    import types
    import typing

    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is type(None):
        return {"null"}, None, None
    if origin is typing.Annotated:
        return _type_facts(args[0])
    if origin in (typing.Union, types.UnionType):
        kinds: set[str] = set()
        choices: list | None = []
        items: set[str] | None = None
        for a in args:
            k, c, i = _type_facts(a)
            kinds |= k
            if c is None and k - {"null"}:  # a member without fixed choices: any value of its kinds
                choices = None
            elif c is not None and choices is not None:
                choices += c
            if i is not None:
                items = (items or set()) | i
        return kinds, choices or None, items
    if origin is typing.Literal:
        kinds = {"bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"
                 if isinstance(v, float) else "null" if v is None else "str" for v in args}
        return kinds, list(args), None
    if t is bool:
        return {"bool"}, None, None
    if t is int:
        return {"int"}, None, None
    if t is float:
        return {"float", "int"}, None, None
    if t is str:
        return {"str"}, None, None
    if isinstance(t, type) and issubclass(t, enum.Enum):
        # vLLM takes a member by name, upper-cased first (`--attention-backend triton_attn`; AttentionConfig's
        # validate_backend_before), or for some str-valued enums by value; AttentionBackendEnum's values are
        # class paths that no parser takes (accepting only the values would refuse TRITON_ATTN).
        # Compared case-insensitively (_enum_field).
        return {"str"}, list(dict.fromkeys([m.name for m in t] + [m.value for m in t if isinstance(m.value, str)
                                                                  and "." not in m.value])), None
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence) or t in (list, tuple, set):
        item = _type_facts(args[0])[0] if args and args[0] is not Ellipsis else {"any"}
        return {"list"}, None, item
    if origin in (dict, collections.abc.Mapping) or t is dict:
        return {"dict"}, None, None
    if isinstance(t, type) and (dataclasses.is_dataclass(t) or hasattr(t, "model_fields")):
        return {"dict"}, None, None  # a config class: given as a mapping (JSON object on the CLI)
    if origin is type or origin is collections.abc.Callable or t is typing.Callable:
        return set(), None, None  # a class or a function: nothing a YAML recipe can hold
    return {"any"}, None, None


def _parses_json(parse) -> bool:
    """Whether an argparse ``type`` turns a JSON object string into something that is not a string
    (vLLM's dict and config-class arguments: ``--compilation-config '{"mode": 0}'``)."""
    if parse is None:
        return False
    try:
        return not isinstance(parse("{}"), str)
    except Exception:  # noqa: BLE001 (int, float, a choice list... refuse it)
        return False


def _engine_args_answer() -> dict:
    import dataclasses
    import typing

    install_vllm_version_alias()
    from vllm.engine.arg_utils import EngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older vLLM
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]
    parser = FlexibleArgumentParser()
    EngineArgs.add_cli_args(parser)
    actions = {a.dest: a for a in parser._actions}
    try:
        hints = typing.get_type_hints(EngineArgs, include_extras=True)
    except Exception:  # noqa: BLE001 (a forward reference vLLM never resolves)
        hints = {}
    fields = {}
    for f in dataclasses.fields(EngineArgs):
        t = hints.get(f.name, f.type)
        if isinstance(t, str):
            kinds, choices, items = {"any"}, None, None
        else:
            kinds, choices, items = _type_facts(t)
        a = actions.get(f.name)
        cli = None
        if a is not None:
            longs = [o for o in a.option_strings if o.startswith("--")] or list(a.option_strings)
            positive = [o for o in longs if not o.startswith("--no-")]
            cli = {"flag": (positive or longs)[0], "negative": next((o for o in longs if o.startswith("--no-")), None),
                   "nargs": a.nargs if a.nargs is None or isinstance(a.nargs, (int, str)) else str(a.nargs),
                   "json": _parses_json(a.type),
                   "choices": [str(c) for c in a.choices] if a.choices else None}
        fields[f.name] = {"type": str(t).replace("typing.", ""), "kinds": sorted(kinds), "enum": _enum_field(t),
                          "item_kinds": sorted(items) if items is not None else None,
                          "choices": choices if choices is None else [c for c in choices
                                                                      if isinstance(c, (str, int, float, bool))],
                          "cli": cli}
    from vllm import __version__ as vllm_version

    return {"vllm": vllm_version, "fields": fields}


SUITE_SET_ENGINE_ARGS = {"model": "model.id", "dtype": "model.dtype", "max_model_len": "model.max_model_len",
                         "kv_cache_dtype": "the variant's kv_cache_dtype", "seed": "eval.seed / throughput.seed",
                         "revision": "model.revision"}


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(type(value), "any")


_KIND_WORDS = {"bool": "true/false", "int": "an integer", "float": "a number", "str": "a string", "list": "a list",
               "dict": "a mapping", "null": "null"}


def _coerce(value, kinds: set[str]):
    """``value`` as a field of these JSON kinds takes it, or raise ValueError. A YAML number where a string
    is expected becomes that string (``kv_cache_dtype_skip_layers: [0, 1]`` -> ['0', '1'], as the CLI
    would parse it)."""
    k = _kind(value)
    if "any" in kinds or k in kinds or (k == "int" and "float" in kinds):
        return value
    if k in ("int", "float") and "str" in kinds:
        return str(value)
    raise ValueError(k)


def check_engine_args(engine_args: dict, facts: dict) -> tuple[dict, list[tuple[str, str, str]]]:
    """(the arguments as vLLM takes them, [(key, what is wrong, fix)]) against ``engine_args_facts()``."""
    import difflib

    fields, version = facts["fields"], facts.get("vllm", "?")
    out: dict = {}
    problems: list[tuple[str, str, str]] = []
    public = [n for n in fields if not n.startswith("_")]
    for key, value in engine_args.items():
        if key in SUITE_SET_ENGINE_ARGS:
            problems.append((key, "set by the suite, not an engine argument of the recipe",
                             f"use {SUITE_SET_ENGINE_ARGS[key]} instead and remove it here"))
            continue
        spec = fields.get(key)
        if spec is None or key.startswith("_"):
            near = difflib.get_close_matches(key, public, n=1, cutoff=0.6)
            problems.append((key, f"not an engine argument of vLLM {version}" + (f"; did you mean {near[0]!r}?" if near else ""),
                             (f"write {near[0]!r}" if near else "remove it") + " (`vllm serve --help` lists every "
                             "engine argument as --kebab-case; here they are snake_case)"))
            continue
        kinds = set(spec["kinds"])
        want = " or ".join(_KIND_WORDS.get(k, k) for k in sorted(kinds - {"null", "any"})) or "(nothing a recipe can give)"
        try:
            value = _coerce(value, kinds)
            if isinstance(value, list) and spec.get("item_kinds"):
                value = [_coerce(item, set(spec["item_kinds"])) for item in value]
        except ValueError as e:
            problems.append((key, f"vLLM {version} takes {want} here ({spec['type']}); got {_KIND_WORDS.get(str(e), str(e))} "
                                  f"{engine_args[key]!r}", f"give {want}"))
            continue
        choices = spec.get("choices") or ((spec.get("cli") or {}).get("choices"))
        fold = (lambda s: s.upper()) if spec.get("enum") else (lambda s: s)
        if choices and value is not None and not isinstance(value, (list, dict)) \
                and fold(str(value)) not in {fold(str(c)) for c in choices}:
            near = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
            problems.append((key, f"{value!r} is not one of vLLM {version}'s choices"
                                  + (f"; did you mean {near[0]!r}?" if near else ""),
                             "use one of: " + ", ".join(str(c) for c in choices if str(c) not in ("None", ""))))
            continue
        out[key] = value
    return out, problems


def engine_cli_flags(engine_args: dict, facts: dict | None) -> list[str]:
    """``vllm serve`` flags for engine arguments, in the form the installed vLLM's parser takes: booleans as
    --x / --no-x (a store_true flag that is false is left out), lists of an nargs='+' argument as separate
    values (``--kv-cache-dtype-skip-layers 0 1``), mappings and other lists as one JSON string, null left
    out (vLLM's default). Without ``facts`` (no vLLM to ask): --x / --no-x, separate list items, JSON maps."""
    fields = (facts or {}).get("fields", {})
    flags: list[str] = []
    for key, value in engine_args.items():
        cli = (fields.get(key) or {}).get("cli") or {}
        flag = cli.get("flag") or "--" + key.replace("_", "-")
        if value is None or value == []:
            continue
        if value is True:
            flags.append(flag)
        elif value is False:
            negative = cli.get("negative") if cli else "--no-" + key.replace("_", "-")
            if negative:
                flags.append(negative)
        elif isinstance(value, list):
            nargs = cli.get("nargs", "+") if cli else "+"
            if nargs in ("+", "*") or (isinstance(nargs, int) and nargs == len(value) and nargs > 0):
                flags += [flag, *(json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in value)]
            else:
                flags += [flag, json.dumps(value)]
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def _quant_methods_answer() -> list[str] | None:
    """The quant_method names this interpreter's vLLM loads (the probe 'quant-methods'; None: no vLLM)."""
    try:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    except ImportError:
        return None
    return list(QUANTIZATION_METHODS)


def _bench_serve_answer() -> dict | None:
    """`vllm bench serve`'s options in this interpreter (the probe 'bench-serve-args'; None: no vLLM)."""
    try:
        from vllm.benchmarks.serve import add_cli_args
    except ImportError:
        return None
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    add_cli_args(parser)
    return {a.dest: {"flags": list(a.option_strings), "nargs": a.nargs if isinstance(a.nargs, (int, str)) else None,
                     "takes_value": a.nargs != 0, "choices": [str(c) for c in a.choices] if a.choices else None}
            for a in parser._actions if a.option_strings}
