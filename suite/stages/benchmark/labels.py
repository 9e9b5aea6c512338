"""What bounded a load point, read from its recorded evidence: the rule behind ``LoadPoint.bottleneck``.

A pure function of a point's record (its server statistics, GPU samples summary and roofline) and the variant's
engine arguments: ``bottleneck.ServerMonitor`` and ``gpumon`` gather the evidence while a point runs, and the stage
labels each point with ``classify`` (``stage.annotate``). Kept apart from both, with no stage dependency, so that a
summary can read a result recorded under an older rule by the current one (``relabel``, ``shown_label``), e.g. a
point labelled before the GPU evidence could outrank the sequence cap. The labels and the
thresholds are described in ``bottleneck``'s and ``gpumon``'s docstrings.
"""

from __future__ import annotations

from suite.records.benchmark import LoadPoint, ServerStats

BUSY_UTIL = 90.0
IDLE_UTIL = 70.0
NEAR_ROOF = 0.5
LOW_POWER = 0.6
BUSY_CORE = 90.0
HOST_SHARE = 0.5  # of the GPU's idle time, the share in host-bound samples at which an undecided point is engine-cpu
CEILING_REACHED = 0.95  # a served point at this share of the offline engine's figure or more ran at the engine's pace
DRAIN_NOTE = 0.03  # a front-end drain this share of the point's duration or more is named in the reason


MIN_SAMPLES = 3  # fewer loaded samples with GPU readings than this: no GPU verdict
PHASE_SAMPLES = 3  # host-bound samples in a row that make a phase (``bottleneck.host_phases``)


def gpu_evidence(stats, roofline: dict | None, pipeline_parallel: int = 1,
                 ceiling_fraction: float | None = None) -> tuple[str, str] | None:
    """(label, reason) splitting ``engine`` by the GPU samples (see the module docstring), or None without them.
    Utilisation, power and the engine core's CPU are read over the same loaded samples (``bottleneck.summarize``)."""
    util = getattr(stats, "gpu_util_mean", None)
    if util is None or stats.gpu_samples < MIN_SAMPLES:
        return None
    if pipeline_parallel > 1:  # each stage's GPU idles while the others work: low utilisation is not host time
        return "engine", (f"the engine had a queue (mean {stats.waiting_mean or 0:.1f} waiting); with pipeline "
                          f"parallel {pipeline_parallel} the GPUs' {util:.0f}% busy does not separate GPU from host")
    roof = roofline or {}
    tensor, hbm = roof.get("tensor_frac"), roof.get("hbm_frac")
    figures = _gpu_figures(stats, util, tensor, hbm)
    queue = f"mean {stats.waiting_mean or 0:.1f} waiting, {stats.running_mean or 0:.0f} running"
    core = stats.loaded_engine_core_cpu_pct if stats.loaded_engine_core_cpu_pct is not None else stats.engine_core_cpu_pct
    host, host_n = getattr(stats, "gpu_idle_host_frac", None), getattr(stats, "host_bound_samples", 0)
    phases = _host_phases(stats, host, host_n)
    if util >= BUSY_UTIL:
        # a busy point can still hold host-bound phases (the 8B shape's BF16 at 90.5% busy: 13 samples, 59% of its
        # idle time): named, so that a label on the 90% line shows what it rests on
        named = phases if host is not None and host >= HOST_SHARE and host_n >= PHASE_SAMPLES else ""
        how = _how_busy(tensor, hbm, _power_frac(stats))
        return "gpu", f"the engine had a queue ({queue}) and the GPU was busy ({figures}{named}): {how}"
    if util < IDLE_UTIL and core is not None and core >= BUSY_CORE:
        return "engine-cpu", (f"the engine had a queue ({queue}) while the GPU idled ({figures}) and the engine-core "
                              f"process was at {core:.0f}% of a core: the host side of its loop (scheduling, input "
                              "preparation, output processing, kernel launches) set the pace. The idle GPU is the "
                              "evidence; a full core alone is not (a CUDA sync spin-waits at 100% too)")
    if util >= IDLE_UTIL and ceiling_fraction is not None and ceiling_fraction >= CEILING_REACHED:
        # the H100 run of issue 41: FP8 at rate 100 reached 99.75% of its offline figure with the GPU 90% busy and was
        # labelled engine-cpu by its host-bound phases; the served point ran at the engine's own pace, and a mostly
        # busy GPU does not make that pace the serving host's
        return "engine", (f"the engine had a queue ({queue}) and the point reached {100 * ceiling_fraction:.1f}% of "
                          f"the offline engine's output on the same workload with the GPU mostly busy ({figures}"
                          f"{phases}): the engine's own ceiling, not the server's host side; the GPU evidence does not "
                          "split it further")
    if util >= IDLE_UTIL and host is not None and host >= HOST_SHARE and host_n >= PHASE_SAMPLES:
        return "engine-cpu", (f"the engine had a queue ({queue}); over the point the GPU evidence does not decide "
                              f"({figures}){phases}: most of the GPU's idle time fell in host-bound phases, where the "
                              "host side, not the GPU, set the pace (a fast step that leaves the scheduling and output "
                              "processing of a large batch exposed, or the intake of a burst of requests)")
    core_said = f"{core:.0f}%" if core is not None else "unknown"
    return "engine", (f"the engine had a queue ({queue}); GPU evidence does not decide ({figures}, engine core "
                      f"{core_said} CPU{phases})")


