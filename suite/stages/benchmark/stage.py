"""Benchmark stage: ``vllm serve`` on 127.0.0.1 + vLLM's own load generator (``vllm bench serve``).

Runs in the serve environment (``python -m suite.stages benchmark``). Optionally first the offline
ceiling (``suite.stages.benchmark.offline``: the same workload through ``LLM.generate``). Then one server per variant
(``suite.stages.benchmark.server``: a free loopback port, its own process group, a per-run random API key, identified
before any load, failing at once with the server's own error line if it exits or another process holds the port),
whose KV-cache capacity is read from its ``/metrics`` (``vllm:cache_config_info``; the log line as fallback). It runs each load
point ``repetitions`` times with ``vllm bench serve`` (``suite.stages.benchmark.points``: random dataset, ``--ignore-eos``, a fresh seed per
run, saved JSON) while ``suite.stages.benchmark.bottleneck`` samples ``/metrics`` and CPU use, labels what bounded each
point, adds roofline fractions (``suite.stages.benchmark.roofline``), searches the sustainable rate under the SLO
(``suite.stages.benchmark.slo``), and always stops the whole process tree, also on failure. A failed point (client
error, lost requests, a point that timed out, the server dying) fails the stage with the client's or
the server's own error line. With ``evaluate`` set (``eval.engine: served``) the first server scores the
variant's tasks before any load point (``suite.stages.benchmark.served``) and its prefix cache is reset. With
``adaptive`` (throughput.adaptive_repetitions) a point the throughput gates judge stops repeating once they are decided
against the baseline's recorded repetitions (``suite.stages.benchmark.repeats``).
Where the server's engine start went is read from its log (``suite.runtime.engine.startlog``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from suite.runtime import safeio
from suite.runtime import procs, progress
from suite.runtime.engine.parallel import parallel_size
from suite.stages.benchmark import server
from suite.runtime.engine import determinism
from suite.stages.benchmark.bottleneck import ServerMonitor
from suite.stages.benchmark.host import host_cpu
from suite.stages.benchmark.labels import classify_point
from suite.stages.benchmark.client import WarmClient
from suite.stages.benchmark.gpumon import GpuSampler
from suite.records.benchmark import BenchmarkConfig, BenchmarkResult, LoadPoint, ServerStats
from suite.stages.benchmark.roofline import ModelCost, detect_gpu, gpu_peak, implied
from suite.stages.benchmark.served import SERVED_ENV, evaluate_on_server
from suite.runtime.engine import compilecache
from suite.stages.benchmark.server import (ServerError, kv_capacity, metrics_text, reset_prefix_cache, server_line,
                                           tail, vllm_server)
from suite.runtime.engine.startlog import parse_engine_start
from suite.runtime.envs import package_versions
from suite.records.engine import EngineStart
from suite.stages.benchmark.slo import capacity, search
from suite.stages.benchmark.repeats import GatedPoints, Until
from suite.stages.benchmark.points import (bench_command, combine_repetitions, goodput_slo, load_points, point_from_json,
                                           repetition_row)
from suite.stages.benchmark.workload import dataset_rows, task_prompts, write_dataset

log = logging.getLogger(__name__)


def stop_process_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the server's whole tree and process group, SIGKILL what is left after ``grace_s``."""
    procs.stop(proc, grace_s)


