"""Where a recipe would make Python run that is not the suite's, and the opt-in each needs (issue 47 part 2).

A recipe is input, not code. Three ways it could still run code are refused unless it says so:

- ``eval.include_path`` task folders whose YAMLs lm-eval would turn into imports: a ``!function`` tag (lm-eval imports
  the named ``.py`` file beside the YAML and calls it: ``process_docs``, ``doc_to_text``, ``custom_dataset``,
  metrics, filters), any other application tag (``!!python/...``), a ``class:`` task (a Python task class), or
  ``trust_remote_code`` (a hub dataset's loading script), also through ``include:`` chains: ``eval.allow_task_code``.
- ``trust_remote_code`` in any ``engine_args`` (vLLM and lm-eval then run the model folder's own ``*.py``), in
  ``throughput.bench_args`` (the benchmark client's tokenizer), and the engine arguments that name a Python class or
  module for vLLM to import (``worker_cls``, ``logits_processors``, ...): ``model.allow_remote_code``.

`suite validate` names the file and line (or the field) of each.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from suite.recipe.loaded import LoadedRecipe
from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError

MAX_TASK_FILES = 5000  # files walked under one include_path folder (a task folder holds tens)
MAX_INCLUDES = 16  # include: chain length followed from one YAML

# engine arguments that make vLLM import a class or module named by the recipe (vllm EngineArgs), or run the model
# folder's own code
CODE_ENGINE_ARGS = {
    "trust_remote_code": "runs the model folder's own Python code (its config's auto_map)",
    "worker_cls": "imports the worker class it names", "worker_extension_cls": "imports the class it names",
    "scheduler_cls": "imports the scheduler class it names",
    "logits_processors": "imports the logits processor classes it names",
    "kv_transfer_config": "can import a KV connector module it names (kv_connector_module_path)",
    "reasoning_parser_plugin": "imports the Python file it names", "tool_parser_plugin": "imports the file it names",
}
# vLLM's own executor backends; anything else is a class or its qualified name, imported
EXECUTOR_BACKENDS = {None, "uni", "mp", "ray", "external_launcher"}
# YAML's own types (yaml.org's type repository); any other tag is an application's (lm-eval's !function) or Python's
STANDARD_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "omap",
                                                     "pairs", "set", "binary", "timestamp", "merge", "value")}
TASK_CODE_FIX = ("set eval.allow_task_code: true if you trust this folder's Python (docs/07-reliability-and-threat-model"
                 ".md says what it permits), or remove the tag")
REMOTE_CODE_FIX = "set model.allow_remote_code: true if you trust that code (docs/07 says what it permits), or remove it"


def _code_sites(text: str) -> list[tuple[int, str]]:
    """(line, what) for each node of a YAML document that lm-eval would turn into code: an application tag, a
    ``class`` key, a ``trust_remote_code`` key. Read from PyYAML's event stream: nothing is constructed."""
    out: list[tuple[int, str]] = []
    stack: list[list] = []  # [is a mapping, the next node is a key]
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)):
            line, is_key = event.start_mark.line + 1, bool(stack and stack[-1][0] and stack[-1][1])
            tag = getattr(event, "tag", None)
            if tag and tag not in STANDARD_TAGS and tag != "!":
                value = f" {event.value}" if isinstance(event, yaml.ScalarEvent) else ""
                out.append((line, f"`{tag}{value[:80]}`" + (" imports and runs Python code" if tag == "!function"
                                                              else ": a tag that constructs Python objects")))
            if is_key and isinstance(event, yaml.ScalarEvent) and event.value in ("class", "trust_remote_code"):
                out.append((line, "`class:` makes lm-eval import a Python task class" if event.value == "class" else
                            "`trust_remote_code` lets a dataset's loading script run"))
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                stack.append([isinstance(event, yaml.MappingStartEvent), True])
                continue
        elif not isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            continue
        elif stack:
            stack.pop()
        if stack and stack[-1][0]:
            stack[-1][1] = not stack[-1][1]
    return out


class _Plain(yaml.SafeLoader):
    """A SafeLoader that reads every application tag as None (constructs nothing)."""


_Plain.add_multi_constructor("!", lambda loader, suffix, node: None)


def _includes(text: str) -> list[str]:
    """The ``include:`` targets of a task YAML (tags read as plain values), or none."""
    try:
        data = safeio.loads_yaml(text, "include", "task", loader=_Plain)  # tags read as None, nesting bounded
    except (yaml.YAMLError, SuiteError):
        return []
    inc = data.get("include") if isinstance(data, dict) else None
    return [i for i in (inc if isinstance(inc, list) else [inc]) if isinstance(i, str)]


