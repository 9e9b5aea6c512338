"""The job DAG and the local executor: dependencies and resources from a recipe, jobs sharing a GPU by
their fraction, the benchmark alone on its GPU, tensor-parallel jobs on several, one job at a time
without GPUs, and a whole run on a fake GPU list (stage processes stand in for the real stages)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from suite.orchestrate.executors.base import JobCall
from suite.orchestrate.executors.local import LocalExecutor, visible_gpus
from suite.orchestrate.jobs import StageOutcome
from suite.plan import dag
from suite.plan.dag import Job, Resources
from suite.recipe.executor import ExecutorSpec
from suite.records.evaluate import EvaluateResult
from suite.records.quantize import QuantizeResult


@dataclass
class Sleeper(JobCall):
    """A job that sleeps and notes when it ran and on which GPUs (CUDA_VISIBLE_DEVICES)."""

    seconds: float = 0.3
    log: list = field(default_factory=list)

    def run(self, extra_env):
        start = time.time()
        time.sleep(self.seconds)
        self.log.append((self.stage, extra_env.get("CUDA_VISIBLE_DEVICES"), start, time.time()))
        return StageOutcome(None, None, self.seconds)


def run_all(executor: LocalExecutor, jobs: list[Job], seconds: float = 0.3) -> list:
    log: list = []
    pending = list(jobs)
    while pending or executor.running():
        for j in list(pending):
            if executor.submit(j, Sleeper(j.id, None, None, Path("."), Path("."), {}, seconds=seconds, log=log)):
                pending.remove(j)
        if executor.running():
            executor.wait()
    return log


def timed_stages(tmp_path: Path, monkeypatch, seconds: float, before: str = "", meet: tuple[str, ...] = ()) -> Path:
    """Stand-in stage interpreters (test_runner_stage.fake_stage) that run ``before``, sleep ``seconds`` and
    log [stage, variant, CUDA_VISIBLE_DEVICES, start, end] as a JSON line to the returned file. ``meet``: two
    "stage:variant" jobs that, once ``tmp_path / "meet"`` exists, wait (up to 60 s) until both have started
    before their timed sleep, so that whether they overlap does not hang on how fast a process starts (CI saw
    two stages that the executor ran at once not overlap, when one took longer to start than the other slept)."""
    import textwrap

    from test_runner_stage import fake_stage

    from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV
    from suite.records.quantize import QuantizeResult

    calls = tmp_path / "calls.jsonl"
    quantized = QuantizeResult(checkpoint=str(tmp_path / "ckpt"), key="k", cache_hit=False, wall_s=1.0)
    script = fake_stage(tmp_path, "import json, time\nstage = sys.argv[-3]\n"
                        "variant = os.path.basename(os.path.dirname(out))\n" + textwrap.dedent(before) + textwrap.dedent(f"""
        me, meet = f"{{stage}}:{{variant}}", {list(meet)!r}
        if me in meet and os.path.exists({str(tmp_path / "meet")!r}):
            started = lambda job: os.path.join({str(tmp_path)!r}, "started-" + job.replace(":", "-"))
            open(started(me), "w").close()
            deadline = time.time() + 60
            while time.time() < deadline and not all(os.path.exists(started(job)) for job in meet):
                time.sleep(0.02)
        t0 = time.time(); time.sleep({seconds})
        with open({str(calls)!r}, "a") as f:
            f.write(json.dumps([stage, variant, os.environ.get("CUDA_VISIBLE_DEVICES"), t0, time.time()]) + "\\n")
        if stage == "quantize":  # with the planned content key, as the quantize stage writes it
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}),
                                       "key": json.load(open(sys.argv[-2]))["key"]}})
        write_result()
    """))
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    return calls


def overlap(a, b) -> bool:
    return a[2] < b[3] - 0.01 and b[2] < a[3] - 0.01


def test_shares_fill_a_gpu_and_the_benchmark_has_its_gpu_to_itself():
    share = Resources(gpus=1, gpu_share=0.5)
    jobs = [Job("evaluate", f"v{i}", resources=share) for i in range(4)]
    jobs += [Job("benchmark", "b0", resources=Resources(gpus=1, exclusive=True)),
             Job("evaluate", "tp2", resources=Resources(gpus=2))]
    log = run_all(LocalExecutor(ExecutorSpec(), gpus=["0", "1"]), jobs)
    by = {name: entry for name, *entry in [(e[0], *e[1:]) for e in log]}
    assert len(log) == 6
    evals = [e for e in log if e[0].startswith("evaluate:v")]
    assert {e[1] for e in evals} <= {"0", "1"}
    # four half-GPU jobs on two GPUs: all four at once
    assert sum(overlap(evals[0], e) for e in evals[1:]) >= 2
    for gpu in ("0", "1"):  # never more than two halves on one GPU at a time
        on = [e for e in evals if e[1] == gpu]
        assert not any(overlap(a, b) and overlap(b, c) and overlap(a, c)
                       for i, a in enumerate(on) for j, b in enumerate(on[i + 1:]) for c in on[i + j + 2:])
    bench = next(e for e in log if e[0] == "benchmark:b0")
    tp2 = next(e for e in log if e[0] == "evaluate:tp2")
    assert tp2[1] == "0,1"
    for other in log:  # the benchmark measured alone on the machine, not only on its GPU
        if other is not bench:
            assert not overlap(bench, other), f"{other[0]} ran while the benchmark measured"
    assert by["benchmark:b0"][0] in {"0", "1"}


def test_without_gpus_one_job_at_a_time_and_no_cuda_visible_devices():
    jobs = [Job("evaluate", f"v{i}", resources=Resources(gpus=1, gpu_share=0.25)) for i in range(3)]
    log = run_all(LocalExecutor(ExecutorSpec(), gpus=[]), jobs, seconds=0.15)
    assert [e[1] for e in log] == [None, None, None]
    assert not any(overlap(a, b) for i, a in enumerate(log) for b in log[i + 1:])


def test_without_gpus_ready_measurements_go_before_a_checkpoint_build_and_with_gpus_the_dag_order_stays():
    """One job at a time: the order cannot change the total, so the first number should come first; with GPUs the
    checkpoint's build goes first (what waits for it can then share the machine)."""
    ready = [Job("quantize", "fp8"), Job("evaluate", "bf16"), Job("benchmark", "bf16", resources=Resources(exclusive=True))]
    on_cpu = LocalExecutor(ExecutorSpec(), gpus=[]).order(ready)
    assert [j.id for j in on_cpu] == ["evaluate:bf16", "benchmark:bf16", "quantize:fp8"]
    assert LocalExecutor(ExecutorSpec(), gpus=["0"]).order(ready) == ready
    assert [j.id for j in LocalExecutor(ExecutorSpec(), gpus=[]).order(ready[:1])] == ["quantize:fp8"]  # alone: it runs


