"""What a `vllm bench serve` command of the benchmark stage may hold: the options the suite owns (and the recipe field
that sets each), the checks of ``throughput.bench_args`` before a run, and the check of a recorded argv after it.

A recipe's bench_args are spliced into the client's argv, which vLLM's own parser reads (argparse: the last of a
repeated option wins, a unique prefix of an option is that option, a value starting with ``-`` is read as an
option). So a key may name no option the suite sets or anything that changes what a load point measures or where
it sends its load, not even by a prefix, and no value may look like an option. The gate reads the argv each
repetition recorded and refuses one that disagrees with the stage's config (``check_run_folder``).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from suite.records.benchmark import BenchmarkConfig, BenchmarkResult

# options the suite passes and reads back (p50/p99 TTFT, TPOT, ITL, E2EL): a bench_args value is merged with its own
MERGED_BENCH_ARGS = {"percentile_metrics": "ttft,tpot,itl,e2el", "metric_percentiles": "50,99"}

_TARGET = ("the benchmark stage loads the server it started itself (127.0.0.1, its own port, /v1/completions)",
           "remove it: no recipe field sends the load elsewhere")
_MODEL = ("the benchmark stage names the variant's model and tokenizer itself",
          "set the model in model.id or variants[].model")
_RESULTS = ("the benchmark stage writes and reads each load point's result file itself",
            "remove it: the run folder keeps every result (variants/<name>/bench-*.json)")
_WORKLOAD = ("it changes which prompts a load point sends", "use throughput.workload and throughput.dataset")
_ARRIVALS = ("it changes how requests arrive (the suite sends Poisson arrivals at each rate, or a fixed concurrency)",
             "use throughput.request_rates and throughput.concurrencies")
_INPUT = ("it changes the prompts' length", "use throughput.input_len")
_OUTPUT = ("it changes the outputs' length", "use throughput.output_len")

# dest -> (why a recipe may not set it, the recipe field to use instead)
SUITE_OWNED: dict[str, tuple[str, str]] = {
    **{k: _TARGET for k in ("backend", "base_url", "host", "port", "endpoint", "insecure")},
    **{k: _MODEL for k in ("model", "tokenizer", "served_model_name", "tokenizer_mode", "skip_tokenizer_init")},
    **{k: _RESULTS for k in ("disable_tqdm", "plot_timeline", "plot_dataset_stats")},
    **{k: _WORKLOAD for k in ("no_oversample", "disable_shuffle", "no_stream", "enable_multimodal_chat",
                              "no_reranker")},
    **{k: _ARRIVALS for k in ("request_rate", "max_concurrency", "burstiness", "probe_request_rate", "self_timed")},
    "input_len": _INPUT, "output_len": _OUTPUT,
    "num_prompts": ("the benchmark stage sets the prompts per load point", "use throughput.num_prompts"),
    "num_warmups": ("the benchmark stage sets the warm-up requests", "use throughput.warmup_requests"),
    "seed": ("the benchmark stage seeds each repetition itself", "use throughput.seed"),
    "ignore_eos": ("the benchmark stage sets it: every output has exactly output_len tokens",
                   "use throughput.output_len"),
    "skip_chat_template": ("the benchmark stage sets it from the model's chat template setting",
                           "use model.chat_template"),
    "extra_body": ("it rewrites every request's body (max_tokens, ignore_eos, the model): what a load point measures",
                   "use throughput.output_len; sampling has its own options (temperature, top_p, ...)"),
    "profile": ("it asks the server to profile while the load point runs (a profiled server is measured)",
                "profile outside the suite"),
}
# option families by the start of their dest: each dataset's own options, the ramp-up, the result files, LoRA
_FAMILIES: tuple[tuple[str, tuple[str, str]], ...] = (
    ("random_input_len", _INPUT), ("random_output_len", _OUTPUT), ("random_", _WORKLOAD), ("dataset_", _WORKLOAD),
    ("custom_", _WORKLOAD), ("sharegpt_", _WORKLOAD), ("hf_", _WORKLOAD), ("timed_trace_", _WORKLOAD),
    ("blazedit_", _WORKLOAD), ("asr_", _WORKLOAD), ("spec_bench_", _WORKLOAD), ("prefix_repetition_", _WORKLOAD),
    ("speed_bench_", _WORKLOAD), ("bfcl_", _WORKLOAD), ("ramp_up_", _ARRIVALS), ("save_", _RESULTS),
    ("result_", _RESULTS), ("append_result", _RESULTS),
    ("lora_", ("it sends requests to LoRA adapters instead of the variant's model", _MODEL[1])),
)
_KEY = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*")
# argparse reads an argument starting with '-' as an option unless it looks like a negative number
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def refusal(dest: str) -> tuple[str, str] | None:
    """(why, fix) when ``throughput.bench_args`` may not set the option ``dest``, else None."""
    if dest in SUITE_OWNED:
        return SUITE_OWNED[dest]
    if dest.endswith(("_input_len", "_output_len")):
        return _INPUT if dest.endswith("_input_len") else _OUTPUT
    return next((why for prefix, why in _FAMILIES if dest.startswith(prefix)), None)


def key_problem(key: str) -> tuple[str, str] | None:
    """(what, fix) for a bench_args key the suite refuses without asking vLLM: not an option name, a refused option,
    or the start of one (argparse reads a unique prefix of an option as that option)."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return (f"{str(key)[:40]!r} is not an option name", "use the option's name, snake_case (goodput, temperature)")
    dest = key.replace("-", "_")
    if (why := refusal(dest)) is not None:
        return f"{key}: {why[0]}", why[1]
    for name in [*SUITE_OWNED, *(p.rstrip("_") for p, _ in _FAMILIES)]:
        if name.startswith(dest) and (why := refusal(name)) is not None:
            return f"{key}: argparse reads it as --{name.replace('_', '-')} (a prefix of it); {why[0]}", why[1]
    return None