class LoadRunner:
    """Runs load points against one live server: each repetition is one `vllm bench serve` run in the warm
    client (``suite.stages.benchmark.client``) with its own seed (fresh random prompts, so the prefix cache cannot
    inflate a repetition), the run's API key in its environment, watched by a ServerMonitor, stopped if it
    outlives ``point_timeout_s``.

    A repetition whose client failed, or during which the server died, raises ServerError with the
    client's and the server's own error lines (the stage fails: no number from a broken point). A point
    that ran but timed out or lost requests comes back with ``ok=False`` (the SLO search counts it as
    a miss; ``run`` fails the stage for a sweep point)."""

    def __init__(self, config: BenchmarkConfig, proc: subprocess.Popen, port: int, out_dir: Path, tag: str = "",
                 api_key: str | None = None, server_log: Path | None = None, gpus: GpuSampler | None = None,
                 client: WarmClient | None = None):
        self.config, self.proc, self.port, self.out_dir, self.tag = config, proc, port, out_dir, tag
        self.api_key, self.server_log = api_key, server_log or out_dir / "server.log"
        self.client = client or WarmClient(out_dir / "client-worker.log")
        self.monitor = ServerMonitor(port, proc.pid, config.metrics_interval_s, gpus)
        self.runs = 0
        self.client_s = 0.0  # wall time of the benchmark client processes (start-up included)
        self._prompts: list[str] | None = None

    def prompts(self) -> list[str]:
        if self._prompts is None:
            self._prompts = task_prompts(Path(self.config.data_dir or "."), self.config.seed)
        return self._prompts

    def measure(self, label: str, rate, concurrency, num_prompts: int, repetitions: int,
                workload: str | None = None, until: Until | None = None) -> LoadPoint:
        """One load point; ``workload`` (default: the config's first) picks random or task prompts; ``until``: a gated
        point's stopping rule (suite.stages.benchmark.repeats), looked at after each repetition, ``repetitions``
        being then its most."""
        reps: list[tuple[LoadPoint, ServerStats]] = []
        most = "at most " if until is not None else ""
        for rep in range(repetitions):
            progress.update(f"load points (now {label}, repetition {rep + 1}/{most}{repetitions})",
                            getattr(self, "points_run", 0), getattr(self, "points_total", None))
            failed = self._one(label, rate, concurrency, num_prompts, rep, reps, workload or self.config.workloads[0])
            if failed is not None:
                return failed
            if until is not None and until.after([p for p, _ in reps]):
                break
        self.points_run = getattr(self, "points_run", 0) + 1
        point = combine_repetitions(reps)
        if until is not None:
            point = point.model_copy(update=until.fields())
            log.info("benchmark: load point %s: %d of at most %d repetitions (%s)", label, len(reps), repetitions,
                     point.stopped)
        return point

    def _server_died(self, label: str, rep: int, client_line: str | None = None) -> ServerError:
        said = f"; client: {client_line}" if client_line else ""
        return ServerError(f"load point {label} (repetition {rep + 1}): vllm serve died "
                           f"({procs.signal_name(self.proc.returncode)}): {server_line(self.server_log)}{said} "
                           f"[log: {self.server_log}]")

    def _one(self, label, rate, concurrency, num_prompts, rep, reps, workload) -> LoadPoint | None:
        def failure(error: str, stats: ServerStats | None = None) -> LoadPoint:
            return LoadPoint(label=label, request_rate=rate, max_concurrency=concurrency, ok=False, error=error,
                             server=stats, repetitions=[repetition_row(p) for p, _ in reps])

        if self.proc.poll() is not None:
            raise self._server_died(label, rep)
        self.runs += 1
        filename = f"bench-{self.tag}{label}-r{rep}.json"
        client_log = self.out_dir / f"bench-{self.tag}{label}-r{rep}.log"
        (self.out_dir / filename).unlink(missing_ok=True)  # an earlier attempt's file is not this one's result
        dataset, ds = None, self.config.dataset
        if workload == "dataset" and ds["format"] == "jsonl":  # each row's output length
            rows = dataset_rows(Path(ds["path"]), "jsonl")
            dataset = write_dataset([p for p, _ in rows], num_prompts + self.config.warmup_requests,
                                    self.out_dir / f"prompts-{label}-r{rep}.jsonl", f"r{self.runs}", [o for _, o in rows])
        elif workload == "dataset":  # ShareGPT: vLLM's own loader reads the file
            dataset = Path(ds["path"])
        if workload == "tasks":
            n = num_prompts + self.config.warmup_requests
            dataset = write_dataset(self.prompts(), n, self.out_dir / f"prompts-{label}-r{rep}.jsonl", f"r{self.runs}")
        cmd = bench_command(self.config, self.port, rate, concurrency, self.out_dir, filename, num_prompts,
                            seed=self.config.seed + 1009 * self.runs, dataset=dataset,
                            dataset_name="sharegpt" if workload == "dataset" and ds["format"] == "sharegpt" else "custom",
                            row_output_lens=workload == "dataset" and ds["format"] == "jsonl")
        env = {"OPENAI_API_KEY": self.api_key} if self.api_key else {}
        t0 = time.perf_counter()
        self.monitor.start(self.client.pid)
        argv = cmd[len(server.VLLM_CLI) + 2:]  # what the warm client's worker parses: the argv after "bench serve"
        try:
            rc = self.client.run(argv, client_log, env, self.config.point_timeout_s)
        finally:
            stats = self.monitor.stop()
            self.client_s += time.perf_counter() - t0
        with open(self.out_dir / f"monitor-{self.tag}{label}-r{rep}.jsonl", "w") as fh:  # the evidence behind the label
            fh.writelines(json.dumps(s) + "\n" for s in self.monitor.samples)
        if self.proc.poll() is not None:
            raise self._server_died(label, rep, procs.error_line(tail(client_log, 400)))
        if rc is None:
            return failure(f"the load point did not finish in {self.config.point_timeout_s} s "
                           "(the server could not keep up with it); client stopped", stats)
        if rc != 0 or not (self.out_dir / filename).is_file():
            why = procs.error_line(tail(client_log, 400)) or f"no error in its log ({tail(client_log, 1)})"
            raise ServerError(f"load point {label} (repetition {rep + 1}): vllm bench serve failed "
                              f"({procs.signal_name(rc)}): {why} [log: {client_log}]")
        point = point_from_json(label, rate, concurrency, self.out_dir / filename,
                                goodput_slo(self.config.bench_args)).model_copy(update={"argv": argv})
        if not point.ok:
            return point.model_copy(update={"server": stats,
                                            "repetitions": [repetition_row(p) for p, _ in reps] + [repetition_row(point)]})
        reps.append((point, stats))
        return None