def test_a_job_asking_for_more_gpus_than_there_are_never_fits():
    ex = LocalExecutor(ExecutorSpec(), gpus=["0"])
    why = ex.never_fits(Job("evaluate", "big", resources=Resources(gpus=2)))
    assert "asks for 2 GPUs" in why and "this run has 1 (0)" in why


def test_visible_gpus_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == []


def test_dag_dependencies_resources_and_matching_memory_share(demo_recipe_copy):
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe

    quant = {"kv_cache": "fp8", "calibration": "chat-demo", "num_calibration_samples": 64, "max_seq_length": 512}
    path = demo_recipe_copy(
        variants=[{"name": "fp8-kv", "quantization": quant, "kv_cache_dtype": "fp8"},
                  {"name": "fp8-kv-twin", "quantization": quant, "kv_cache_dtype": "fp8"},  # same checkpoint
                  {"name": "tp2", "engine_args": {"tensor_parallel_size": 2}}],
        executor={"gpu_fraction": {"evaluate": 0.25}, "cpus_per_job": 2, "memory_gb": 8})
    plan = make_plan(load_recipe(path), Path("/tmp/x"))
    jobs = {j.id: j for j in plan.dag}
    dag.check(plan.dag)
    assert jobs["quantize:fp8-kv-twin"].deps == ("quantize:fp8-kv",)  # built once, then a cache hit
    assert jobs["evaluate:fp8-kv"].deps == ("quantize:fp8-kv",)
    assert jobs["benchmark:fp8-kv-twin"].deps == ("quantize:fp8-kv-twin",)
    assert jobs["evaluate:bf16"].deps == () and jobs["benchmark:bf16"].deps == ()
    assert jobs["publish:*"].deps == tuple(j for j in jobs if j != "publish:*")
    assert jobs["evaluate:bf16"].resources == Resources(gpus=1, gpu_share=0.25, cpus=2, memory_gb=8)
    assert jobs["evaluate:tp2"].resources.gpus == 2 and jobs["evaluate:tp2"].resources.gpu_share == 1.0
    assert jobs["benchmark:bf16"].resources.exclusive and jobs["benchmark:bf16"].resources.gpu_share == 1.0
    vps = {vp.variant.name: vp for vp in plan.variants}
    # a quarter of the GPU: a quarter of vLLM's 0.9 for the evaluation engine, the benchmark's untouched
    assert vps["bf16"].evaluate.engine.engine_args["gpu_memory_utilization"] == 0.225
    assert vps["bf16"].evaluate.engine.gpu_share == 0.25 and vps["bf16"].benchmark.engine.gpu_share is None
    assert "gpu_memory_utilization" not in vps["bf16"].benchmark.engine.engine_args
    assert "gpu_memory_utilization" not in vps["tp2"].evaluate.engine.engine_args


