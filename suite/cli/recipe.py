"""`suite validate`, `suite plan`, `suite schema`, `suite tasks`: the recipe, what it plans, what it may name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from suite.cli import overrides
from suite.cli.render import print_dag
from suite.orchestrate.executors import job_use
from suite.orchestrate.rundir import plan_json
from suite.orchestrate.store import STORE_ENV, Store, eval_cache_dir, job_key, store_root
from suite.outputs.tracking_target import target
from suite.plan.planner import make_plan
from suite.plan.starts import planned_starts, starts_line
from suite.recipe import LoadedRecipe, Recipe, load_yaml, read_text, validation_problems
from suite.recipe.checks import include_path_tasks
from suite.recipe.executor import ExecutorSpec
from suite.runtime.envs import engine_args_facts, serve_python, stage_env, vllm_distribution, vllm_platform
from suite.runtime.errors import EXIT_OK, Problem, SuiteError
from suite.stages.evaluate import tasks
from suite.stages.registry import EVALUATE, STAGES


def cmd_validate(args) -> int:
    loaded = overrides.load(args.recipe, getattr(args, "set", None))
    r = loaded.recipe
    out = loaded.resolve(r.output_dir)
    tracking = _tracking_line(loaded, out)  # refuses a credential in MLflow's environment
    make_plan(loaded, out / "<run>", out / "checkpoints")  # every check `suite plan` makes, its environments too
    sets = f" (with {len(args.set)} --set)" if getattr(args, "set", None) else ""
    print(f"{args.recipe}{sets}: ok — {r.name}: {len(r.variants) + 1} variants "
          f"({', '.join(v.name for v in r.all_variants())}), tasks {', '.join(t.name for t in r.eval.tasks)}")
    if any(v.engine_args for v in r.all_variants()) or r.eval.engine_args:
        dist = vllm_distribution()
        name = f"{dist[0]} {dist[1]}" if dist else f"vLLM {engine_args_facts()['vllm']}"
        print(f"engine arguments checked against {name}'s EngineArgs ({serve_python()})")
        if vllm_platform() == "cpu":  # a GPU machine runs the CUDA build, whose arguments and defaults differ
            print("  this machine's vLLM is the CPU build: the CUDA build a GPU machine runs was not consulted "
                  "(its EngineArgs, defaults and kernels may differ); validate there before a GPU run")
    print(tracking)
    return EXIT_OK


def _starts_line(loaded, plan, out_root: Path) -> str:
    """``engine starts: N (...)``: the vLLM engines a run of the plan starts, none for an evaluation its store holds."""
    env = stage_env(plan.env) | {STORE_ENV: str(store_root(loaded, out_root))}
    cache = Store(eval_cache_dir(env, out_root))

    def held(stage: str, vp) -> bool | None:
        if stage != EVALUATE and STAGES[stage].check_of != EVALUATE:  # only evaluations go through the store
            return False
        key = job_key(vp, stage, None, env)
        return None if key is None else cache.lookup(stage, key) is not None

    return starts_line(planned_starts(plan, held))


def _tracking_line(loaded, out_root: Path) -> str:
    """Where a run of the recipe would be logged (recipe, then MLflow's environment, then the local default)."""
    return target(loaded.recipe, out_root).describe()



def cmd_plan(args) -> int:
    loaded = overrides.load(args.recipe, getattr(args, "set", None))
    if getattr(args, "executor", None):
        loaded = with_executor(loaded, args.executor)
    out = Path(args.out) if args.out else loaded.resolve(loaded.recipe.output_dir)
    plan = make_plan(loaded, out / "<run>", out / "checkpoints")
    print(_tracking_line(loaded, out), file=sys.stderr)  # stdout stays the plan's JSON (or the DAG)
    print(_starts_line(loaded, plan, out), file=sys.stderr)
    if getattr(args, "jobs", False):
        print_dag(plan, use=job_use(plan.executor))
        return EXIT_OK
    print(plan_json(plan))
    return EXIT_OK


def with_executor(loaded, value: str):
    """The recipe with ``--executor`` in place of its executor section: 'local', 'ray' (a Ray instance for
    the run) or 'ray://HOST:PORT' / 'auto' / 'HOST:PORT' (an existing Ray cluster)."""
    current = loaded.recipe.executor.model_dump(exclude_unset=True)
    if value == "local":
        fields = {k: v for k, v in current.items() if k != "address"} | {"kind": "local"}
    else:
        fields = current | {"kind": "ray"}
        if value != "ray":  # a cluster places jobs on its own GPUs: executor.gpus is for a Ray instance of our own
            fields = {k: v for k, v in fields.items() if k != "gpus"} | {"address": value}
    try:
        spec = ExecutorSpec(**fields)
    except ValueError as e:
        raise SuiteError(Problem("--executor", "executor", str(e).splitlines()[-1],
                                 "give local, ray, or a Ray address (auto, ray://HOST:10001)")) from None
    return loaded.model_copy(update={"recipe": loaded.recipe.model_copy(update={"executor": spec})})



def cmd_schema(args) -> int:
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