def _power_frac(stats) -> float | None:
    """The GPUs' mean power draw over the loaded samples as a share of their power limit; None where not read."""
    power, limit = stats.gpu_power_w_mean, stats.gpu_power_limit_w
    return power / limit if power is not None and limit else None


def _gpu_figures(stats, util: float, tensor: float | None, hbm: float | None) -> str:
    """What the GPU samples say, for a reason: utilisation, power against the limit, the roofline fractions, and a
    benchmark client at a full core (not the limit while the engine queues, but it colours latencies)."""
    figures = (f"kernels ran {util:.0f}% of the time"
               + (f", {stats.gpu_power_w_mean:.0f} W of {stats.gpu_power_limit_w:.0f}"
                  if _power_frac(stats) is not None else "")
               + (f", tensor {100 * tensor:.1f}% / HBM {100 * hbm:.1f}% of peak (roofline)"
                  if tensor is not None and hbm is not None else ""))
    client = stats.loaded_client_cpu_pct
    if client is not None and client >= BUSY_CORE:
        figures += (f"; the benchmark client used {client:.0f}% of a core too, so its TTFT/TPOT may include "
                    "the client's own lag")
    return figures


def _host_phases(stats, host: float | None, host_n: int) -> str:
    """The host-bound samples (``bottleneck.host_phases``) and the share of the GPU's idle time they hold, with
    whether the engine core shared a physical core with the client or a busy API server; '' without any."""
    if not (host_n and host):
        return ""
    phases = (f"; {host_n} of {stats.gpu_samples} samples were host-bound (the engine core at a full core while "
              f"the GPU idled part of the time), holding {100 * host:.0f}% of the GPU's idle time")
    shared = getattr(stats, "engine_core_shared_core_samples", None)
    if shared is not None:  # where the processes ran was recorded (not in older records)
        phases += (f", in {shared} of them with the engine core on the same physical core as the client or a busy "
                   "API server" if shared else ", none of them with the engine core on the client's or a busy API "
                   "server's physical core")
    return phases


def _how_busy(tensor: float | None, hbm: float | None, power_frac: float | None) -> str:
    """How a busy GPU was used: near a roof, busy with small kernels (low power), or drawing power far from both."""
    if tensor is not None and hbm is not None and max(tensor, hbm) >= NEAR_ROOF:
        return "near its " + ("tensor" if tensor >= hbm else "memory-bandwidth") + " roof"
    if tensor is not None and hbm is not None and (power_frac is None or power_frac < LOW_POWER):
        return ("far from both roofs: busy with small, latency-bound kernels; more work per step (a larger "
                "batch) would use it better than a faster GPU")
    if tensor is not None and hbm is not None:
        return ("far from both roofs of the model's arithmetic yet drawing power: work the roofline leaves out "
                "(attention, activations, recomputation) may be what fills it")
    return "no roofline to say how close to its roofs"


def relabel(point: LoadPoint, engine_args: dict) -> tuple[str, str]:
    """(label, reason) the current rule gives a recorded point: its recorded server statistics and roofline, with the
    variant's max_num_seqs and pipeline parallel size, as ``stage.annotate`` classified it when it ran. So a result
    recorded under an older rule reads as a new one does (points labelled `seq-cap` before the GPU evidence could
    outrank the cap read `engine-cpu`, as a later point on the same evidence does); the
    record itself keeps what was said when it ran. A point without server statistics keeps its recorded label."""
    if point.server is None:
        return point.bottleneck or "-", point.bottleneck_reason or ""
    return classify_point(point, engine_args)


def classify_point(point: LoadPoint, engine_args: dict) -> tuple[str, str]:
    """``classify`` on the point's own server statistics and roofline, with the max_num_seqs and pipeline parallel
    size of the engine arguments it was served with: how the stage labels a point (``stage.annotate``), and how
    ``relabel`` reads a recorded one."""
    return classify(point, point.server, engine_args.get("max_num_seqs"), point.roofline or None,
                    int(engine_args.get("pipeline_parallel_size") or 1))


def shown_label(point: LoadPoint, engine_args: dict) -> tuple[str, str]:
    """The bound column's text and its reason: the current rule's label, and the recorded one beside it when they
    differ ("engine-cpu (as run: seq-cap)")."""
    label, reason = relabel(point, engine_args)
    if point.bottleneck and point.bottleneck != label:
        return f"{label} (as run: {point.bottleneck})", f"{reason}. As run: {point.bottleneck_reason or '-'}"
    return label, reason


