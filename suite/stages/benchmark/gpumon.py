"""The GPU's side of a load point: NVML samples (utilisation, SM clock, memory used, power) and what they say.

``GpuSampler`` reads, for every GPU this process sees, through NVML (nvidia-ml-py's ``pynvml``, or the copy vLLM
ships as ``vllm.third_party.pynvml`` where nvidia-ml-py is not installed):

  util_pct        nvmlDeviceGetUtilizationRates().gpu: the share of the last sample period (1/6 s to 1 s, by
                  product) in which *any* kernel ran. It is not the share of the GPU's compute in use: one small
                  kernel at a time reads 100%.
  sm_clock_mhz    nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  mem_used_mib    nvmlDeviceGetMemoryInfo().used
  power_w         nvmlDeviceGetPowerUsage() (mW / 1000), against nvmlDeviceGetEnforcedPowerLimit() once

"The GPUs this process sees" follows vLLM (``vllm.platforms.cuda``): ``CUDA_VISIBLE_DEVICES`` indices are NVML
indices, ``GPU-…`` entries are UUIDs; unset, every GPU. The benchmark stage runs with the server's
``CUDA_VISIBLE_DEVICES``, so these are the server's GPUs. No NVML (no driver, no GPU, the CPU backend): no samples,
and the bottleneck label keeps to ``engine`` (``suite.stages.benchmark.bottleneck``).

``gpu_evidence`` turns a point's summary into the split of the ``engine`` label. Evidence and thresholds:

  ``gpu``         the engine had a queue and kernels ran ≥ ``BUSY_UTIL`` (90%) of the time: the GPU's timeline was
                  full, so the GPU (as the engine uses it) set the pace. The roofline says how: near a roof
                  (tensor or HBM ≥ ``NEAR_ROOF``, 50%) it is compute- or bandwidth-bound; far from both (and power
                  under ``LOW_POWER``, 60% of the limit) the GPU was busy with small, latency-bound kernels — more
                  work per step (a bigger batch, max_num_seqs) rather than a faster GPU is what would help.
  ``engine-cpu``  the engine had a queue yet kernels ran < ``IDLE_UTIL`` (70%) of the time and the engine-core
                  process used ≥ 90% of a core: requests waited while the GPU idled between steps for the host side
                  of the engine loop (scheduling, input preparation, output processing, launches). The idle GPU is
                  the evidence: the engine core's full core only says it was running (a CUDA sync spin-waits at
                  100%), and is required so that a stalled or idle engine is not called CPU-bound. Also a point
                  70–90% busy over its length when host-bound phases (3 or more samples in a row with the GPU under
                  90% busy and the engine core at a full core: ``bottleneck.host_phases``) held at least half the
                  GPU's idle time (``ServerStats.gpu_idle_host_frac``), such as the lockstep decode of a full batch
                  of a fast FP8 model.
  (no split)      fewer than 3 loaded samples with GPU readings, or pipeline parallel > 1 (each stage's GPU idles
                  while the others work, so low utilisation is not host time).
  ``engine``      otherwise in between (70–90% busy) or idle without a busy engine core (a sync, a worker process):
                  the evidence does not decide; the reason gives the figures and any host-bound samples.

90% is the level at which NVML's 1/6–1 s windows have no visible gap (a decode step of a few ms with a host gap of
≥ 10% shows as ≤ 90%); 70% leaves a margin under it so that sampling jitter at ~80% does not flip the label over a
whole point. Inside a point, a run of samples stands in for that margin (``bottleneck.host_phases``).
"""

from __future__ import annotations

import os
from statistics import fmean


def load_nvml():
    """The pynvml module (nvidia-ml-py, else vLLM's copy), or None."""
    try:
        import pynvml
        return pynvml
    except ImportError:
        pass
    try:
        from vllm.third_party import pynvml  # vLLM ships nvidia-ml-py's module under this name
        return pynvml
    except ImportError:
        return None


