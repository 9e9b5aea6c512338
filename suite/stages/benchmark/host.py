"""The host a benchmark ran on: which physical core each logical CPU belongs to (sysfs), and the CPU as one line.

A point bound by the engine core's host loop moves with the host's CPU (two machines with the same GPU can serve the
same points tens of percent apart), so the result names the host, and the monitor
(suite.stages.benchmark.bottleneck) places each process on its physical core.
"""

from __future__ import annotations

import glob
import os

from suite.runtime import safeio


def cpu_cores(root: str = "/sys/devices/system/cpu") -> dict[int, str]:
    """Logical CPU -> its physical core, named "package:siblings" from sysfs (``topology/thread_siblings_list``: the
    logical CPUs of that core, e.g. "0:3,11"), so that two processes on SMT siblings of one core can be told apart from
    two on separate cores (``core_id`` alone need not be unique within a package); {} where sysfs does not say."""
    out: dict[int, str] = {}
    for d in glob.glob(os.path.join(root, "cpu[0-9]*")):
        try:
            pkg = safeio.read_text(os.path.join(d, "topology", "physical_package_id"), "system").strip()
            siblings = safeio.read_text(os.path.join(d, "topology", "thread_siblings_list"), "system").strip()
        except OSError:
            continue
        out[int(os.path.basename(d)[3:])] = f"{pkg}:{siblings}"
    return out


def host_cpu(cpuinfo: str | None = None, root: str = "/sys/devices/system/cpu", usable: int | None = None) -> str | None:
    """The host's CPU as one line, e.g. "AMD EPYC 9654 96-Core Processor, 16 logical CPUs on 8 cores": the model
    (``/proc/cpuinfo``'s first "model name"; on Arm, where there is none, its "CPU implementer" and "CPU part"), how
    many logical CPUs and physical cores the machine shows (sysfs, as ``cpu_cores``) and, where fewer, how many this
    process may run on (``sched_getaffinity``: a container's or a pinned run's share). A point bound by the engine
    core's host loop moves with it: two runs are comparable only on the same kind of host. None where nothing can be
    read; never raises (it is recorded after a benchmark's measurements, which an error here must not cost)."""
    try:
        if cpuinfo is None:
            try:
                cpuinfo = safeio.read_text("/proc/cpuinfo", "system")
            except OSError:
                cpuinfo = ""
        fields: dict[str, str] = {}
        for line in cpuinfo.splitlines():
            key, sep, value = line.partition(":")
            if sep and value.strip():
                fields.setdefault(key.strip().lower(), value.strip())
        model = fields.get("model name") or (
            f"Arm CPU implementer {fields['cpu implementer']} part {fields.get('cpu part', '?')}"
            if "cpu implementer" in fields else None)
        cores = cpu_cores(root)
        count = f"{len(cores)} logical CPUs on {len(set(cores.values()))} cores" if cores else None
        if usable is None and hasattr(os, "sched_getaffinity"):
            usable = len(os.sched_getaffinity(0))
        if count and usable and usable < len(cores):
            count += f", {usable} usable by this process"
        return ", ".join(x for x in (model, count) if x) or None
    except Exception:  # noqa: BLE001 -- a description, never worth a benchmark's result
        return None