def _with_module(what: str, folder: Path) -> str:
    """A `!function module.name` site with the file lm-eval would import for it (beside the YAML)."""
    if not what.startswith("`!function "):
        return what
    module = what.split()[1].rstrip("`").rsplit(".", 1)[0]
    return what + f" (it imports {folder / (module.replace('.', '/') + '.py')})"


def task_code_sites(yaml_file: Path, seen: set[Path] | None = None) -> list[tuple[Path, int, str]]:
    """(file, line, what) of every place ``yaml_file`` and the YAMLs it includes would run code through lm-eval; a
    file that cannot be read safely (not a regular file, too large, not YAML) is reported too: lm-eval would read it."""
    seen = set() if seen is None else seen
    path = yaml_file.resolve()
    if path in seen or len(seen) > MAX_INCLUDES:
        return []
    seen.add(path)
    try:
        if path.exists() and not path.is_file():  # a FIFO or a device: the task walk skips it, and so does lm-eval's
            return []                             # check (suite/recipe/checks.py) that a task YAML is there
        text = safeio.read_text(path, "task")
        sites = [(yaml_file, line, _with_module(what, path.parent)) for line, what in _code_sites(text)]
    except SuiteError as e:  # too large or not a regular file (safeio's words)
        return [(yaml_file, 0, f"cannot be read safely ({e.problems[0].message})")]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        return [(yaml_file, 0, f"cannot be read as YAML ({type(e).__name__})")]
    for inc in _includes(text):
        sites += task_code_sites(path.parent / inc, seen)
    return sites


def _task_yamls(folder: Path) -> tuple[list[Path], bool]:
    """The task YAMLs under ``folder`` (lm-eval's include_path walk: *.yaml, no symlinked folders), and whether the
    walk stopped at MAX_TASK_FILES."""
    found, seen = [], 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".ipynb_checkpoints"))
        seen += len(files) + len(dirs)
        if seen > MAX_TASK_FILES:
            return found, True
        found += [Path(root) / f for f in sorted(files) if f.endswith(".yaml")]
    return found, False


def include_path_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Without eval.allow_task_code: one problem per include_path folder naming the first file and line that would
    run code (and how many more there are)."""
    r, f = loaded.recipe, str(loaded.path)
    ip = r.eval.include_path
    out = []
    for i, folder in enumerate([ip] if isinstance(ip, str) else ip or []):
        fld = "eval.include_path" + ("" if isinstance(ip, str) else f"[{i}]")
        path = loaded.resolve(folder)
        if not path.is_dir():
            continue  # checks.include_path_tasks says so
        files, cut = _task_yamls(path)
        if cut:
            out.append(Problem(f, fld, f"{path}: more than {MAX_TASK_FILES} files under it: not a task folder",
                               "give the folder that holds your task YAMLs"))
            continue
        if r.eval.allow_task_code:
            continue
        sites = [s for y in files for s in task_code_sites(y)]
        if sites:
            where, line, what = sites[0]
            more = f" (and {len(sites) - 1} more)" if len(sites) > 1 else ""
            out.append(Problem(f, fld, f"{where}" + (f":{line}" if line else "") + f": {what}{more}", TASK_CODE_FIX))
    return out


def _engine_arg_sites(r) -> list[tuple[str, str]]:
    """(field, what) for each engine argument of the recipe that runs or imports code."""
    sections = [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)]
    args = [(f"{w}.engine_args", v.engine_args) for w, v in sections] + [("eval.engine_args", r.eval.engine_args)]
    try:
        args += [(f"eval.engine_check[{i}]", c) for i, c in enumerate(r.eval.engine_check_configs())]
    except ValueError:
        pass  # the schema's own check of eval.engine_check says what is wrong
    out = []
    for where, ea in args:
        for key, what in CODE_ENGINE_ARGS.items():
            if ea.get(key) not in (None, False, [], {}, ""):
                out.append((f"{where}.{key}", what))
        if ea.get("distributed_executor_backend") not in EXECUTOR_BACKENDS:
            out.append((f"{where}.distributed_executor_backend", "names an executor class for vLLM to import"))
    t = r.throughput
    if t is not None and t.bench_args.get("trust_remote_code", t.bench_args.get("trust-remote-code")):
        out.append(("throughput.bench_args.trust_remote_code", "runs the tokenizer folder's own Python code in the "
                    "benchmark client"))
    return out


def remote_code_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Without model.allow_remote_code: each engine argument or bench_args entry that runs or imports code."""
    if loaded.recipe.model.allow_remote_code:
        return []
    return [Problem(str(loaded.path), fld, what, REMOTE_CODE_FIX) for fld, what in _engine_arg_sites(loaded.recipe)]


def consent_problems(loaded: LoadedRecipe) -> list[Problem]:
    return include_path_problems(loaded) + remote_code_problems(loaded)