@pytest.mark.parametrize("bad, phrase", [
    ({"gpu_fraction": {"benchmark": 0.5}}, "the benchmark never shares a GPU"),
    ({"gpu_fraction": {"evaluate": 0.01}}, "a share of one GPU is in [0.05, 1]"),
    ({"address": "auto"}, "executor.address is for kind: ray"),
    ({"kind": "ray", "gpus": [0], "address": "auto"}, "executor.gpus with kind: ray is for the Ray instance"),
])
def test_executor_section_refuses_what_cannot_work(demo_recipe_copy, bad, phrase):
    from suite.runtime.errors import SuiteError
    from suite.recipe import load_recipe

    with pytest.raises(SuiteError) as e:
        load_recipe(demo_recipe_copy(executor=bad))
    assert phrase in str(e.value)


def test_a_run_on_two_fake_gpus_overlaps_variants_and_keeps_the_results(demo_recipe_copy, tmp_path, monkeypatch):
    """The demo's jobs on executor.gpus [0, 1] with half-GPU evaluations: bf16's evaluation runs while
    fp8-kv's checkpoint is built, each job sees its own CUDA_VISIBLE_DEVICES, and the summary equals the
    one-at-a-time run's."""
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    calls = timed_stages(tmp_path, monkeypatch, seconds=1.0, meet=("quantize:fp8-kv", "evaluate:bf16"))
    common = dict(throughput=None, gates__min_throughput_gain=None)
    sequential = execute(load_recipe(demo_recipe_copy(**common)), track=False)
    calls.unlink()
    shutil.rmtree(next(q for v in sequential.variants if (q := v.result(QuantizeResult))).checkpoint)  # else found: not built
    (tmp_path / "meet").touch()  # from here, the two jobs that must overlap wait for each other to start
    events = []
    shared = execute(load_recipe(demo_recipe_copy(**common, executor={"gpus": [0, 1],
                                                                      "gpu_fraction": {"evaluate": 0.5}})),
                     track=False, report=lambda *e: events.append(e))
    rows = [json.loads(line) for line in calls.read_text().splitlines()]
    ran = {(s, v): (gpu, t0, t1) for s, v, gpu, t0, t1 in rows}
    q, e = ran["quantize", "fp8-kv"], ran["evaluate", "bf16"]
    assert e[1] < q[2] and q[1] < e[2], "bf16's evaluation did not overlap fp8-kv's quantize"
    assert ran["evaluate", "fp8-kv"][1] >= q[2] - 0.05  # waited for its checkpoint
    assert {gpu for gpu, *_ in ran.values()} <= {"0", "1"}
    assert ("evaluate", "bf16", "start", "GPU 1 (0.5)") in events or ("evaluate", "bf16", "start", "GPU 0 (0.5)") in events
    assert [v.metrics for v in shared.variants] == [v.metrics for v in sequential.variants]
    timeline = json.loads((Path(shared.run_dir) / "jobs.json").read_text())
    assert timeline["executor"] == "local, 2 GPUs (0, 1)"
    assert {j["id"] for j in timeline["jobs"]} == {"quantize:fp8-kv", "evaluate:bf16", "evaluate:fp8-kv"}
    assert timeline["overhead_share"] < 0.05  # ~0.1% here; the README's figure comes from the GPU run
    assert shared.artifacts["timeline_png"].endswith("timeline.png") and Path(shared.artifacts["timeline_png"]).stat().st_size
    # each stage's elapsed time is the union of its jobs' intervals in jobs.json (test below for the union itself)
    from suite.analysis.derive import elapsed_by_stage

    assert shared.stage_elapsed_s == elapsed_by_stage(timeline["jobs"]) and set(shared.stage_elapsed_s) == {"quantize", "evaluate"}
    # one job after another: the union is the sum of the intervals, and the stages' own wall times fit inside them
    # (an interval also holds the stage process's start, ~0.4 s a job on 2 busy cores: not a tolerance to compare by)
    evals = [j for j in json.loads((Path(sequential.run_dir) / "jobs.json").read_text())["jobs"] if j["stage"] == "evaluate"]
    assert len(evals) == 2
    assert sequential.stage_elapsed_s["evaluate"] == pytest.approx(sum(j["ended_s"] - j["started_s"] for j in evals), abs=0.01)
    assert sequential.stage_wall_s["evaluate"] <= sequential.stage_elapsed_s["evaluate"] + 0.01