def value_problem(key: str, value) -> tuple[str, str] | None:
    """(what, fix) for a bench_args value that would add an option to the argv (a string starting with '-' that is
    no negative number, '--'), an empty list, or a NUL byte or line break. The value is not repeated."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        return f"{key}: an empty list (the option would take the next option as its value)", "give at least one value"
    for item in items:
        text = str(item)
        if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
            return (f"{key}: a value starting with '-' would be read by vllm bench serve as an option of its own",
                    "give the values only; each option the suite lets you set is its own bench_args key")
        if any(c in text for c in "\0\n\r"):
            return f"{key}: a value holds a NUL byte or a line break", "give one-line values"
    return None


def parser_problems(bench_args: dict, options: dict) -> list[tuple[str, str, str]]:
    """(key, what, fix) for each bench_args entry as ``vllm bench serve``'s parser would read it (``options``: the
    serve environment's {dest: {flags, nargs, takes_value, choices}}, suite.runtime.envs.bench_serve_options): an
    option it does not have, a prefix of one (argparse would take it for that option: the full name is asked
    for), an option the suite refuses (``refusal``), a flag given a value, a value count the option does not take,
    a value outside its choices."""
    flags = {f: dest for dest, o in options.items() for f in o.get("flags") or ()}
    out = []
    for key, value in bench_args.items():
        flag = "--" + str(key).replace("_", "-")
        dest, o = flags.get(flag), options.get(flags.get(flag), {})
        nargs, n = o.get("nargs"), len(value) if isinstance(value, list) else 1
        starts = sorted({d for f, d in flags.items() if f.startswith(flag)})
        if dest is None and starts:
            why = refusal(starts[0]) if len(starts) == 1 else None
            out.append((key, f"argparse would read it as {' or '.join('--' + d.replace('_', '-') for d in starts[:3])} "
                        "(a prefix)" + (f"; {why[0]}" if why else ""), why[1] if why else "write the option's full name"))
        elif dest is None:
            near = difflib.get_close_matches(str(key).replace("-", "_"), list(options), n=1, cutoff=0.6)
            out.append((key, "not an option of the serve environment's `vllm bench serve`" + (
                f"; did you mean {near[0]!r}?" if near else ""), f"rename it to {near[0]!r}" if near else
                "see `vllm bench serve --help`"))
        elif (why := refusal(dest)) is not None:
            out.append((key, why[0], why[1]))
        elif not o.get("takes_value") and not isinstance(value, bool):
            out.append((key, f"a flag without a value; got {value!r}", "give true (pass the flag) or false (leave it out)"))
        elif o.get("takes_value") and (nargs in (None, "?") and n != 1 or isinstance(nargs, int) and n != nargs):
            out.append((key, f"takes {nargs if isinstance(nargs, int) else 1} value(s); got {n} (the rest would be "
                        "read as arguments of their own)", "give one value, or as many as the option takes"))
        elif (ch := o.get("choices")) and str(value) not in ch:
            out.append((key, f"{value!r} is not one of {ch}", f"use one of {ch}"))
    return out


def bench_args_argv(bench_args: dict) -> list[str]:
    """throughput.bench_args as ``vllm bench serve`` flags (checked by `suite validate` against its parser): true a
    bare flag, false left out, a list the flag's values; percentile_metrics and metric_percentiles merged with the
    suite's own (the summary reads p50 and p99 of TTFT, TPOT, ITL and E2EL)."""
    out: list[str] = []
    args = {k.replace("-", "_"): v for k, v in bench_args.items()}
    for key, ours in MERGED_BENCH_ARGS.items():
        theirs = str(args.pop(key, "")).replace(" ", "")
        merged = list(dict.fromkeys([*ours.split(","), *(x for x in theirs.split(",") if x)]))
        out += ["--" + key.replace("_", "-"), ",".join(merged)]
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        elif value is not False:
            out += [flag, str(value)]
    return out


