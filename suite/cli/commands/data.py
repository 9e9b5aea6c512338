"""`suite data check|prepare DIR`."""

from __future__ import annotations

NAME = "data"
HELP = "check a benchmark data folder (row counts, SHA256SUMS), or build one from the hub"
DESCRIPTION = ("check DIR: every split's rows against the official releases, and "
               "SHA256SUMS when present (exit 2 on any difference). prepare DIR: download MMLU, GSM8K, "
               "HumanEval and C-Eval from the Hugging Face hub into the layout of ../shared/data, then check.")
EXAMPLES = (
    "suite data check ../shared/data",
    "suite data prepare ./data",
)


def add_arguments(dt) -> None:
    dt.add_argument("action", choices=["check", "prepare"])
    dt.add_argument("dir", help="data folder (eval.data_dir)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.data import cmd_data

    return cmd_data(args)