def test_elapsed_by_stage_is_the_union_of_its_jobs_intervals():
    from suite.analysis.derive import elapsed_by_stage

    rows = [{"stage": "evaluate", "started_s": 0.0, "ended_s": 300.0}, {"stage": "evaluate", "started_s": 95.0, "ended_s": 330.0},
            {"stage": "evaluate", "started_s": 400.0, "ended_s": 410.0}, {"stage": "benchmark", "started_s": 330.0, "ended_s": 576.0}]
    assert elapsed_by_stage(rows) == {"evaluate": 340.0, "benchmark": 246.0}
    assert elapsed_by_stage([]) == {}



def test_a_shared_engine_gets_a_fixed_kv_cache_that_fits_its_share(tmp_path):
    """On the H200, two of four engines sharing the GPU failed in vLLM's memory profiling when a neighbour
    ended meanwhile; an engine with gpu_share gets kv_cache_memory_bytes: its budget less weights and margin."""
    from suite.runtime.engine import gpushare

    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    assert gpushare.weights_bytes(str(tmp_path)) == 1000
    gib = gpushare.GIB
    total = 140 * gib  # an H200
    kv = gpushare.kv_cache_bytes(total, 0.2125, int(1.2 * gib))  # Qwen2.5-0.5B at a quarter of 0.85
    assert kv == int(total * 0.2125) - int(1.2 * gib) - 2 * gib - int(0.1 * int(total * 0.2125))
    assert 22 * gib < kv < 25 * gib
    assert gpushare.weights_bytes(str(tmp_path / "nope")) == 0  # a hub id or a missing folder: refused, not 0 weights
    with pytest.raises(RuntimeError, match="give this stage a larger executor.gpu_fraction"):
        gpushare.kv_cache_bytes(total, 0.05, 16 * gib)  # an 8B model does not fit a 5% share


def test_a_job_that_can_never_fit_is_refused_before_anything_runs(demo_recipe_copy, tmp_path, monkeypatch):
    """fp8-kv served at tensor parallel 2 on a one-GPU run: its evaluation can never start, so it is refused at the
    start with the cause, and its quantize (whose checkpoint only that evaluation would use) does not run at all;
    bf16 runs. Before, the quantize ran first and the evaluation was refused only once its checkpoint existed."""
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    calls = timed_stages(tmp_path, monkeypatch, seconds=0.1)
    events = []
    summary = execute(load_recipe(demo_recipe_copy(
        throughput=None, gates__min_throughput_gain=None, executor={"gpus": [0]},
        variants__0__engine_args={"enforce_eager": True, "tensor_parallel_size": 2})),
        track=False, report=lambda *e: events.append(e))
    ran = [(s, v) for s, v, *_ in (json.loads(line) for line in calls.read_text().splitlines())]
    assert ran == [("evaluate", "bf16")]
    skipped = [e[:2] for e in events if e[2] == "skipped"]
    assert skipped == [("evaluate", "fp8-kv"), ("quantize", "fp8-kv")]
    first_start = next(i for i, e in enumerate(events) if e[2] == "start")
    assert all(events.index((s, v, "skipped")) < first_start for s, v in skipped)  # refused before bf16 started
    fp8 = next(v for v in summary.variants if v.name == "fp8-kv")
    assert fp8.errors[0].startswith("evaluate not run: evaluate:fp8-kv asks for 2 GPUs")
    assert fp8.result(QuantizeResult) is None and fp8.result(EvaluateResult) is None


