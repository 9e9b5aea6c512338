"""What bounded a load point: watch the server's ``/metrics`` and the processes' CPU while it runs.

A throughput number means nothing until you know what bounds it. One vLLM API-server process can cap
BF16 and FP8 alike at the same figure: the engine's queue is empty and the API server burns a whole core. ``ServerMonitor`` samples, every ``interval_s``:

- the engine's Prometheus gauges (``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc``) and counter (``vllm:num_preemptions``): running, waiting and
  preemptions summed over engines (one series per ``engine`` label), KV usage the max over engines
  (each engine has its own KV cache: two at 60% are 60% full, not 120%);
- the CPU use of each process of the server's group by role (API server, engine core, workers; vLLM
  names them with ``setproctitle``) and of the benchmark client;
- each visible GPU's NVML utilisation, SM clock, memory used and power (``suite.stages.benchmark.gpumon``);
- where each role's busiest process last ran (``on_cpu``: logical CPU and physical core, ``cpu_cores``).

``classify`` turns the summary into one label per point:
  ``kv-cache``      requests were preempted (or KV usage hit ~100%): capacity-bound
  ``seq-cap``       requests queued while the batch sat at its cap (``max_num_seqs``, set or vLLM's
                    default, e.g. 1024) with KV space to spare: the cap, not KV space, held the batch;
                    unless the GPU evidence says ``engine-cpu`` (below): then that is the label, the cap in its
                    reason, since a bigger batch only adds host work to each step
  ``engine``        requests queued at the engine (or it ran at max_num_seqs): the GPU/engine is the limit;
                    with NVML samples split by evidence (``suite.stages.benchmark.gpumon``) into
  ``gpu``           ... and kernels ran ≥ 90% of the time: the GPU set the pace (the reason says near which roof)
  ``engine-cpu``    ... while the GPU idled (< 70% busy) and the engine-core process used a full core; or,
                    with the GPU between 70% and 90% busy, when most of its idle time fell in host-bound phases
                    (3 or more samples in a row with the GPU under 90% busy and the engine core at a full core:
                    ``host_phases``); such phases do not outrank ``seq-cap``
  ``client``        the load generator used a full core: the numbers measure the client
  ``frontend``      an API-server process used a full core while the engine had no queue
                    (and ``engine`` again when only the engine-core process is busy)
  ``offered-load``  a finite Poisson rate and no queue anywhere: the load was the limit
  ``unsaturated``   none of the above: no queue and no busy process (look at the logs)

A front end still delivering replies after the engine's last step (``frontend_drain``: an API-server process at a
full core, the engine idle, the client's clock running) is named in the reason when it took 3% of the point or more.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from statistics import fmean, median

from suite.stages.benchmark.gpumon import GpuSampler, summarize_gpu
from suite.stages.benchmark.labels import BUSY_CORE, BUSY_UTIL, PHASE_SAMPLES
from suite.stages.benchmark.host import cpu_cores
from suite.records.benchmark import ServerStats

GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",  # the name in older vLLM releases
}
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
BUSY_API_SERVER = 50.0  # % of a core: an API server this busy is placed in on_cpu["api_servers"] (it competes for its core)


MAX_OVER_SERIES = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format (prometheus-client's parser) -> {sample name: value over its label sets}:
    the max for KV-cache usage (a share per engine), the sum for everything else (counts)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if name in out:
                out[name] = max(out[name], value) if name in MAX_OVER_SERIES else out[name] + value
            else:
                out[name] = value
    return out


def process_role(cmdline: str, is_root: bool) -> str:
    for marker, role in (("APIServer", "api_server"), ("EngineCore", "engine_core"), ("Worker", "worker"),
                         ("DPCoordinator", "coordinator")):
        if marker in cmdline:
            return role
    return "api_server" if is_root else "other"


class ServerMonitor:
    """Background sampler of one server (and, while attached, one benchmark client)."""

    def __init__(self, port: int, server_pid: int, interval_s: float = 1.0, gpus: GpuSampler | None = None):
        import psutil

        self._psutil = psutil
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.server_pid = server_pid
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self._procs: dict[int, object] = {}
        self._client = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.gpus = gpus
        self.cores = cpu_cores()

    # -- control
    def start(self, client_pid: int | None = None) -> "ServerMonitor":
        self.samples = []
        self._client = None
        if client_pid is not None:
            try:
                self._client = self._psutil.Process(client_pid)
                self._client.cpu_percent(None)
            except self._psutil.Error:
                self._client = None
        self._stop.clear()
        self._cpu_by_role()  # prime cpu_percent counters
        self._thread = threading.Thread(target=self._loop, name="server-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> ServerStats:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        return summarize(self.samples)

    # -- sampling
    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self.sample())

    def sample(self) -> dict:
        s: dict = {"t": time.time()}
        try:
            with urllib.request.urlopen(self.url, timeout=2) as r:
                metrics = parse_prometheus(r.read().decode("utf-8", "replace"))
            for name, key in GAUGES.items():
                if name in metrics:
                    s[key] = metrics[name]
            for name in PREEMPTIONS:
                if name in metrics:
                    s["preemptions"] = metrics[name]
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):  # ValueError: bad text
            s["scrape_failed"] = True
        s["cpu"], on, api_busy = self._cpu_by_role()
        if self.gpus is not None and self.gpus.available:
            s["gpu"] = self.gpus.sample()
        if self._client is not None:
            try:
                s["cpu"]["client"] = self._client.cpu_percent(None)
                on["client"] = self._client.cpu_num()
            except (self._psutil.Error, AttributeError):  # AttributeError: no cpu_num on this platform
                pass
        # where each role's busiest process last ran: [logical CPU, its core as cpu_cores names it]: a host-bound point
        # moves with where its engine core ran (beside the client or an API server on one physical core, or not)
        s["on_cpu"] = {role: [cpu, self.cores.get(cpu)] for role, cpu in on.items()}
        if api_busy:  # every API server at half a core or more, not only the busiest: any of them can crowd the engine core
            s["on_cpu"]["api_servers"] = [[cpu, self.cores.get(cpu)] for cpu in api_busy]
        return s

    def _cpu_by_role(self) -> tuple[dict[str, float], dict[str, int], list[int]]:
        """Busiest process per role, in percent of one core since the previous call, and the logical CPU it last ran
        on (psutil's cpu_num, where the platform has it); and the logical CPUs of every API-server process at
        ``BUSY_API_SERVER`` or more (with several API servers the busiest is not the only one that can share the
        engine core's physical core)."""
        ps = self._psutil
        try:
            root = ps.Process(self.server_pid)
            procs = [root, *root.children(recursive=True)]
        except ps.Error:
            return {}, {}, []
        out: dict[str, float] = {}
        on: dict[str, int] = {}
        api_busy: list[int] = []
        for p in procs:
            known = self._procs.get(p.pid)
            if known is None:
                self._procs[p.pid] = p
                try:
                    p.cpu_percent(None)
                except ps.Error:
                    pass
                continue
            try:
                role = process_role(" ".join(known.cmdline()), known.pid == self.server_pid)
                pct = known.cpu_percent(None)
                busiest = role not in out or pct >= out[role]
                busy_api = role == "api_server" and pct >= BUSY_API_SERVER
                cpu = None
                if busiest or busy_api:
                    try:
                        cpu = known.cpu_num()
                    except (ps.Error, AttributeError):  # AttributeError: no cpu_num on this platform
                        pass
                if busiest:
                    out[role] = pct
                    if cpu is None:
                        on.pop(role, None)
                    else:
                        on[role] = cpu
                if busy_api and cpu is not None:
                    api_busy.append(cpu)
            except ps.Error:
                continue
        return out, on, api_busy


def live(s: dict) -> bool:
    """False for a sample whose gauges are stale: vLLM updates them from the engine loop, so after the last reply
    they keep their last values while the engine core idles (< 5% of a core) and no kernel runs."""
    core = s.get("cpu", {}).get("engine_core")
    gpu = [g.get("util_pct", 0) for g in s.get("gpu") or []]
    return core is None or core >= 5 or any(u > 0 for u in gpu)


def summarize(samples: list[dict]) -> ServerStats:
    """Means over the samples where the server had work (running or waiting > 0, gauges not stale); maxima over
    all. The GPU evidence (``gpumon``) and the engine core's and client's CPU beside it are taken over the loaded
    samples: at least half the point's peak of running + waiting (not the warm-up requests or the tail)."""
    scraped = [s for s in samples if not s.get("scrape_failed")]
    active = [s for s in scraped if s.get("running", 0) + s.get("waiting", 0) > 0 and live(s)] or scraped
    top = max((s.get("running", 0) + s.get("waiting", 0) for s in active), default=0)
    loaded = [s for s in active if s.get("running", 0) + s.get("waiting", 0) >= 0.5 * top] or active

    def mean(key, src=active):
        vals = [s[key] for s in src if key in s]
        return fmean(vals) if vals else None

    def peak(key):
        vals = [s[key] for s in scraped if key in s]
        return max(vals) if vals else None

    def cpu_mean(role, src=active):
        vals = [s["cpu"][role] for s in src if role in s.get("cpu", {})]
        return fmean(vals) if vals else None

    queued = [s for s in scraped if s.get("waiting", 0) > 0 and "running" in s]
    in_phases = [x for run in host_phases(loaded) for x in run]
    host_share, host_n = idle_host_share(loaded, in_phases)
    running_max = peak("running")
    pre = [s["preemptions"] for s in scraped if "preemptions" in s]
    return ServerStats(
        samples=len(samples), scrape_failures=len(samples) - len(scraped),
        running_mean=mean("running"), running_max=running_max,
        waiting_mean=mean("waiting"), waiting_max=peak("waiting"),
        queued_at_peak_frac=(sum(s["running"] >= running_max for s in queued) / len(queued)) if queued else None,
        kv_usage_max=peak("kv_usage"), preemptions=(max(pre) - min(pre)) if pre else None,
        api_server_cpu_pct=cpu_mean("api_server"), engine_core_cpu_pct=cpu_mean("engine_core"),
        client_cpu_pct=cpu_mean("client"), loaded_samples=len(loaded),
        loaded_engine_core_cpu_pct=cpu_mean("engine_core", loaded), loaded_client_cpu_pct=cpu_mean("client", loaded),
        gpu_idle_host_frac=host_share, host_bound_samples=host_n, frontend_drain_s=frontend_drain(samples, active),
        engine_core_shared_core_samples=shared_core_samples(in_phases),
        **summarize_gpu(loaded),
    )


def _util(s: dict) -> float | None:
    """A sample's utilisation, the mean over its GPUs; None without readings."""
    gpus = [g["util_pct"] for g in s.get("gpu") or [] if "util_pct" in g]
    return sum(gpus) / len(gpus) if gpus else None


def host_phases(loaded: list[dict]) -> list[list[dict]]:
    """The host-bound phases among the loaded samples: runs of at least ``PHASE_SAMPLES`` samples in a row in which the
    engine-core process used a full core (``BUSY_CORE``) while the GPU's timeline had gaps (under ``BUSY_UTIL`` busy),
    so that one NVML window's jitter is not a phase. A sample without a GPU or engine-core reading is passed over (it
    neither extends nor ends a run); a gap in time over 1.5 median intervals (a failed scrape, samples below the loaded
    cut-off) ends one.

    The per-sample level is 90%, not the point-level rule's 70%, by evidence: the same FP8 dynamic point served twice on
    one machine (studies/2026-12-03-llama3-8b-shape-ceiling) decoded 1,024 sequences in lockstep with the GPU 100% busy
    while the engine core used 67-96% of a core (13,376 tok/s), and mostly at 48-81% busy while it used 92-103%
    (12,388 tok/s): where the engine core saturated, the FP8 GPU starved. A full core alone is no evidence (the second
    run's BF16 point had its engine core at ~100% beside a GPU 98-100% busy: longer steps hid the host work), so a
    sample needs both. The ramp of a point at rate inf (API servers taking in the burst while the engine core admits
    it) can be such a phase too: the host set the pace there as well.
    An older rule counted a sample alone and under 70%; records made under it keep the counts they were made with."""
    times = [s["t"] for s in loaded if "t" in s]
    step = median(b - a for a, b in zip(times, times[1:])) if len(times) > 2 else None
    phases: list[list[dict]] = []
    run: list[dict] = []
    last_t = None
    for s in loaded:
        if step and last_t is not None and "t" in s and s["t"] - last_t > 1.5 * step:
            phases.append(run)
            run = []
        last_t = s.get("t", last_t)
        util, core = _util(s), s.get("cpu", {}).get("engine_core")
        if util is None or core is None:
            continue
        if util < BUSY_UTIL and core >= BUSY_CORE:
            run.append(s)
        else:
            phases.append(run)
            run = []
    phases.append(run)
    return [r for r in phases if len(r) >= PHASE_SAMPLES]


def idle_host_share(loaded: list[dict], in_phases: list[dict]) -> tuple[float | None, int]:
    """(share, samples): of the GPUs' idle time over the loaded samples (100 - each sample's mean utilisation), the share
    that fell in the samples of their host-bound phases (``in_phases``, from ``host_phases``), and how many those are.
    Share None without NVML readings or with a GPU never idle.

    It finds a host-bound phase inside a point whose mean utilisation is between the thresholds: e.g. an 8B model
    in FP8 at rate inf, kernels 86-87% busy over the point but 33-81% while 1,024 sequences decoded in lockstep with
    the engine core at a full core."""
    idle = sum(max(0.0, 100.0 - u) for s in loaded if (u := _util(s)) is not None)
    host = sum(max(0.0, 100.0 - _util(s)) for s in in_phases)
    return (host / idle if idle > 0 else None), len(in_phases)


def _core(where: list | None):
    """The physical core of one placement in a sample's ``on_cpu`` ([logical CPU, core]): the core where sysfs named it,
    else the logical CPU (two processes on one logical CPU share its core too); None for no placement."""
    cpu, core = where or (None, None)
    return core if core is not None else (f"cpu{cpu}" if cpu is not None else None)


def shared_core_samples(phase_samples: list[dict]) -> int | None:
    """How many of the given samples (a point's host-bound phases) found the engine-core process on the same physical
    core (an SMT sibling or the same logical CPU) as the client, the busiest API server or any API server at half a
    core or more (``on_cpu["api_servers"]``), from the samples' ``on_cpu``; None where none of them recorded the engine core's
    placement (older records)."""
    n, seen = 0, False
    for s in phase_samples:
        on = s.get("on_cpu") or {}
        core = _core(on.get("engine_core"))
        if core is None:
            continue
        seen = True
        others = [on.get("client"), on.get("api_server"), *(on.get("api_servers") or [])]
        if core in (_core(w) for w in others):
            n += 1
    return n if seen else None


def frontend_drain(samples: list[dict], active: list[dict]) -> float | None:
    """Seconds, after the last sample in which the engine worked, during which the busiest API-server process was still
    at a full core with the engine idle: the front end delivering (detokenizing, streaming) replies the engine had
    finished, while the client's clock ran. Counted as the run of such samples right after the last active one, times
    the median sampling interval; None when there are too few samples to tell."""
    if len(samples) < 3 or not active or any("t" not in s for s in samples):
        return None
    ids = {id(a) for a in active}
    last = max(i for i, s in enumerate(samples) if id(s) in ids)
    n = 0
    for i, s in enumerate(samples[last + 1:]):
        if i == 0 and live(s) and s.get("running", 0) + s.get("waiting", 0) == 0:
            continue  # the engine's last step fell inside this sample's interval, after the gauges read 0
        if s.get("cpu", {}).get("api_server", 0.0) < BUSY_CORE or live(s):
            break
        n += 1
    return n * median(b["t"] - a["t"] for a, b in zip(samples, samples[1:]))


