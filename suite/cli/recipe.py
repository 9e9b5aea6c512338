"""`suite validate`, `suite plan`: the recipe and what it plans."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.cli import overrides
from suite.cli.render import print_dag
from suite.orchestrate.executors import job_use
from suite.orchestrate.rundir import plan_json
from suite.orchestrate.store import Store, eval_cache_dir, job_key, run_env
from suite.outputs.tracking_target import target
from suite.plan.planner import make_plan
from suite.plan.starts import planned_starts, starts_line
from suite.recipe.executor import ExecutorSpec
from suite.runtime.envs import engine_args_facts, serve_python, vllm_distribution, vllm_platform
from suite.runtime.errors import EXIT_OK, Problem, SuiteError
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
    env = run_env(loaded, plan, out_root)
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
