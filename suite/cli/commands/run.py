"""`suite run RECIPE` / `suite run --resume RUN_DIR`."""

from __future__ import annotations

from suite.cli.overrides import add_argument

NAME = "run"
HELP = "run a recipe end to end: quantize, evaluate, benchmark, track"
DESCRIPTION = ("Run every stage of a recipe and log the results to MLflow. "
               "The run folder and each stage's log are printed at the start; the stages' counts "
               "(calibration samples, lm-eval requests, load points) while they run; the table, the "
               "gate's verdict (when the recipe has gates) and the report's path at the end. Exit code: "
               "0 when every stage succeeded, 2 otherwise, 130 on Ctrl-C; the gate's verdict does not change it "
               "(its exit code is `suite gate`'s).")
EXAMPLES = (
    "suite run recipes/demo-cpu.yaml",
    "suite run recipes/demo-cpu.yaml --set eval.tasks[0].limit=50 --set throughput.request_rates=[10]",
    "suite run recipes/llama3-8b.yaml --executor ray --no-track",
    "suite run --resume runs/20261207-120000-demo-cpu",
)


def add_arguments(run) -> None:
    run.add_argument("recipe", nargs="?", help="recipe YAML file (e.g. recipes/demo-cpu.yaml)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a run that stopped or failed part-way: keep the "
                     "stage results in RUN_DIR, run the missing stages, then write its summary, report and MLflow "
                     "run anew (with the recipe the run was made from)")
    add_argument(run)
    run.add_argument("--out", help="parent folder for the run folder (default: the recipe's output_dir)")
    run.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    run.add_argument("--executor", metavar="KIND", help="where the jobs run, instead of the recipe's executor "
                     "section: local (this machine: as many jobs at once as its GPUs hold), ray (a Ray instance "
                     "started for the run), or a Ray cluster's address (auto, ray://HOST:10001)")
    run.add_argument("--force", action="store_true", help="recompute evaluations found in the evaluation cache "
                     "(<output_dir>/eval-cache; checkpoints are reused by content either way)")
    run.add_argument("--accept-recipe-change", action="store_true", help="with --resume: go on although the run "
                     "folder's recipe.yaml changed since the run began (refused otherwise); the summary and `suite "
                     "gate` name the changed fields")


def run(args) -> int:
    from suite.cli.run import cmd_run  # lazy: `suite --help` imports every command module; the work loads when it runs

    return cmd_run(args)