def _options(argv: list[str]) -> dict[str, list[str]] | str:
    """{option: its values} of an argv as the suite writes it (each option once, values after it), or what is
    wrong with it."""
    out: dict[str, list[str]] = {}
    current = None
    for arg in argv:
        if not isinstance(arg, str):
            return "holds a value that is not a string"
        if arg.startswith("-") and not NEGATIVE_NUMBER.match(arg):
            if not arg.startswith("--") or "=" in arg or arg in out:
                return f"holds {arg[:40]!r}, which the suite never writes (a repeated or abbreviated option)"
            current = out.setdefault(arg, [])
        elif current is None:
            return "starts with a value, not an option"
        else:
            current.append(arg)
    return out


# what the stage itself writes, and the values it may write for each (None: any value; a set: one of them)
def _owned_values(config, rate, concurrency) -> dict[str, object]:
    model = config.engine.model
    return {"--backend": {"vllm"}, "--base-url": re.compile(r"http://127\.0\.0\.1:\d+"), "--endpoint": {"/v1/completions"},
            "--model": {model}, "--tokenizer": {model}, "--dataset-name": {"random", "custom", "sharegpt"},
            "--random-input-len": {str(config.input_len)}, "--random-output-len": {str(config.output_len)},
            "--dataset-path": None, "--custom-output-len": {str(config.output_len), "-1"}, "--skip-chat-template": set(),
            "--num-prompts": {str(config.num_prompts)}, "--request-rate": {str(rate)}, "--ignore-eos": set(),
            "--seed": None, "--save-result": set(), "--result-dir": None, "--result-filename": None,
            "--disable-tqdm": set(), "--num-warmups": {str(config.warmup_requests)},
            "--max-concurrency": {str(concurrency)}}


def _agrees(values: list[str], want) -> bool:
    """Whether an option's values are what ``want`` allows: a list (exactly these), None (one value), an empty set
    (a bare flag), a set (one of these) or a pattern (one value matching it)."""
    if isinstance(want, list):
        return values == want
    if isinstance(want, set) and not want:
        return values == []
    if len(values) != 1:
        return False
    return want is None or (values[0] in want if isinstance(want, set) else want.fullmatch(values[0]) is not None)


def argv_problem(argv: list[str], config, rate, concurrency) -> str | None:
    """What makes ``argv`` (a repetition's recorded ``vllm bench serve`` argv) something other than the command
    the benchmark ``config`` asks for at this load point (``rate``, ``concurrency``), or None."""
    point_ok = (str(rate) in map(str, config.request_rates) and concurrency is None
                or str(rate) == "inf" and concurrency in config.concurrencies)
    if not point_ok:
        return f"belongs to a load point (rate {rate}, concurrency {concurrency}) the config does not ask for"
    got, theirs = _options(argv), _options(bench_args_argv(config.bench_args))
    if isinstance(got, str) or isinstance(theirs, str):
        return got if isinstance(got, str) else f"cannot be checked: the config's bench_args {theirs}"
    owned = _owned_values(config, rate, concurrency)
    for flag, values in got.items():
        want = theirs.get(flag) if flag in theirs else owned.get(flag, "absent")
        if want == "absent":
            return f"holds {flag}, which neither the suite nor the recipe's bench_args set"
        if not _agrees(values, want):
            return f"{flag} {' '.join(values)[:80]!r} is not what the config asks for"
    needed = [*theirs, "--base-url", "--model", "--num-prompts", "--request-rate", "--ignore-eos"]
    needed += ["--max-concurrency"] * (concurrency is not None) + ["--num-warmups"] * (config.warmup_requests > 0)
    missing = [f for f in needed if f not in got]
    return f"lacks {missing[0]}, which the config asks for" if missing else None


def check_run_folder(folder: Path, variants, bad) -> None:
    """``bad(field, what, fix)`` for each of ``variants`` (a summary's: name, benchmark) whose benchmark points record
    a repetition's argv that disagrees with its benchmark config in run folder ``folder``
    (variants/<name>/benchmark.config.json). A run that records no argv anywhere (made before they were recorded) is
    not checked; one that records some must record every one."""
    rows = {v.name: [(p, r) for p in b.points for r in p.repetitions] for v in variants
            if (b := v.result(BenchmarkResult)) is not None}
    if not any("argv" in r for found in rows.values() for _, r in found):
        return
    fix = "rerun the benchmark (`suite run --resume --force`): the gate judges only the load the recipe asks for"
    for name, found in rows.items():
        path = folder / "variants" / name / "benchmark.config.json"
        try:
            config = BenchmarkConfig.read(path)  # Record.read: the safe reader's caps, a FIFO or device refused
        except Exception as e:  # noqa: BLE001  OSError, a validation error, or the safe reader's refusal (a SuiteError
            # of runtime.errors, a floor this module may not import)
            bad(f"{name}: variants/{name}/benchmark.config.json", f"cannot be read ({type(e).__name__}): the recorded "
                "benchmark commands cannot be checked against it", fix)
            continue
        for p, r in found:
            argv = r.get("argv")
            why = argv_problem(argv, config, p.request_rate, p.max_concurrency) if isinstance(argv, list) else \
                "is not recorded"
            if why:
                bad(f"{name}: benchmark point {p.label}", f"a repetition's vllm bench serve argv {why}", fix)
                break