def annotate(point: LoadPoint, config: BenchmarkConfig, cost: ModelCost | None, peak, offline_tok_s: float | None) -> LoadPoint:
    """Roofline fractions, bottleneck label (which reads them) and the share of the offline ceiling, for one point."""
    update: dict = {}
    if point.ok and cost is not None:
        running = point.server.running_mean if point.server else None
        input_len = point.mean_input_len or config.input_len
        input_tok_s = point.input_tok_s if point.input_tok_s is not None else point.req_s * input_len
        update["roofline"] = implied(cost, peak, point.output_tok_s, input_tok_s, running, input_len + config.output_len / 2)
    if point.ok and offline_tok_s:  # before the label: a point at the offline ceiling is the engine's own pace
        update["ceiling_fraction"] = point.output_tok_s / offline_tok_s
    update["bottleneck"], update["bottleneck_reason"] = classify_point(point.model_copy(update=update),
                                                                       config.engine.engine_args)
    return point.model_copy(update=update)


def next_api_server_count(points: list[LoadPoint], count: int, limit: int | None) -> int | None:
    """Double the API servers (up to ``limit``) when a point was frontend-bound; None: keep these results."""
    if limit is None or count >= limit or not any(p.bottleneck == "frontend" for p in points):
        return None
    return min(2 * count, limit)


def offline_ceiling(config: BenchmarkConfig, out_dir: Path, slot=None) -> tuple[dict, EngineStart]:
    """The offline ceiling (suite.stages.benchmark.offline, a process of its own) and its engine's start."""
    cfg_path, res_path, log_path = out_dir / "offline.config.json", out_dir / "offline.json", out_dir / "offline.log"
    config.write(cfg_path)
    with open(log_path, "w") as fh:
        proc = procs.spawn([sys.executable, "-m", "suite.stages.benchmark.offline", str(cfg_path), str(res_path)], stdout=fh)
        try:
            rc = proc.wait()
        finally:
            procs.stop(proc, grace_s=10)  # its engine core goes with it
    if rc != 0 or not res_path.is_file():
        raise ServerError(f"the offline ceiling run failed ({procs.signal_name(rc)}): {procs.failure_line(log_path)} "
                          f"[log: {log_path}]")
    result = safeio.read_json(res_path, "record")
    compilecache.mark_complete(slot)
    return result, parse_engine_start(safeio.read_text(log_path, "log", errors="replace"), result.get("load_s"),
                                      "offline", result.get("started_at"), slot, compilecache.engine_key(config.engine))