def classify(point: LoadPoint, stats: ServerStats | None, max_num_seqs: int | None = None,
             roofline: dict | None = None, pipeline_parallel: int = 1) -> tuple[str, str]:
    """(label, reason) for one load point (``_classify``), the reason naming a front end that was still delivering
    replies after the engine had finished (``ServerStats.frontend_drain_s``) when that took ``DRAIN_NOTE`` of the
    point's duration or more: time in the client's window that neither the engine nor the GPU spent."""
    label, reason = _classify(point, stats, max_num_seqs, roofline, pipeline_parallel)
    drain = getattr(stats, "frontend_drain_s", None)
    if drain and point.duration_s and drain / point.duration_s >= DRAIN_NOTE:
        reason += (f". The front end lagged: an API-server process was still at a full core for {drain:.1f} s "
                   f"({100 * drain / point.duration_s:.0f}% of the point) after the engine's last step")
    return label, reason


def _classify(point: LoadPoint, stats: ServerStats | None, max_num_seqs: int | None = None,
              roofline: dict | None = None, pipeline_parallel: int = 1) -> tuple[str, str]:
    """(label, reason) for one load point; see the module docstring for the labels. ``roofline`` (the point's
    implied fractions, ``suite.stages.benchmark.roofline.implied``) says how a GPU-bound point used the GPU.

    ``max_num_seqs`` is the recipe's engine argument when it sets one. When it does not, a cap is
    inferred from the samples: requests waited and, in at least half of those samples, the running
    count sat at its peak (vLLM does not report its max_num_seqs; its default on a large GPU is 1024).
    """
    if stats is None or stats.samples == 0:
        return "unknown", "no server metrics were sampled during the point"
    if (stats.preemptions or 0) > 0 or (stats.kv_usage_max or 0) >= 0.95:
        return "kv-cache", (f"{stats.preemptions or 0:.0f} preemptions, KV-cache usage peaked at "
                            f"{100 * (stats.kv_usage_max or 0):.0f}%")
    running_max = stats.running_max or 0
    cap, source = max_num_seqs, "engine_args"
    if cap is None and (stats.queued_at_peak_frac or 0) >= 0.5 and running_max >= 2:
        cap, source = int(running_max), "not set by the recipe: the engine's default"
    at_cap = bool(cap) and running_max >= cap
    queued = (stats.waiting_mean or 0) >= 1 or at_cap
    split = gpu_evidence(stats, roofline, pipeline_parallel, point.ceiling_fraction) if queued else None
    if at_cap and (stats.waiting_max or 0) >= 1:
        held = (f"up to {stats.waiting_max:.0f} requests waited while {running_max:.0f} ran, KV cache at most "
                f"{100 * (stats.kv_usage_max or 0):.0f}% full: max_num_seqs={cap} ({source}) held the batch")
        if split is not None and split[0] == "engine-cpu" and (stats.gpu_util_mean or 0.0) < IDLE_UTIL:
            # the cap held the batch, but the engine loop's host side was already a full core with the GPU idle over
            # the whole point: a bigger batch is more host work per step, not more steps (a small model on a fast
            # GPU). Host-bound phases inside a point 70-90% busy do not outrank the cap
            return split[0], (f"{split[1]}. The batch also sat at its cap ({held}); a larger cap would add host "
                              "work to every step too: measure it before expecting tok/s from it")
        return "seq-cap", (f"{held}, not KV space; raising engine_args.max_num_seqs trades queueing (TTFT) for "
                           "per-token latency, and adds tok/s only if the GPU has compute left")
    if queued:  # at an inferred cap something waited: seq-cap above
        if split is not None:
            return split
        return "engine", (f"the engine had a queue (mean {stats.waiting_mean or 0:.1f} waiting, "
                          f"{stats.running_mean or 0:.0f} running): it, not the front end, set the pace")
    if (stats.client_cpu_pct or 0) >= BUSY_CORE:
        return "client", (f"the benchmark client used {stats.client_cpu_pct:.0f}% of a core while the "
                          "engine had no queue: the client, not the server, set the pace")
    if (stats.api_server_cpu_pct or 0) >= BUSY_CORE:
        return "frontend", (f"an API-server process used {stats.api_server_cpu_pct:.0f}% of a core while the "
                            "engine had no queue: add API servers (api_server_count)")
    offered = point.request_rate
    if isinstance(offered, (int, float)) and point.max_concurrency is None:
        return "offered-load", (f"no queue at the engine at the offered {offered} req/s: the load, not the server, "
                                f"was the limit ({point.req_s:.2f} req/s over the whole point, last replies included)")
    if (stats.engine_core_cpu_pct or 0) >= BUSY_CORE:
        return "engine", (f"the engine-core process was busy ({stats.engine_core_cpu_pct:.0f}% CPU) with no queue: "
                          "on the CPU backend that is the compute; on a GPU, the scheduler loop")
    if point.completed and (stats.running_max or 0) >= point.completed:
        return "unsaturated", (f"all {point.completed} requests ran at once: the point is smaller than the engine's "
                               "batch (use more prompts or a concurrency point)")
    return "unsaturated", ("no engine queue, no preemption and no busy process: the limit is elsewhere "
                           "(sampling interval, scheduling, or a short point)")
