"""The Ray executor: each job a Ray task asking for its GPUs, CPUs and memory, on a Ray instance started
for the run or on an existing cluster (``executor.address``).

The task runs in a Ray worker and starts the stage's own interpreter there (``JobCall.run``: the
quantize and serve environments stay separate), with ``CUDA_VISIBLE_DEVICES`` set to the GPUs Ray gave
it. A job on more than one GPU (tensor x pipeline parallel) runs in a ``STRICT_PACK`` placement group
of one bundle, so its GPUs are on one node. A whole-GPU request keeps fractional jobs off that GPU, so
the benchmark measures alone. The run folder must be on a path every node sees (its configs, results
and logs are written there by the stage processes).

A lost worker (``WorkerCrashedError``, ``NodeDiedError``: the process running the job died, or its node)
is a failed attempt: recorded, the job's partial outputs removed (``JobCall.clean``), and the job sent
again, up to ``executor.max_retries`` times; Ray's own task retries are off so that every attempt is
the suite's to record. Ray is an optional extra (``pip install 'suite[ray]'``).
"""

from __future__ import annotations

import os
import socket
import sys
import time

from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.orchestrate.executors.base import Executor, Finished, JobCall
from suite.recipe.executor import ExecutorSpec
from suite.runtime.procs import error_line
from suite.runtime.envs import REPO_ROOT
from suite.orchestrate.stageproc import StageOutcome
from suite.orchestrate.executors.local import visible_gpus


def _run_in_worker(call: JobCall):
    """The Ray task: the job's stage process on the GPUs Ray assigned. Returns (outcome, started, ended, where)."""
    import ray

    started = time.time()
    ids = [str(int(i)) if str(i).isdigit() else str(i) for i in ray.get_gpu_ids()]
    env = {"CUDA_VISIBLE_DEVICES": ",".join(ids)} if ids else {}
    outcome = call.run(env)
    where = f"{socket.gethostname()}" + (f" GPU {','.join(ids)}" if ids else " CPU")
    return outcome, started, time.time(), where


START_ATTEMPTS = 3


