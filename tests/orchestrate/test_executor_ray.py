"""The Ray executor on CPU: a local Ray instance declaring two GPUs runs the demo's jobs (light stand-in
stage processes, as in test_runner_stage), overlapping two variants and giving the local executor's
results; a Ray worker killed in the middle of a job is a failed attempt, recorded, cleaned and retried."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from test_executor_local import timed_stages  # noqa: E402  the stand-in stage interpreters

from suite.orchestrate.runner import execute  # noqa: E402
from suite.recipe import load_recipe  # noqa: E402
from suite.records.evaluate import EvaluateResult

COMMON = dict(throughput=None, gates__min_throughput_gain=None)


@pytest.fixture
def stages(tmp_path, monkeypatch):
    """Stand-in stages that sleep, log (stage, variant, CUDA_VISIBLE_DEVICES, start, end) and, while
    ``kill-me`` exists, write the pid of the Ray worker running them to ``worker.pid`` first."""
    kill = str(tmp_path / "kill-me")
    # the two jobs that must overlap meet before their timed sleep (at 1.5 s without it, CI saw them not overlap
    # when a Ray worker took longer to start); the test touches tmp_path / "meet" before the Ray run
    return timed_stages(tmp_path, monkeypatch, seconds=1.5, meet=("quantize:fp8-kv", "evaluate:bf16"), before=f"""
        import psutil
        if stage == "evaluate" and variant == "fp8-kv" and os.path.exists({kill!r}):
            os.remove({kill!r})
            worker = psutil.Process().parent().parent()  # stage <- procs supervisor <- Ray worker
            open({str(tmp_path / 'partial')!r}, "w").write("x")
            os.makedirs(os.path.join(os.path.dirname(out), "evaluate"), exist_ok=True)
            open(os.path.join(os.path.dirname(out), "evaluate", "half.json"), "w").write("{{")
            open({str(tmp_path / 'worker.pid')!r}, "w").write(str(worker.pid))
            time.sleep(120)
    """)


def test_ray_overlaps_two_variants_and_matches_the_local_executor(demo_recipe_copy, stages):
    """... and a tensor-parallel-2 variant runs in a STRICT_PACK placement group on both declared GPUs."""
    import yaml

    from conftest import DEMO_RECIPE

    variants = yaml.safe_load(DEMO_RECIPE.read_text())["variants"] + [
        {"name": "tp2", "engine_args": {"tensor_parallel_size": 2}}]
    local = execute(load_recipe(demo_recipe_copy(**COMMON, variants=variants)), track=False)
    stages.unlink()
    (stages.parent / "meet").touch()
    shutil.rmtree(Path(local.run_dir).parent / "checkpoints")  # a checkpoint in its folder is a hit: built again here
    ray_run = execute(load_recipe(demo_recipe_copy(**COMMON, variants=variants,
                                                   executor={"kind": "ray", "gpus": [0, 1]})), track=False,
                      force=True)  # not the evaluation cache's copies of the local run's results
    rows = [json.loads(line) for line in stages.read_text().splitlines()]
    ran = {(s, v): (gpu, t0, t1) for s, v, gpu, t0, t1 in rows}
    q, e = ran["quantize", "fp8-kv"], ran["evaluate", "bf16"]
    assert e[1] < q[2] and q[1] < e[2], "bf16's evaluation did not overlap fp8-kv's quantize on Ray"
    assert ran["evaluate", "fp8-kv"][1] >= q[2] - 0.05
    assert ran.pop(("evaluate", "tp2"))[0] in ("0,1", "1,0")  # both GPUs, in one placement group
    assert {gpu for gpu, *_ in ran.values()} <= {"0", "1"}  # each other job on the GPU Ray gave it
    assert [v.metrics for v in ray_run.variants] == [v.metrics for v in local.variants]
    assert [v.errors for v in ray_run.variants] == [[], [], []]
    timeline = json.loads((Path(ray_run.run_dir) / "jobs.json").read_text())
    assert timeline["executor"].startswith("Ray instance for the run") and timeline["startup_s"] > 0
    assert all(j["attempts"] == 1 and j["placement"].endswith(("GPU 0", "GPU 1", "GPU 0,1", "GPU 1,0"))
               for j in timeline["jobs"])


@pytest.fixture(scope="module")
def ray_driver():
    """One Ray instance (2 CPUs, 2 declared GPUs) for the tests below: the executor uses a connection its
    process already has (a notebook's, say) and leaves it running."""
    import ray

    from suite.orchestrate.executors.ray import start_local_instance

    start_local_instance(ray, num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.mark.parametrize("retries", [1, 0])
def test_a_killed_ray_worker_is_a_failed_attempt_recorded_and_retried(demo_recipe_copy, stages, tmp_path, retries,
                                                                       ray_driver):
    (tmp_path / "kill-me").touch()

    def killer():
        pid_file = tmp_path / "worker.pid"
        for _ in range(600):
            if pid_file.is_file() and pid_file.read_text():
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
                return
            time.sleep(0.1)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    summary = execute(load_recipe(demo_recipe_copy(**COMMON, executor={"kind": "ray", "max_retries": retries})),
                      track=False)
    thread.join(5)
    timeline = {j["id"]: j for j in json.loads((Path(summary.run_dir) / "jobs.json").read_text())["jobs"]}
    job = timeline["evaluate:fp8-kv"]
    assert len(job["lost"]) == 1 and "the Ray worker was lost" in job["lost"][0]
    vdir = Path(summary.run_dir) / "variants" / "fp8-kv"
    assert not (vdir / "evaluate" / "half.json").exists()  # its partial outputs were removed
    if retries:
        assert job["attempts"] == 2 and job["state"] == "ok"
        assert summary.variants[1].errors == [] and summary.variants[1].result(EvaluateResult) is not None
    else:
        assert job["attempts"] == 1 and job["state"] == "failed"
        assert "no retries left (executor.max_retries 0)" in summary.variants[1].errors[0]
        assert summary.variants[0].errors == []  # the other variant is unaffected


def test_a_local_ray_start_that_fails_is_shut_down_and_tried_again(tmp_path, capsys, monkeypatch):
    """Ray 2.60's raylet exits at start when its dashboard agent is slow (ray #65983; CI saw it twice): each
    failed start is shut down (what it launched would run on) and tried again; the last failure names the cause."""
    from suite.runtime.errors import SuiteError
    from suite.orchestrate.executors.ray import START_ATTEMPTS, start_local_instance

    class FlakyRay:
        def __init__(self, failures):
            self.failures, self.calls = failures, []

        def init(self, **kwargs):
            self.calls.append("init")
            if self.failures:
                self.failures -= 1
                raise Exception("The current node timed out during startup.")

        def shutdown(self):
            self.calls.append("shutdown")

    flaky = FlakyRay(failures=2)
    assert start_local_instance(flaky, num_cpus=2) == 3
    assert flaky.calls == ["init", "shutdown", "init", "shutdown", "init"]
    assert capsys.readouterr().err.count("starting it again") == 2

    never = FlakyRay(failures=START_ATTEMPTS)
    with pytest.raises(SuiteError, match=f"did not start in {START_ATTEMPTS} attempts"):
        start_local_instance(never, num_cpus=2)
    assert never.calls.count("shutdown") == START_ATTEMPTS

    # the cause is the raylet's own line, from the session log where this Ray keeps it (_temp_dir, RAY_TMPDIR)
    fatal = ("[2026-12-02 10:00:00,000 C 123 123] (raylet) node_manager.cc:1: Check failed: "
             "WaitForDashboardAgentPorts timed out")
    for temp_dir, env in ((tmp_path / "given", None), (tmp_path / "env", tmp_path / "env")):
        logs = temp_dir / "session_latest" / "logs"
        logs.mkdir(parents=True)
        (logs / "raylet.err").write_text("starting\n" + fatal + "\n")
        kwargs = {"num_cpus": 2}
        if env is None:
            kwargs["_temp_dir"] = str(temp_dir)
        else:
            monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # Ray's own default: $RAY_TMPDIR/ray
            (tmp_path / "ray").symlink_to(temp_dir)
        with pytest.raises(SuiteError, match="Check failed: WaitForDashboardAgentPorts timed out"):
            start_local_instance(FlakyRay(failures=START_ATTEMPTS), **kwargs)


def test_a_job_no_node_can_hold_is_refused_not_queued_forever():
    """Ray places a job on one node (STRICT_PACK for several GPUs) and queues what no node can hold: without a check,
    such a job waits forever. The cluster's live nodes at the start decide; two nodes of one GPU hold two one-GPU jobs
    but never one tensor-parallel-2 job."""
    from suite.orchestrate.executors.ray import RayExecutor
    from suite.plan.dag import Job, Resources
    from suite.recipe.executor import ExecutorSpec

    ex = RayExecutor(ExecutorSpec(kind="ray"))
    ex.total_gpus, ex.nodes = 2, [{"CPU": 8.0, "GPU": 1.0, "memory": 64 * 2 ** 30}] * 2
    assert ex.never_fits(Job("evaluate", "bf16", resources=Resources(gpus=1, cpus=4))) is None
    assert ex.never_fits(Job("evaluate", "bf16", resources=Resources(gpus=1, gpu_share=0.25, cpus=2))) is None
    why = ex.never_fits(Job("benchmark", "tp2", resources=Resources(gpus=2, cpus=4)))
    assert why and "benchmark:tp2 asks for 4 CPU, 2 GPU on one node" in why and "1 GPU" in why, why
    assert "lower the tensor x pipeline parallel size," in why, why
    why = ex.never_fits(Job("quantize", "fp8", resources=Resources(gpus=1, cpus=16)))
    assert why and "16 CPU" in why and "cpus_per_job" in why, why
    assert "lower executor.memory_gb," in ex.never_fits(Job("quantize", "fp8", resources=Resources(gpus=1, memory_gb=100.0)))
    assert ex.never_fits(Job("benchmark", "tp4", resources=Resources(gpus=4))).endswith("the Ray cluster has 2")
    # a cluster without GPUs runs every job on CPU: only its CPUs count
    ex.total_gpus, ex.nodes = 0, [{"CPU": 2.0}]
    assert ex.never_fits(Job("evaluate", "bf16", resources=Resources(gpus=1, cpus=2))) is None
    assert "3 CPU" in ex.never_fits(Job("evaluate", "bf16", resources=Resources(gpus=1, cpus=3)))