def run(config: BenchmarkConfig) -> BenchmarkResult:
    start = time.perf_counter()
    determinism.apply(config.engine)  # eval.deterministic: the server and the offline ceiling inherit it
    out_dir = Path(config.output_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    # NVML readings of the engine's GPUs in every load point (none without NVIDIA GPUs)
    gpus = GpuSampler(limit=parallel_size(config.engine.engine_args, data_parallel=True))
    client = WarmClient(out_dir / "client-worker.log").start()  # its imports overlap the server's start
    try:
        return _run(config, start, out_dir, gpus, client)
    finally:
        client.close()
        gpus.close()


class _Roof(NamedTuple):
    """What a point's annotation reads besides the point (``annotate``): the model's costs, the GPU's peaks, the
    offline ceiling's tokens/s."""

    cost: ModelCost | None
    peak: object
    offline_tok_s: float | None


@dataclass
class _Rounds:
    """The server rounds of one benchmark: the last round's points, server and SLO search, the earlier rounds'
    points, and the seconds each part took (the result's accounting)."""

    count: int  # API servers of the current round
    earlier: list[dict] = field(default_factory=list)
    points: list[LoadPoint] = field(default_factory=list)
    slo: object = None
    evaluation: object = None
    evaluate_s: float = 0.0
    kv_page: str | None = None
    slot: object = None  # the compile store's folder for this engine (suite.runtime.engine.compilecache)
    gated: GatedPoints | None = None  # the points repeated until the throughput gates decide (adaptive_repetitions)
    starts: list[EngineStart] = field(default_factory=list)  # every engine start, in order (the ledger)
    ready_s: float = 0.0
    cmd: list[str] = field(default_factory=list)
    served_s: float = 0.0
    client_s: float = 0.0
    start_stop_s: float = 0.0


def _run(config: BenchmarkConfig, start: float, out_dir: Path, gpus: GpuSampler, client: WarmClient) -> BenchmarkResult:
    """The GPU's name and peaks, the model's costs and the offline ceiling; then the server rounds; then the result."""
    log_path = out_dir / "server.log"
    gated = GatedPoints(config)  # the baseline's repetitions, read before any engine starts
    gpu = config.gpu or detect_gpu()
    named_peak = gpu_peak(gpu)
    cost = ModelCost.from_folder(config.engine.model, config.engine.kv_cache_dtype)
    slot = compilecache.use(config.engine, package_versions())  # the offline engine and the servers inherit it
    offline, starts = None, []
    if config.offline_ceiling:
        offline, first = offline_ceiling(config, out_dir, slot)
        starts.append(first)
    roof = _Roof(cost, named_peak[1] if named_peak else None, offline["output_tok_s"] if offline else None)
    rounds = _serve_rounds(config, out_dir, log_path, gpus, client, roof, _Rounds(config.api_server_count, slot=slot,
                                                                                   starts=starts, gated=gated))
    return _result(config, rounds, offline, roof.offline_tok_s, gpu, gpus, log_path, start)


def _serve_rounds(config: BenchmarkConfig, out_dir: Path, log_path: Path, gpus: GpuSampler, client: WarmClient,
                  roof: _Roof, r: _Rounds) -> _Rounds:
    """Serve, evaluate on the server first where the evaluation is served, measure every load point and (last) the
    SLO search; while the points are frontend-bound with room to grow, restart with more API servers and measure
    again."""
    while True:
        t_server, started_at = time.perf_counter(), time.time()
        with vllm_server(config.engine, r.count, config.seed, log_path, config.server_timeout_s,
                         env=SERVED_ENV if config.evaluate else None) as (proc, port, ready_s, cmd, api_key):
            r.ready_s, r.cmd = ready_s, cmd
            compilecache.mark_complete(r.slot)
            said = safeio.read_text(log_path, "log", errors="replace")
            r.starts.append(parse_engine_start(said, ready_s, "server", started_at, r.slot,
                                               compilecache.engine_key(config.engine)))
            r.kv_page = metrics_text(port)  # vllm:cache_config_info is set before /health answers
            if config.evaluate is not None and r.evaluation is None:  # served: the tasks first, on this server
                t_eval = time.perf_counter()
                r.evaluation = evaluate_on_server(config.evaluate, config.engine, proc, port, api_key, out_dir, log_path)
                reset_prefix_cache(port, api_key)  # the load points must not reuse the evaluation's prompts
                r.evaluate_s = time.perf_counter() - t_eval
                log.info("benchmark: served evaluation %.1f s; prefix cache reset", r.evaluate_s)
            runner = LoadRunner(config, proc, port, out_dir, tag=f"a{r.count}-" if r.earlier else "", api_key=api_key,
                                server_log=log_path, gpus=gpus, client=client)
            r.points = _measure_points(config, runner, roof, r.gated)
            more = next_api_server_count(r.points, r.count, config.max_api_server_count)
            if more is None and config.slo:
                r.slo = _slo_search(config, runner, r.points, roof)
            r.client_s += runner.client_s
            t_stop = time.perf_counter()
        r.served_s += time.perf_counter() - t_server
        r.start_stop_s += r.ready_s + (time.perf_counter() - t_stop)
        if more is None:
            return r
        # frontend-bound with room to grow: restart with more API servers and measure again
        r.earlier.append({"api_server_count": r.count, "points": [p.model_dump() for p in r.points]})
        r.count = more


def _measure_points(config: BenchmarkConfig, runner: LoadRunner, roof: _Roof,
                    gated: GatedPoints | None = None) -> list[LoadPoint]:
    """Every workload's load points on this server, each annotated; a broken point fails the stage. A gated point
    (``gated``) is repeated until the throughput gates are decided."""
    points: list[LoadPoint] = []
    several = len(config.workloads) > 1
    planned = load_points(config)
    runner.points_total = len(config.workloads) * len(planned)  # the SLO search adds probes
    for workload in config.workloads:
        for i, (label, rate, conc) in enumerate(planned):
            label = f"{workload}-{label}" if several else label
            until = gated.until(workload, i, len(planned)) if gated is not None else None
            point = runner.measure(label, rate, conc, config.num_prompts, config.repetitions, workload, until)
            if not point.ok:  # no number from a broken point: the stage fails, with the reason
                raise ServerError(f"load point {label}: {point.error}")
            if several:
                point = point.model_copy(update={"workload": workload})
            ceiling = roof.offline_tok_s if workload == config.workloads[0] else None
            points.append(annotate(point, config, roof.cost, roof.peak, ceiling))
    return points


def _slo_search(config: BenchmarkConfig, runner: LoadRunner, points: list[LoadPoint], roof: _Roof):
    """The highest rate that meets the SLOs (``slo.search``), probed on this server from the first workload's
    capacity."""
    n = config.slo.num_prompts or config.num_prompts

    def probe(rate: float, prompts: int) -> LoadPoint:
        label = f"slo-{rate:g}" if prompts == n else f"slo-{rate:g}-n{prompts}"  # a resized probe
        p = runner.measure(label, rate, None, prompts, 1)
        return annotate(p, config, roof.cost, roof.peak, roof.offline_tok_s)

    return search(probe, config.slo, n, capacity([p for p in points if p.workload in (None, config.workloads[0])]))


def _result(config: BenchmarkConfig, r: _Rounds, offline: dict | None, offline_tok_s: float | None, gpu: str | None,
            gpus: GpuSampler, log_path: Path, start: float) -> BenchmarkResult:
    """The stage's result: the last round's points and server, the KV capacity, the offline ceiling, the seconds."""
    kv_tokens, max_conc, _ = kv_capacity(r.kv_page, safeio.read_text(log_path, "log", errors="replace"))
    gpu_sampling = f"NVML, GPUs {gpus.indices}" if gpus.available else gpus.error
    return BenchmarkResult(
        points=r.points, kv_cache_tokens=kv_tokens,
        max_concurrency_at_max_len=max_conc,
        kv_capacity_requests=kv_tokens / (config.input_len + config.output_len) if kv_tokens else None,
        offline_tok_s=offline_tok_s, offline_s=offline["generate_s"] if offline else None,
        offline_preemptions=offline.get("preemptions") if offline else None,
        offline_batch_limits=offline.get("batch_limits") if offline else None, slo=r.slo, gpu=gpu, host_cpu=host_cpu(),
        gpu_sampling=gpu_sampling, workload=config.workloads[0] if len(config.workloads) > 1 else None,
        api_server_count=r.count, scaled_from=r.earlier, client_s=r.client_s,
        overhead_s=max(0.0, r.served_s - r.start_stop_s - r.client_s - r.evaluate_s),
        server_start_s=r.ready_s, engine_start=r.starts[-1], engine_starts=r.starts,
        evaluate=r.evaluation, wall_s=time.perf_counter() - start, server_log=str(log_path), server_command=r.cmd,
        versions=package_versions(),
    )
