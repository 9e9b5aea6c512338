"""`suite tasks`."""

from __future__ import annotations

NAME = "tasks"
HELP = "list the local lm-eval tasks in tasks/ (with RECIPE: its eval.include_path tasks too)"
DESCRIPTION = ("Lists the suite's own lm-eval tasks (tasks/); with RECIPE, also the tasks of each of its "
               "eval.include_path folders, under the folder's name, the tasks the recipe evaluates marked '*'. "
               "A missing folder, or one without a task YAML, is exit 2.")
EXAMPLES = ("suite tasks", "suite tasks recipes/demo-cpu.yaml")


def add_arguments(parser) -> None:
    parser.add_argument("recipe", nargs="?", help="a recipe whose eval.include_path tasks to list too")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.tasks import cmd_tasks

    return cmd_tasks(args)
