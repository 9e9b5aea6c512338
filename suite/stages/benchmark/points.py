"""One load point's pieces: the ``vllm bench serve`` command, its saved JSON as a ``LoadPoint``, and the medians of
its repetitions (``suite.stages.benchmark.stage`` runs them)."""

from __future__ import annotations

import statistics
from pathlib import Path

from suite.runtime import safeio
from suite.runtime import spread
from suite.stages.benchmark import server
from suite.records.benchmark import BenchmarkConfig, LoadPoint, ServerStats
from suite.records.bench_argv import bench_args_argv


def load_points(config: BenchmarkConfig) -> list[tuple[str, object, int | None]]:
    points = [(f"rate-{r}", r, None) for r in config.request_rates]
    points += [(f"concurrency-{c}", "inf", c) for c in config.concurrencies]
    return points


def bench_command(config: BenchmarkConfig, port: int, rate, concurrency, out_dir: Path, filename: str,
                  num_prompts: int | None = None, seed: int | None = None, dataset: Path | None = None,
                  dataset_name: str = "custom", row_output_lens: bool = False) -> list[str]:
    if dataset is None:
        data = ["--dataset-name", "random", "--random-input-len", str(config.input_len),
                "--random-output-len", str(config.output_len)]
    elif dataset_name == "sharegpt":  # a team's ShareGPT file, read by vLLM's loader: output lengths are the answers'
        data = ["--dataset-name", "sharegpt", "--dataset-path", str(dataset)]
    else:  # the accuracy tasks' prompts (suite.stages.benchmark.workload) or a JSONL file's, as vLLM's custom dataset
        data = ["--dataset-name", "custom", "--dataset-path", str(dataset),  # -1: each row's output_tokens
                "--custom-output-len", "-1" if row_output_lens else str(config.output_len)]
        if not config.chat_template:
            data.append("--skip-chat-template")
    cmd = [*server.VLLM_CLI, "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
           "--endpoint", "/v1/completions", "--model", config.engine.model, "--tokenizer", config.engine.model,
           *data, "--num-prompts", str(num_prompts or config.num_prompts),
           "--request-rate", str(rate), "--ignore-eos", "--seed", str(config.seed if seed is None else seed),
           *bench_args_argv(config.bench_args), "--save-result", "--result-dir", str(out_dir), "--result-filename", filename, "--disable-tqdm"]
    if config.warmup_requests:
        cmd += ["--num-warmups", str(config.warmup_requests)]
    if concurrency is not None:
        cmd += ["--max-concurrency", str(concurrency)]
    return cmd


def goodput_slo(bench_args: dict) -> dict[str, float] | None:
    """The goodput SLOs of throughput.bench_args (its ``goodput: ["ttft:200", "tpot:50"]``, parsed as vllm bench serve
    parses ``--goodput``: KEY:VALUE, ms) as {key: ms}; None without them or where one does not parse (vLLM refuses it)."""
    pairs = next((v for k, v in bench_args.items() if k.replace("-", "_") == "goodput"), None)
    pairs = [pairs] if isinstance(pairs, str) else pairs
    if not pairs:
        return None
    try:
        return {k: float(v) for k, v in (str(pair).split(":") for pair in pairs)}
    except ValueError:
        return None


def point_from_json(label: str, rate, concurrency, path: Path, slo: dict[str, float] | None = None) -> LoadPoint:
    """A load point from the JSON ``vllm bench serve --save-result`` wrote; ``slo``: the --goodput SLOs it ran with
    (its request_goodput, null without --goodput, is read as goodput_req_s)."""
    d = safeio.read_json(path, "record")
    goodput = d.get("request_goodput")
    completed = int(d.get("completed", 0))
    failed = int(d.get("failed", d.get("num_prompts", completed) - completed) or 0)
    return LoadPoint(
        label=label, request_rate=rate, max_concurrency=concurrency, ok=completed > 0 and failed == 0,
        error=(f"{failed} requests failed" if failed else None if completed else "no request completed"),
        completed=completed, failed=failed,
        duration_s=float(d.get("duration", 0.0)), output_tok_s=float(d.get("output_throughput", 0.0)),
        input_tok_s=d["total_input_tokens"] / d["duration"] if d.get("total_input_tokens") and d.get("duration") else None,
        mean_input_len=d["total_input_tokens"] / completed if d.get("total_input_tokens") and completed else None,
        req_s=float(d.get("request_throughput", 0.0)), ttft_p50_ms=float(d.get("p50_ttft_ms", 0.0)),
        ttft_p99_ms=float(d.get("p99_ttft_ms", 0.0)), tpot_p50_ms=float(d.get("p50_tpot_ms", 0.0)),
        tpot_p99_ms=float(d.get("p99_tpot_ms", 0.0)), result_file=str(path),
        e2el_p50_ms=d.get("p50_e2el_ms", d.get("median_e2el_ms")), max_concurrent_requests=d.get("max_concurrent_requests"),
        goodput_req_s=float(goodput) if goodput is not None else None, goodput_slo=slo if goodput is not None else None,
    )


REP_FIELDS = ("output_tok_s", "req_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "duration_s",
              "e2el_p50_ms", "goodput_req_s", "result_file", "argv")


def repetition_row(p: LoadPoint) -> dict:
    return {k: getattr(p, k) for k in REP_FIELDS}


MEDIAN_FIELDS = ("output_tok_s", "req_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "duration_s",
                 "input_tok_s", "mean_input_len", "e2el_p50_ms", "goodput_req_s")


def combine_repetitions(reps: list[tuple[LoadPoint, ServerStats]]) -> LoadPoint:
    """A point's figures are the medians over its repetitions (``statistics.median``: of an even count,
    the mean of the middle two), each figure on its own; the server stats and result file are those of
    the repetition closest to the median output tok/s; every repetition's figures and the spread are kept."""
    tok_s = [p.output_tok_s for p, _ in reps]
    mid = statistics.median(tok_s)
    point, stats = min(reps, key=lambda r: abs(r[0].output_tok_s - mid))
    update: dict = {"repetitions": [repetition_row(p) for p, _ in reps], "server": stats,
                    "output_tok_s_min": min(tok_s), "output_tok_s_max": max(tok_s)}
    for f in MEDIAN_FIELDS:
        vals = [getattr(p, f) for p, _ in reps if getattr(p, f) is not None]
        if vals:
            update[f] = statistics.median(vals)
    update["completed"] = sum(p.completed for p, _ in reps) // len(reps)
    combined = point.model_copy(update=update)
    return combined.model_copy(update=spread.point_update(combined))  # intervals and the stability rule
