"""`suite schema`, `suite tasks`: what a recipe may hold and the tasks it may name."""

from __future__ import annotations

import json
from pathlib import Path

from suite.runtime.errors import EXIT_OK, Problem, SuiteError
from suite.stages.evaluate import tasks


def cmd_schema(args) -> int:
    from suite.recipe import Recipe  # lazy: the recipe schema (0.2 s): `suite tasks` lists tasks without it

    print(json.dumps(Recipe.model_json_schema(), indent=2))
    return EXIT_OK


def cmd_tasks(args) -> int:
    """The suite's own tasks (tasks/), and with RECIPE those of its eval.include_path folders too, each folder's
    under its own heading; a task the recipe evaluates is marked '*'."""
    if not getattr(args, "recipe", None):
        _print_tasks(tasks.available())
        return EXIT_OK
    loaded, folders = _include_folders(args.recipe)
    used = {t.name for t in loaded.recipe.eval.tasks}
    print("tasks/ (the suite's own):")
    _print_tasks(tasks.available(), used, "  ")
    for field, folder in folders:
        print(f"{field}: {folder}")
        _print_tasks(tasks.available(folder), used, "  ")
    return EXIT_OK


def _include_folders(recipe: str):
    """The recipe (schema-checked only: its tasks may be what is being written) and its include_path folders as
    (field, absolute folder); a folder that is missing or holds no task is bad input, as `suite validate` says."""
    from pydantic import ValidationError

    # lazy: the recipe schema (0.2 s), for `suite tasks RECIPE` only: `suite tasks` lists tasks without it
    from suite.recipe import LoadedRecipe, Recipe, load_yaml, read_text, validation_problems
    from suite.recipe.checks import include_path_tasks  # lazy: as above

    path = Path(recipe)
    text = read_text(path)
    data = load_yaml(text, str(path))
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", "a recipe is a YAML mapping", "start from `suite init MODEL`"))
    try:
        loaded = LoadedRecipe(recipe=Recipe.model_validate(data), path=path.resolve(), text=text)
    except ValidationError as e:
        raise SuiteError(validation_problems(str(path), e)) from None
    _, problems = include_path_tasks(loaded)
    if problems:
        raise SuiteError(problems)
    ip = loaded.recipe.eval.include_path
    listed = [ip] if isinstance(ip, str) else list(ip or [])
    return loaded, [("eval.include_path" + ("" if isinstance(ip, str) else f"[{i}]"), loaded.resolve(f))
                    for i, f in enumerate(listed)]


def _print_tasks(found: dict, used: set[str] = frozenset(), indent: str = "") -> None:
    """One line per task or group (a group's subtasks counted, not listed)."""
    for name, info in sorted(found.items()):
        if info.kind == "group" or not any(name in g.subtasks for g in found.values()):
            extra = f" ({len(info.subtasks)} subtasks)" if info.subtasks else ""
            mark = "* " if name in used else "  " if used else ""
            print(f"{indent}{mark}{name:<22} {info.kind:<6} {info.primary_metric or '-':<26}{extra}")