def start_local_instance(ray, **init_kwargs) -> int:
    """``ray.init(**init_kwargs)`` for a Ray instance of this process's own, tried up to START_ATTEMPTS times;
    returns the attempts it took. Ray's raylet exits at start when its dashboard agent (a Python process) has
    not written its port files within a fixed time (``NodeManager::WaitForDashboardAgentPorts``, ray issue
    #65983), which a busy 2-core machine can exceed: CI saw it twice on Ray 2.60, and what the failed start
    had launched (GCS, dashboard, monitors) ran on. So each failed start is shut down before the next, and the
    last failure is a SuiteError with the raylet's own line."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            ray.init(**init_kwargs)
            return attempt
        except Exception as e:  # noqa: BLE001 -- Ray raises plain Exception/RuntimeError for a node that did not start
            cause = _raylet_error(init_kwargs.get("_temp_dir")) or str(e).splitlines()[0]
            try:
                ray.shutdown()  # stop what this start launched
            except Exception:  # noqa: BLE001
                pass
            if attempt == START_ATTEMPTS:
                raise SuiteError(Problem("executor.kind", "ray", f"the local Ray instance did not start in "
                                         f"{START_ATTEMPTS} attempts: {cause}",
                                         "start it yourself (`ray start --head`) and set executor.address, or "
                                         "use executor.kind: local")) from None
            print(f"ray: the local Ray instance did not start ({cause}); starting it again "
                  f"({attempt + 1}/{START_ATTEMPTS})", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def _ray_temp_dir(temp_dir: str | None = None) -> str:
    """Where Ray keeps its sessions: ``_temp_dir`` when ray.init was given one, else Ray's own default
    (``RAY_TMPDIR``, ``TMPDIR`` on Linux, ``/tmp``; then ``ray``), asked of Ray where it says it."""
    if temp_dir:
        return temp_dir
    try:
        from ray._common.utils import get_default_ray_temp_dir  # Ray 2.60's place for it
    except ImportError:
        return "/tmp/ray"
    return get_default_ray_temp_dir()


def _raylet_error(temp_dir: str | None = None) -> str | None:
    """The raylet's fatal line from the newest session's log (``<ray temp dir>/session_latest/logs/raylet.err``)."""
    from pathlib import Path

    logs = Path(_ray_temp_dir(temp_dir)) / "session_latest" / "logs"
    for log in (logs / "raylet.err", logs / "raylet.out"):
        try:
            text = safeio.read_text(log, "log", errors="replace")
        except OSError:
            continue
        fatal = [ln for ln in text.splitlines() if "(raylet)" in ln and (" C " in ln or "Check failed" in ln)]
        if fatal:
            return fatal[-1].split("(raylet)", 1)[1].strip()[:300]
        if found := error_line(text):
            return found
    return None


class RayExecutor(Executor):
    kind = "ray"

    def __init__(self, spec: ExecutorSpec):
        self.spec = spec
        self.inflight: dict = {}  # ObjectRef -> (job, call, submitted, attempts, lost, placement group)
        self.total_gpus = 0
        self.nodes: list[dict] = []  # each live node's resources at the start (ray.nodes())
        self.started_here = False
        self.where = ""

    def start(self) -> None:
        try:
            import ray
        except ImportError:
            raise SuiteError(Problem("executor.kind", "ray", "Ray is not installed in the environment that runs suite",
                                     "pip install 'suite[ray]' (or ray>=2.40), or use executor.kind: local")) from None

        t0 = time.time()
        runtime_env = {"env_vars": {"PYTHONPATH": str(REPO_ROOT)}}  # suite importable in every worker
        if ray.is_initialized():  # this process is a Ray driver already (a notebook, a test): use its cluster
            self.where = "Ray (this process's existing connection)"
        elif self.spec.address:
            try:
                ray.init(address=self.spec.address, runtime_env=runtime_env, log_to_driver=False,
                         logging_level="ERROR")
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise SuiteError(Problem("executor.address", self.spec.address,
                                         f"cannot connect to the Ray cluster: {str(e).splitlines()[0]}",
                                         "start it (`ray start --head`) or fix the address")) from None
            self.where = f"Ray cluster {self.spec.address}"
        else:
            gpus = [str(g) for g in self.spec.gpus] if self.spec.gpus is not None else visible_gpus()
            saved = os.environ.get("CUDA_VISIBLE_DEVICES")
            if gpus:  # Ray hands out the ids it finds in CUDA_VISIBLE_DEVICES when it starts
                os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            try:
                start_local_instance(
                    ray, num_cpus=os.cpu_count() or 1, num_gpus=len(gpus), include_dashboard=False,
                    runtime_env=runtime_env, log_to_driver=False, logging_level="ERROR")
            finally:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
            self.started_here = True
            self.where = f"Ray instance for the run ({os.cpu_count()} CPUs, {len(gpus)} GPUs)"
        self._remote = ray.remote(_run_in_worker)
        res = ray.cluster_resources()
        self.total_gpus = int(res.get("GPU", 0))
        # each live node's resources: a job is placed on one node (STRICT_PACK for several GPUs), so a job no node can
        # hold would wait in Ray's queue forever; never_fits refuses it instead
        self.nodes = [dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")]
        self.startup_s = time.time() - t0

    def describe(self) -> str:
        return self.where or "ray"

    def never_fits(self, job) -> str | None:
        """Why no node of the cluster, as it stood at the start, can ever hold the job (None when one can): Ray would
        queue it forever. A cluster without GPUs runs every job on CPU. Nodes an autoscaler would add later are not
        counted: start them before the run."""
        r = job.resources
        if 0 < self.total_gpus < r.gpus:
            return f"{job.id} asks for {r.gpus} GPUs and the Ray cluster has {self.total_gpus}"
        need = {"CPU": float(r.cpus)}
        if self.total_gpus and r.gpus:
            need["GPU"] = float(r.gpus) if r.gpus > 1 else r.gpu_total
        if r.memory_gb:
            need["memory"] = r.memory_gb * 2 ** 30
        nodes = self.nodes
        if not nodes or any(all(n.get(k, 0.0) >= v for k, v in need.items()) for n in nodes):
            return None

        def said(res: dict) -> str:
            return ", ".join(f"{res.get(k, 0) / 2 ** 30:.0f} GiB memory" if k == "memory" else f"{res.get(k, 0):g} {k}"
                             for k in need)
        short = [k for k in need if all(n.get(k, 0.0) < need[k] for n in nodes)] or list(need)
        knobs = {"CPU": "executor.cpus_per_job", "memory": "executor.memory_gb",
                 "GPU": "the tensor x pipeline parallel size"}
        return (f"{job.id} asks for {said(need)} on one node, and no node of the Ray cluster has that much "
                f"(nodes: {'; '.join(said(n) for n in nodes)}); lower {' / '.join(knobs[k] for k in short)}, or add a "
                "node that holds it before the run")

    def submit(self, job, call: JobCall, attempts: int = 1, lost: list[str] | None = None) -> bool:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        r = job.resources
        gpus = r.gpu_total if self.total_gpus else 0  # no GPUs in the cluster: the job runs on CPU
        opts = {"num_cpus": r.cpus, "num_gpus": gpus, "max_retries": 0, "name": job.id}
        if r.memory_gb:
            opts["memory"] = int(r.memory_gb * 2 ** 30)
        pg = None
        if r.gpus > 1 and self.total_gpus:
            bundle = {"GPU": float(r.gpus), "CPU": float(r.cpus)}
            if r.memory_gb:  # a task in a placement group may use only what its bundle reserved
                bundle["memory"] = float(int(r.memory_gb * 2 ** 30))
            pg = placement_group([bundle], strategy="STRICT_PACK", name=f"suite {job.id}")
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
        ref = self._remote.options(**opts).remote(call)
        self.inflight[ref] = (job, call, time.time(), attempts, lost or [], pg)
        return True  # Ray queues it until its resources are free

    def running(self) -> list[tuple]:
        return [(job, f"Ray ({job.resources.describe()})") for job, *_ in self.inflight.values()]

    def wait(self) -> list[Finished]:
        import ray
        from ray.exceptions import NodeDiedError, WorkerCrashedError

        while True:
            ready, _ = ray.wait(list(self.inflight), num_returns=1)
            out: list[Finished] = []
            for ref in ready:
                job, call, submitted, attempts, lost, pg = self.inflight.pop(ref)
                if pg is not None:
                    from ray.util.placement_group import remove_placement_group

                    remove_placement_group(pg)
                try:
                    outcome, started, ended, where = ray.get(ref)
                except (WorkerCrashedError, NodeDiedError, ray.exceptions.OutOfMemoryError) as e:
                    why = f"attempt {attempts}: the Ray worker was lost ({type(e).__name__}: {str(e).splitlines()[0]})"
                    call.clean()  # its partial outputs go before it runs again
                    if attempts <= self.spec.max_retries:
                        self.submit(job, call, attempts + 1, [*lost, why])
                        continue
                    now = time.time()
                    outcome = StageOutcome(None, f"{job.stage} failed: {why}; no retries left "
                                                 f"(executor.max_retries {self.spec.max_retries})", 0.0)
                    out.append(Finished(job, outcome, "Ray", submitted, now, now, attempts=attempts,
                                        lost=[*lost, why]))
                    continue
                except ray.exceptions.RayError as e:  # the task itself raised: a failed job, not a lost worker
                    now = time.time()
                    cause = getattr(e, "cause", None)  # the task's own exception, not Ray's 'ray::job() (pid=...)' header
                    why = f"{type(cause).__name__}: {cause}" if cause is not None else str(e).splitlines()[-1]
                    outcome = StageOutcome(None, f"{job.stage} failed in its Ray task: {why[:400]}", 0.0)
                    out.append(Finished(job, outcome, "Ray", submitted, now, now, attempts=attempts, lost=lost))
                    continue
                out.append(Finished(job, outcome, where, submitted, started, ended, attempts=attempts, lost=lost))
            if out:
                return out
            if not self.inflight:
                return []

    def close(self) -> None:
        if not self.where:  # start() did not get as far as Ray (not installed, no cluster): nothing to close
            return
        import ray

        for ref, (*_, pg) in list(self.inflight.items()):
            ray.cancel(ref, force=True)
        self.inflight.clear()
        if ray.is_initialized() and self.where != "Ray (this process's existing connection)":
            ray.shutdown()  # a cluster we joined keeps running; an instance we started stops with this
