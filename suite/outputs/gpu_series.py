"""A variant's NVML samples (the benchmark's ``monitor-*.jsonl``, ``suite.stages.benchmark.gpumon``) as MLflow
system-metric series: MLflow's own names (``system/gpu_<i>_utilization_percentage``, ``..._memory_usage_megabytes``,
``..._power_usage_watts``, as ``mlflow.system_metrics`` logs them), so the run's System Metrics tab charts the load
points, plus ``system/gpu_<i>_sm_clock_mhz``. Timestamps are the samples' own; steps count samples per variant."""

from __future__ import annotations

from pathlib import Path

from suite.runtime import safeio

SERIES = {"util_pct": "utilization_percentage", "mem_used_mib": "memory_usage_megabytes",
          "power_w": "power_usage_watts", "sm_clock_mhz": "sm_clock_mhz"}
SCALE = {"mem_used_mib": 2**20 / 1e6}  # MLflow's gpu monitor logs megabytes as bytes / 1e6, the samples hold MiB


def monitor_files(bench_dir: Path) -> list[Path]:
    return sorted(bench_dir.glob("monitor-*.jsonl"))


def gpu_series(files: list[Path]) -> list[tuple[str, float, int, int]]:
    """(key, value, timestamp in ms, step) for every GPU reading in ``files``, in time order."""
    rows: list[dict] = []
    for f in files:
        for s in safeio.iter_jsonl(f, "log"):
            if s.get("gpu"):
                rows.append(s)
    rows.sort(key=lambda s: s["t"])
    out = []
    for step, s in enumerate(rows):
        for g in s["gpu"]:
            for field, name in SERIES.items():
                if field in g:
                    value = float(g[field]) * SCALE.get(field, 1.0)
                    out.append((f"system/gpu_{g['index']}_{name}", value, int(s["t"] * 1000), step))
    return out
