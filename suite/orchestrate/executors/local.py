"""The local executor: as many jobs at once as this machine's GPUs hold, each pinned with
``CUDA_VISIBLE_DEVICES``; one job at a time on a machine without GPUs.

A job asking for a share of a GPU (``executor.gpu_fraction``) goes to the GPU where it fits most tightly
(best fit: whole GPUs stay free for the jobs that need one); a whole-GPU job takes GPUs nobody uses; an
exclusive job (the benchmark) starts only on an idle machine and nothing else starts until it ends (its
serving speed needs the host's CPUs, PCIe and memory too, not only its GPUs). Each job runs in a
thread that waits on its stage process (``procs.supervised``: the process tree dies with ``suite``).
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time

from suite.orchestrate.executors.base import Executor, Finished, JobCall
from suite.orchestrate.jobs import builds_checkpoint
from suite.recipe.executor import ExecutorSpec
from suite.orchestrate.stageproc import StageOutcome
from suite.runtime import procs

EPS = 1e-6
# Engines sharing a GPU start at once: each has a KV cache of fixed size (EngineConfig.gpu_share,
# suite.runtime.engine.gpushare), so vLLM's memory profiling does not count (or trip over) its neighbours.


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when set (its entries, as given), else every GPU
    NVML (or ``nvidia-smi -L``) counts, else none."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        entries = [e.strip() for e in cvd.split(",") if e.strip()]
        return [] if entries[:1] == ["-1"] else entries
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no driver: ask nvidia-smi, else there is no GPU
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
            return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]
        except (OSError, subprocess.SubprocessError):
            return []
    return []


def machine_gpus(spec: ExecutorSpec) -> list[str]:
    """The GPUs a local executor of ``spec`` runs jobs on: the recipe's ``executor.gpus``, else those visible here."""
    return [str(g) for g in spec.gpus] if spec.gpus is not None else visible_gpus()


class LocalExecutor(Executor):
    kind = "local"

    def __init__(self, spec: ExecutorSpec, gpus: list[str] | None = None):
        self.spec = spec
        self.gpus = gpus if gpus is not None else machine_gpus(spec)
        self.free = {g: 1.0 for g in self.gpus}  # the share of each GPU no job holds
        self.exclusive: set[str] = set()
        self.active: dict[str, tuple] = {}  # job id -> (job, placement, [(gpu, share)])
        self.done: queue.Queue[Finished] = queue.Queue()
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"local, {len(self.gpus)} GPU{'s' if len(self.gpus) != 1 else ''} ({', '.join(self.gpus)})" \
            if self.gpus else "local, no GPU: one job at a time"

    def never_fits(self, job) -> str | None:
        if self.gpus and job.resources.gpus > len(self.gpus):
            return (f"{job.id} asks for {job.resources.gpus} GPUs (tensor x pipeline parallel size) and this run has "
                    f"{len(self.gpus)} ({', '.join(self.gpus)})")
        return None

    def order(self, ready: list) -> list:
        """Without GPUs one job runs at a time, so the order of the ready jobs cannot change the run's total: the
        jobs that measure (a score, a throughput) go before those that only build a checkpoint, so that the first
        number comes as early as it can (the baseline's evaluation before the variant's quantize). With GPUs the
        DAG's order (``Executor.order``)."""
        if self.gpus:
            return ready
        return sorted(ready, key=lambda job: builds_checkpoint(job.stage))

    def _take(self, r) -> list[tuple[str, float]] | None:
        """The (GPU, share) a job with resources ``r`` gets now, [] for no GPU, None when it does not fit yet."""
        if not self.gpus:
            return [] if not self.active else None  # CPU: one job at a time
        if r.gpus == 0:
            return []
        if any(job.resources.exclusive for job, *_ in self.active.values()):
            return None  # a benchmark is measuring: nothing else starts on this machine (CPU, PCIe, memory)
        if r.exclusive:  # and it starts only on an idle machine
            return [(g, 1.0) for g in self.gpus[:r.gpus]] if not self.active else None
        if r.gpu_share >= 1.0 - EPS:
            idle = [g for g in self.gpus if self.free[g] >= 1.0 - EPS]
            return [(g, 1.0) for g in idle[:r.gpus]] if len(idle) >= r.gpus else None
        fits = [g for g in self.gpus if g not in self.exclusive and self.free[g] >= r.gpu_share - EPS]
        if not fits:
            return None
        best = min(fits, key=lambda g: (self.free[g], self.gpus.index(g)))  # the tightest fit
        return [(best, r.gpu_share)]

    def submit(self, job, call: JobCall) -> bool:
        with self._lock:
            taken = self._take(job.resources)
            if taken is None:
                return False
            for g, share in taken:
                self.free[g] -= share
                if job.resources.exclusive:
                    self.exclusive.add(g)
            placement = ("CPU" if not taken else
                         ", ".join(f"GPU {g}" + (f" ({s:g})" if s < 1 else "") for g, s in taken)
                         + (" exclusive" if job.resources.exclusive else ""))
            self.active[job.id] = (job, placement, taken)
        env = {"CUDA_VISIBLE_DEVICES": ",".join(g for g, _ in taken)} if self.gpus else {}
        threading.Thread(target=self._run, args=(job, call, env, placement, time.time()), daemon=True,
                         name=f"job {job.id}").start()
        return True

    def _run(self, job, call: JobCall, env: dict, placement: str, submitted: float) -> None:
        started = time.time()
        try:
            outcome = call.run(env)
        except Exception as e:  # the job's own code failed before or after its process: a failed job
            outcome = StageOutcome(None, f"{job.stage} failed in the runner: {type(e).__name__}: {e}", 0.0)
        self.done.put(Finished(job, outcome, placement, submitted, started, time.time()))

    def close(self) -> None:
        """Stop what still runs (an interrupted job loop: Ctrl-C, an error): each job's stage runs under a
        ``procs.supervised`` supervisor, a child of this process; stopping it takes the stage's tree down."""
        if not self.active:
            return
        import psutil

        for child in psutil.Process().children():
            try:
                if "suite.runtime.supervisor" in " ".join(child.cmdline()):
                    procs.stop(child.pid, grace_s=10)
            except psutil.Error:
                continue

    def running(self) -> list[tuple]:
        with self._lock:
            return [(job, placement) for job, placement, *_ in self.active.values()]

    def wait(self) -> list[Finished]:
        """The jobs that ended (at least one: it blocks until then)."""
        finished = [self.done.get()]
        while True:
            try:
                finished.append(self.done.get_nowait())
            except queue.Empty:
                break
        with self._lock:
            for f in finished:
                f.received = time.time()
                job, _, taken = self.active.pop(f.job.id)
                for g, share in taken:
                    self.free[g] = min(1.0, self.free[g] + share)
                    self.exclusive.discard(g)
        return finished
