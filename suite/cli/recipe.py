"""`suite validate`, `suite plan`, `suite schema`, `suite tasks`: the recipe, what it plans, what it may name."""

from __future__ import annotations

import json
from pathlib import Path

from suite.errors import EXIT_OK


def cmd_validate(args) -> int:
    from suite.recipe import load_recipe

    loaded = load_recipe(args.recipe)
    r = loaded.recipe
    print(f"{args.recipe}: ok — {r.name}: {len(r.variants) + 1} variants "
          f"({', '.join(v.name for v in r.all_variants())}), tasks {', '.join(t.name for t in r.eval.tasks)}")
    if any(v.engine_args for v in r.all_variants()):
        from suite.orchestrate.envs import engine_args_facts, serve_python

        print(f"engine arguments checked against vLLM {engine_args_facts()['vllm']}'s EngineArgs ({serve_python()})")
    return EXIT_OK



def cmd_plan(args) -> int:
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe
    from suite.orchestrate.rundir import plan_json

    loaded = load_recipe(args.recipe)
    out = Path(args.out) if args.out else loaded.resolve(loaded.recipe.output_dir)
    print(plan_json(make_plan(loaded, out / "<run>", out / "checkpoints")))
    return EXIT_OK



def cmd_schema(args) -> int:
    from suite.recipe import Recipe

    print(json.dumps(Recipe.model_json_schema(), indent=2))
    return EXIT_OK



def cmd_tasks(args) -> int:
    from suite.stages.evaluate import tasks

    for name, info in sorted(tasks.available().items()):
        if info.kind == "group" or not any(name in g.subtasks for g in tasks.available().values()):
            extra = f" ({len(info.subtasks)} subtasks)" if info.subtasks else ""
            print(f"{name:<22} {info.kind:<6} {info.primary_metric or '-':<26}{extra}")
    return EXIT_OK