def visible_devices(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as vLLM reads it: None (unset: every GPU) or its entries (indices or UUIDs)."""
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


class GpuSampler:
    """NVML handles of this process's GPUs, opened once; ``sample()`` -> a list of per-GPU readings."""

    def __init__(self, nvml=None, env: dict | None = None, limit: int | None = None):
        self.nvml = nvml if nvml is not None else load_nvml()
        self.handles: list = []
        self.indices: list[int] = []
        self.power_limit_w: list[float | None] = []
        self.error: str | None = None
        if self.nvml is None:
            self.error = "no NVML (nvidia-ml-py or vLLM's copy of it)"
            return
        n = self.nvml
        try:
            n.nvmlInit()
            wanted = visible_devices((env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES"))
            if wanted is None:
                wanted = [str(i) for i in range(n.nvmlDeviceGetCount())]
            if limit:  # the engine uses the first tensor x pipeline (x data) parallel GPUs it sees: not idle ones
                wanted = wanted[:limit]
            for w in wanted:
                h = n.nvmlDeviceGetHandleByUUID(w) if w.startswith(("GPU-", "MIG-")) else n.nvmlDeviceGetHandleByIndex(int(w))
                self.handles.append(h)
                self.indices.append(int(n.nvmlDeviceGetIndex(h)))
                try:
                    self.power_limit_w.append(n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0)
                except n.NVMLError:
                    self.power_limit_w.append(None)
        except (n.NVMLError, ValueError) as e:  # no driver / no GPU / a CUDA_VISIBLE_DEVICES entry NVML does not know
            self.error = f"NVML: {e}"
            self.handles, self.indices, self.power_limit_w = [], [], []

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def sample(self) -> list[dict]:
        n, out = self.nvml, []
        for idx, h, limit in zip(self.indices, self.handles, self.power_limit_w):
            r: dict = {"index": idx}
            for key, read in (("util_pct", lambda: float(n.nvmlDeviceGetUtilizationRates(h).gpu)),
                              ("sm_clock_mhz", lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
                              ("mem_used_mib", lambda: n.nvmlDeviceGetMemoryInfo(h).used / 2**20),
                              ("power_w", lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0)):
                try:
                    r[key] = read()
                except n.NVMLError:  # a reading this GPU or driver does not support: left out, not zero
                    pass
            if limit is not None:
                r["power_limit_w"] = limit
            out.append(r)
        return out

    def close(self) -> None:
        if self.handles:
            try:
                self.nvml.nvmlShutdown()
            except self.nvml.NVMLError:
                pass
            self.handles = []


def summarize_gpu(samples: list[dict]) -> dict:
    """ServerStats' gpu_* fields from (loaded) monitor samples (each with an optional ``gpu`` list): utilisation, SM clock
    and power as means over samples and GPUs (the mean GPU of a tensor-parallel engine), memory used the peak
    over samples of the sum over GPUs, ``gpu_util_min`` the least busy GPU's mean (an idle rank shows there)."""
    rows = [s["gpu"] for s in samples if s.get("gpu")]
    if not rows:
        return {}

    def mean(key):
        vals = [g[key] for row in rows for g in row if key in g]
        return fmean(vals) if vals else None

    per_gpu: dict[int, list[float]] = {}
    for row in rows:
        for g in row:
            if "util_pct" in g:
                per_gpu.setdefault(g["index"], []).append(g["util_pct"])
    mem = [sum(g["mem_used_mib"] for g in row if "mem_used_mib" in g) for row in rows]
    limits = [g["power_limit_w"] for g in rows[0] if "power_limit_w" in g]
    return {"gpu_samples": len(rows), "gpu_count": len(rows[0]), "gpu_util_mean": mean("util_pct"),
            "gpu_util_min": min(fmean(v) for v in per_gpu.values()) if per_gpu else None,
            "gpu_sm_clock_mhz_mean": mean("sm_clock_mhz"), "gpu_power_w_mean": mean("power_w"),
            "gpu_power_limit_w": fmean(limits) if limits else None,
            "gpu_mem_used_gib_max": max(mem) / 1024 if mem else None}