def _refused_beside_a_sharing_variant(demo_recipe_copy) -> Path:
    """The demo on one fake GPU with fp8-kv at tensor parallel 2 (its evaluation can never run) and fp8-kv-tp1: the same
    quantization at TP 1, whose quantize job waits for fp8-kv's (one checkpoint, built once)."""
    import yaml

    path = demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, executor={"gpus": [0]},
                            variants__0__engine_args={"enforce_eager": True, "tensor_parallel_size": 2})
    d = yaml.safe_load(path.read_text())
    d["variants"].append({**d["variants"][0], "name": "fp8-kv-tp1", "engine_args": {"enforce_eager": True}})
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def test_a_refused_variant_still_builds_the_checkpoint_another_variant_uses(demo_recipe_copy, tmp_path, monkeypatch):
    """fp8-kv's evaluation can never fit, but its quantize also feeds fp8-kv-tp1's: it runs, and fp8-kv-tp1 is scored;
    fp8-kv's error names the refusal."""
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    calls = timed_stages(tmp_path, monkeypatch, seconds=0.1)
    summary = execute(load_recipe(_refused_beside_a_sharing_variant(demo_recipe_copy)), track=False)
    ran = [(s, v) for s, v, *_ in (json.loads(line) for line in calls.read_text().splitlines())]
    assert ("quantize", "fp8-kv") in ran and ("evaluate", "fp8-kv-tp1") in ran and ("evaluate", "fp8-kv") not in ran
    by = {v.name: v for v in summary.variants}
    assert by["fp8-kv-tp1"].errors == [] and by["fp8-kv-tp1"].result(EvaluateResult) is not None
    assert by["fp8-kv"].errors[0].startswith("evaluate not run: evaluate:fp8-kv asks for 2 GPUs")


def test_a_resume_on_fewer_gpus_keeps_the_results_it_has_and_refuses_only_what_cannot_fit(
        demo_recipe_copy, tmp_path, monkeypatch):
    """Run 1 on two GPUs: fp8-kv (TP 2) is quantized and scored, its benchmark fails. The resume on one GPU refuses only
    that benchmark (it can never fit there): the kept quantize and evaluation are resumed into the summary, not
    dropped with it."""
    from suite.orchestrate.executors import local
    from suite.recipe.load import load_run_recipe
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    timed_stages(tmp_path, monkeypatch, seconds=0.05, before="if stage == 'benchmark':\n    sys.exit(1)\n")
    (tmp_path / "ckpt").mkdir()  # the stand-in quantize's checkpoint, still there at the resume (same machine)
    (tmp_path / "ckpt" / ".complete").write_text("k")
    monkeypatch.setattr(local, "visible_gpus", lambda: ["0", "1"])
    first = execute(load_recipe(demo_recipe_copy(
        variants__0__engine_args={"enforce_eager": True, "tensor_parallel_size": 2})), track=False)
    assert next(v for v in first.variants if v.name == "fp8-kv").result(EvaluateResult) is not None
    monkeypatch.setattr(local, "visible_gpus", lambda: ["0"])
    events = []
    run_dir = Path(first.run_dir)
    resumed = execute(load_run_recipe(run_dir), track=False, resume=run_dir, report=lambda *e: events.append(e))
    assert ("quantize", "fp8-kv", "resumed") in events and ("evaluate", "fp8-kv", "resumed") in events
    assert ("benchmark", "fp8-kv", "skipped") in events
    fp8 = next(v for v in resumed.variants if v.name == "fp8-kv")
    assert fp8.result(QuantizeResult) is not None and fp8.result(EvaluateResult) is not None and fp8.metrics
    assert fp8.errors[0].startswith("benchmark not run: benchmark:fp8-kv asks for 2 GPUs")
