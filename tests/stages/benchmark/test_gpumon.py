"""NVML sampling and the GPU split of the ``engine`` label, without a GPU: a stand-in for pynvml's API (the calls
GpuSampler makes, with nvidia-ml-py's units: mW, bytes, MHz) and samples in the monitor's own format."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from suite.outputs.gpu_series import gpu_series
from suite.stages.benchmark import bottleneck, gpumon, host, labels
from suite.records.benchmark import LoadPoint, ServerStats
from suite.stages.registry import BENCHMARK
from suite.records.summary import VariantSummary


class FakeNVML:
    """pynvml's functions this module calls, for N GPUs; ``unsupported`` readings raise NVMLError."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM = 1

    def __init__(self, n=4, util=(97, 40, 10, 0), fail_init=False, unsupported=()):
        self.n, self.util, self.fail_init, self.unsupported, self.shut = n, util, fail_init, set(unsupported), False

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return self.n

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < self.n:
            raise self.NVMLError("Invalid Argument")
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid.rsplit("-", 1)[1])

    def nvmlDeviceGetIndex(self, h):
        return h

    def _check(self, what):
        if what in self.unsupported:
            raise self.NVMLError("Not Supported")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        self._check("power_limit")
        return 700_000  # mW

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.util[h], memory=5)

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=(h + 1) * 2**30, total=141 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        self._check("power")
        return 350_500  # mW


def test_sampler_reads_the_gpus_cuda_visible_devices_names():
    nv = FakeNVML()
    s = gpumon.GpuSampler(nv, env={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert s.available and s.indices == [2, 0]
    (a, b) = s.sample()
    assert a == {"index": 2, "util_pct": 10.0, "sm_clock_mhz": 1980.0, "mem_used_mib": 3072.0, "power_w": 350.5,
                 "power_limit_w": 700.0}
    assert b["index"] == 0 and b["util_pct"] == 97.0
    assert gpumon.GpuSampler(nv, env={"CUDA_VISIBLE_DEVICES": "GPU-8c1a-3"}).indices == [3]  # a UUID
    assert gpumon.GpuSampler(nv, env={}).indices == [0, 1, 2, 3]  # unset: every GPU
    s.close()
    assert nv.shut and not s.available


def test_sampler_without_nvml_or_with_an_unknown_gpu_says_why():
    s = gpumon.GpuSampler(FakeNVML(fail_init=True), env={})
    assert not s.available and s.error == "NVML: Driver Not Loaded" and s.sample() == []
    assert "Invalid Argument" in gpumon.GpuSampler(FakeNVML(n=1), env={"CUDA_VISIBLE_DEVICES": "3"}).error
    assert "bogus" in gpumon.GpuSampler(FakeNVML(), env={"CUDA_VISIBLE_DEVICES": "bogus"}).error


def test_a_reading_the_gpu_does_not_support_is_left_out_not_zero():
    (r,) = gpumon.GpuSampler(FakeNVML(n=1, unsupported={"power", "power_limit"}), env={}).sample()
    assert "power_w" not in r and "power_limit_w" not in r and r["util_pct"] == 97.0


def samples(utils, waiting=8.0, running=256.0, engine_core=40.0, power=350.0):
    """Monitor samples as ServerMonitor.sample() writes them (monitor-*.jsonl), one GPU per entry of utils' rows; the
    batch moves (not pinned at a cap: that would be seq-cap)."""
    out = []
    for i, row in enumerate(utils):
        out.append({"t": 1000.0 + 0.5 * i, "running": running - 10 * i, "waiting": waiting, "kv_usage": 0.3,
                    "cpu": {"api_server": 60.0, "engine_core": engine_core, "client": 30.0},
                    "gpu": [{"index": g, "util_pct": u, "sm_clock_mhz": 1980.0, "mem_used_mib": 120_000.0,
                             "power_w": power, "power_limit_w": 700.0} for g, u in enumerate(row)]})
    return out


def point() -> LoadPoint:
    return LoadPoint(label="rate-inf", request_rate="inf", completed=500, output_tok_s=20_000.0, req_s=80.0)


def test_summary_means_over_gpus_and_the_least_busy_one():
    st = bottleneck.summarize(samples([[100, 60], [100, 80], [96, 70]]))
    assert st.gpu_samples == 3 and st.gpu_count == 2
    assert st.gpu_util_mean == pytest.approx((100 + 60 + 100 + 80 + 96 + 70) / 6)
    assert st.gpu_util_min == pytest.approx(70.0)  # GPU 1's mean: an idle tensor-parallel rank shows there
    assert st.gpu_mem_used_gib_max == pytest.approx(240_000 / 1024) and st.gpu_power_limit_w == 700.0


LOW_ROOF = {"tensor_frac": 0.04, "hbm_frac": 0.035}  # Qwen 0.5B serving on the H200 (issue 16)


@pytest.mark.parametrize("utils,engine_core,roof,power,label,says", [
    ([[99]] * 6, 45.0, LOW_ROOF, 250.0, "gpu", "latency-bound kernels"),
    ([[99]] * 6, 45.0, {"tensor_frac": 0.1, "hbm_frac": 0.72}, 600.0, "gpu", "memory-bandwidth roof"),
    ([[98]] * 6, 45.0, {"tensor_frac": 0.62, "hbm_frac": 0.3}, 650.0, "gpu", "tensor roof"),
    ([[99]] * 6, 45.0, None, 600.0, "gpu", "no roofline"),
    ([[55]] * 6, 99.0, LOW_ROOF, 200.0, "engine-cpu", "engine-core process was at 99%"),
    ([[99]] * 6, 45.0, LOW_ROOF, 600.0, "gpu", "work the roofline leaves out"),  # busy, drawing power, low roofline
    ([[55]] * 6, 30.0, LOW_ROOF, 200.0, "engine", "does not decide"),   # idle GPU, no busy engine core
    ([[82]] * 6, 85.0, LOW_ROOF, 300.0, "engine", "does not decide"),   # 70-90%, the engine core short of a full core
    ([[82]] * 6, 99.0, LOW_ROOF, 300.0, "engine-cpu", "6 of 6 samples were host-bound"),  # 70-90% beside a full core
])
def test_the_engine_label_split_by_gpu_evidence(utils, engine_core, roof, power, label, says):
    st = bottleneck.summarize(samples(utils, engine_core=engine_core, power=power))
    got, reason = labels.classify(point(), st, roofline=roof)
    assert got == label and says in reason, reason


def test_too_few_samples_or_pipeline_parallel_give_no_gpu_verdict():
    few = bottleneck.summarize(samples([[55]] * 2, engine_core=99.0))
    assert few.gpu_samples == 2 and labels.classify(point(), few, 2048, roofline=LOW_ROOF)[0] == "engine"
    st = bottleneck.summarize(samples([[55]] * 6, engine_core=99.0))
    label, reason = labels.classify(point(), st, roofline=LOW_ROOF, pipeline_parallel=2)
    assert label == "engine" and "pipeline parallel 2" in reason


def test_the_sampler_reads_only_the_engines_gpus():
    assert gpumon.GpuSampler(FakeNVML(), env={}, limit=2).indices == [0, 1]  # TP 2 on a 4-GPU box, nothing pinned
    assert gpumon.GpuSampler(FakeNVML(), env={"CUDA_VISIBLE_DEVICES": "3,1,0"}, limit=1).indices == [3]


def test_no_gpu_readings_keep_the_engine_label_and_other_labels_win_first():
    cpu_only = [{k: v for k, v in s.items() if k != "gpu"} for s in samples([[99]] * 4)]
    assert labels.classify(point(), bottleneck.summarize(cpu_only), roofline=LOW_ROOF)[0] == "engine"
    preempted = ServerStats(samples=4, preemptions=3, waiting_mean=5, gpu_samples=4, gpu_util_mean=99.0)
    assert labels.classify(point(), preempted, roofline=LOW_ROOF)[0] == "kv-cache"


def test_samples_become_mlflow_system_metric_series(tmp_path):
    f = tmp_path / "monitor-rate-inf-r0.jsonl"
    f.write_text("".join(json.dumps(s) + "\n" for s in samples([[99, 40], [98, 41]])))
    rows = gpu_series([f])
    assert ("system/gpu_1_utilization_percentage", 41.0, 1000500, 1) in rows
    assert ("system/gpu_0_power_usage_watts", 350.0, 1000000, 0) in rows
    assert ("system/gpu_0_memory_usage_megabytes", 120_000 * 1.048576, 1000000, 0) in rows  # MLflow's MB: bytes / 1e6
    assert len(rows) == 2 * 2 * 4  # samples x GPUs x (utilisation, memory, power, SM clock)


def recorded(name: str) -> tuple[list[dict], list[dict]]:
    """A monitor file recorded on the H200 (tests/stages/benchmark/data/h200-vllm-0.26-NAME.monitor.jsonl): its samples,
    and the same samples without their NVML readings (what the suite saw before it sampled the GPU)."""
    from conftest import ROOT

    path = ROOT / "tests/stages/benchmark/data" / f"h200-vllm-0.26-{name}.monitor.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return rows, [{k: v for k, v in s.items() if k != "gpu"} for s in rows]


# Recorded on the project's H200 (vLLM 0.26.0, 2 API servers, Qwen2.5-Coder-0.5B, 500 random 512/256 prompts at
# rate inf; studies/2026-12-01-four-variants-gpu-sharing/results/h200-4variants-20261201): the monitor's samples of each variant's point, with the point's
# roofline. Kernels ran ~30% of the time while requests queued and the engine core sat at a full core.
RECORDED = {"bf16": {"tensor_frac": 0.0534, "hbm_frac": 0.0395}, "bf16-fp8kv": {"tensor_frac": 0.0688, "hbm_frac": 0.0329},
            "fp8kv-cal": {"tensor_frac": 0.0505, "hbm_frac": 0.0236}, "fp8-dynamic": {"tensor_frac": 0.0266, "hbm_frac": 0.0378}}


@pytest.mark.parametrize("variant", sorted(RECORDED))
def test_recorded_h200_samples_are_engine_cpu_bound(variant):
    rows, blind = recorded(f"qwen0.5b-{variant}-rate-inf")
    st = bottleneck.summarize(rows)
    # the warm-up requests, the ~30 s of client start-up and the stale gauges after the last reply are left out
    assert 6 <= st.loaded_samples <= 9 < st.samples and st.gpu_samples == st.loaded_samples
    assert 20 < st.gpu_util_mean < 40 and st.loaded_engine_core_cpu_pct >= 90
    label, reason = labels.classify(point(), st, roofline=RECORDED[variant])
    assert label == "engine-cpu" and "GPU idled" in reason, reason
    # the same samples without the NVML readings: the label the suite gave before it could see the GPU
    assert labels.classify(point(), bottleneck.summarize(blind), roofline=RECORDED[variant])[0] == "engine"


# Recorded on the project's H200 in issue 16's study (vLLM 0.26.0, 2 API servers, Qwen2.5-Coder-0.5B, 1,500 random
# 512/256 prompts at rate inf, repetition 1; studies/2026-12-02-qwen-coder-study/results/h200-study-20261203/stretch3): the batch sat at vLLM's
# default cap of 1,024 with 460 waiting, the KV cache 7% full -- and kernels ran ~20% of the time with the engine core
# at a full core. Before the GPU evidence could outrank the cap, these read `seq-cap`, whose advice (raise
# max_num_seqs) asks a saturated host loop for more work per step.
STUDY = {"bf16": {"tensor_frac": 0.0568, "hbm_frac": 0.0362}, "fp8-static": {"tensor_frac": 0.0251, "hbm_frac": 0.0303}}


@pytest.mark.parametrize("variant", sorted(STUDY))
def test_recorded_h200_points_at_the_sequence_cap_with_an_idle_gpu_are_engine_cpu(variant):
    rows, blind = recorded(f"qwen0.5b-study-{variant}-rate-inf-1500")
    st = bottleneck.summarize(rows)
    assert st.running_max == 1024 and st.waiting_max == 460 and st.queued_at_peak_frac >= 0.5
    assert st.gpu_util_mean < 30 and st.loaded_engine_core_cpu_pct >= 100
    label, reason = labels.classify(point(), st, roofline=STUDY[variant])
    assert label == "engine-cpu" and "GPU idled" in reason, reason
    assert "max_num_seqs=1024 (not set by the recipe" in reason and "460 requests waited" in reason
    # the same samples without the NVML readings: the cap is all the evidence there is
    assert labels.classify(point(), bottleneck.summarize(blind), roofline=STUDY[variant])[0] == "seq-cap"
    # and a GPU that was busy at the cap keeps the cap's label (a bigger batch is more work per kernel there)
    busy = [{**s, "gpu": [{**g, "util_pct": 99.0} for g in s.get("gpu", [])]} for s in rows]
    assert labels.classify(point(), bottleneck.summarize(busy), roofline=STUDY[variant])[0] == "seq-cap"


# Recorded on the project's H200 (vLLM 0.26.0, 4 API servers, the Llama-3-8B shape with random weights, 1,500 random
# 512/256 prompts at rate inf; studies/2026-12-03-llama3-8b-shape-ceiling/results/h200-gpubound-20261203), each point's roofline from its result. The same
# queue as the 0.5B points above (the batch up to vLLM's 1,024, ~440 waiting on average), but with ~16x the tensor
# work per step: BF16's kernels ran 91% of the time at 674 W of 700 -- the first GPU-bound point the suite recorded.
# With an FP8 KV cache the GPU was 85% busy at 615 W and the engine core at 78%: between the thresholds, undecided by
# the means; but 22 of its 60 loaded samples were in host-bound phases (3+ samples in a row with the GPU under 90% busy
# and the engine core at a full core) and held 79% of the GPU's idle time, so it reads `engine-cpu` (the phases rule,
# from issue 16's ceiling runs; 14 samples and 57% by the rule before 2026-12-04: single samples under 70%).
EIGHT_B = {"bf16": {"tensor_frac": 0.4260, "hbm_frac": 0.2039}, "bf16-fp8kv": {"tensor_frac": 0.4038, "hbm_frac": 0.1155}}


@pytest.mark.parametrize("variant", sorted(EIGHT_B))
def test_recorded_h200_8b_shape_points_read_gpu_bound_or_undecided(variant):
    rows, blind = recorded(f"llama3-8b-shape-{variant}-rate-inf-1500")
    st = bottleneck.summarize(rows)
    assert st.running_max == 1024 and st.waiting_mean > 400 and st.queued_at_peak_frac < 0.5 and st.gpu_samples == 60
    label, reason = labels.classify(point(), st, roofline=EIGHT_B[variant])
    if variant == "bf16":
        assert st.gpu_util_mean > 90 and st.gpu_power_w_mean > 0.9 * st.gpu_power_limit_w
        assert label == "gpu" and "drawing power" in reason, reason  # 43% of the tensor roof: not near a roof
        # on the 90% line (90.5% busy), with host-bound phases holding most of its idle time: `gpu`, the phases named
        assert st.gpu_util_mean < 91 and st.host_bound_samples == 13 and 0.55 < st.gpu_idle_host_frac < 0.6
        assert "13 of 60 samples were host-bound" in reason, reason
    else:
        assert 70 < st.gpu_util_mean < 90 and st.loaded_engine_core_cpu_pct < 90
        assert st.host_bound_samples == 22 and 0.75 < st.gpu_idle_host_frac < 0.85
        assert label == "engine-cpu" and "22 of 60 samples were host-bound" in reason, reason
    # without the NVML readings both are the old, undivided label
    assert labels.classify(point(), bottleneck.summarize(blind), roofline=EIGHT_B[variant])[0] == "engine"


def test_a_point_recorded_under_the_older_rule_is_shown_by_the_current_one(capsys):
    """Issue 16's study kept stretch 3's four benchmarks, labelled `seq-cap` when they ran, beside a fifth labelled
    `engine-cpu` on the same kind of evidence (stretch 5): the summary's table and the report read every point by the
    current rule and keep the recorded label beside it."""
    from types import SimpleNamespace

    from conftest import ROOT
    from suite.cli.render import print_load_points
    from suite.records.benchmark import BenchmarkResult

    data = ROOT / "tests/stages/benchmark/data"  # copies of studies/2026-12-02-qwen-coder-study/results/h200-study-20261203/stretch{3,5}'s results
    res = BenchmarkResult.read(data / "h200-vllm-0.26-qwen0.5b-study-fp8-static.benchmark.result.json")
    assert [p.bottleneck for p in res.points] == ["seq-cap", "seq-cap"]
    label, reason = labels.relabel(res.points[0], {})
    assert label == "engine-cpu" and "GPU idled" in reason and "max_num_seqs=1024" in reason
    shown, why = labels.shown_label(res.points[0], {})
    assert shown == "engine-cpu (as run: seq-cap)" and why.endswith(f"As run: {res.points[0].bottleneck_reason}")
    # a recipe's own cap of 2,048 is not reached by 1,024 running: the cap is no longer the reason
    assert "max_num_seqs" not in labels.relabel(res.points[0], {"max_num_seqs": 2048})[1]
    fifth = BenchmarkResult.read(data / "h200-vllm-0.26-qwen0.5b-study-fp8-dynamic-kv.benchmark.result.json")
    assert labels.shown_label(fifth.points[0], {})[0] == "engine-cpu"  # recorded by the current rule: one label
    no_stats = res.points[0].model_copy(update={"server": None})
    assert labels.relabel(no_stats, {}) == ("seq-cap", res.points[0].bottleneck_reason)
    print_load_points(SimpleNamespace(variants=[VariantSummary(name="fp8-static", is_baseline=False, model_path="m",
                                                               stages={BENCHMARK: res})]))
    assert "engine-cpu (as run: seq-cap)" in capsys.readouterr().out
    # and the report: the same text, the current reason and the recorded one in its tooltip
    from conftest import make_summary
    from suite.outputs import report

    s = make_summary({"bf16": {}, "fp8-static": {}})
    s.variants[1].stages[BENCHMARK] = res
    assert report.context(s, None)["bounds"]["fp8-static"][0] == (shown, why)


# Recorded on the project's H200 in issue 16's ceiling run (vLLM 0.26.0, 4 API servers, the Llama-3-8B shape with random
# weights, 1,500 random 512/256 prompts at rate inf; studies/2026-12-03-llama3-8b-shape-ceiling/results/h200-ceiling-20261203), each point's roofline from its
# result. Served against offline LLM.generate on the same workload: BF16 100%, FP8 static 94%, FP8 dynamic 86%. Over
# each FP8 point the kernels ran 86% of the time -- undecided by the means -- but while 1,024 sequences decoded in
# lockstep the GPU fell to 33-75% busy with the engine core at a full core; and after FP8 dynamic's last step an API
# server was still at a full core for ~2 s, delivering replies inside the client's window. Both FP8 points read
# `engine-cpu` by the phases rule (13 of 45 samples each); by the rule before 2026-12-04 (single samples under 70%
# busy) static's 7 held 44% of the idle time and it read `engine`.
CEILING = {"bf16": {"tensor_frac": 0.4541, "hbm_frac": 0.2184}, "fp8-static": {"tensor_frac": 0.2870, "hbm_frac": 0.2492},
           "fp8-dynamic": {"tensor_frac": 0.2570, "hbm_frac": 0.2227}}


@pytest.mark.parametrize("variant", sorted(CEILING))
def test_recorded_h200_ceiling_points_show_the_host_bound_phase_and_the_front_end_drain(variant):
    rows, blind = recorded(f"llama3-8b-shape-ceiling-{variant}-rate-inf-1500")
    st = bottleneck.summarize(rows)
    assert st.running_max == 1024 and st.gpu_samples == st.loaded_samples
    p = point().model_copy(update={"duration_s": {"bf16": 38.5, "fp8-static": 30.4, "fp8-dynamic": 34.0}[variant]})
    label, reason = labels.classify(p, st, roofline=CEILING[variant])
    if variant == "bf16":  # busy throughout: no host-bound sample, no drain
        assert st.gpu_util_mean > 98 and st.host_bound_samples == 0 and st.frontend_drain_s == 0
        assert label == "gpu" and "host-bound" not in reason and "front end" not in reason, reason
    elif variant == "fp8-static":  # the lockstep phase holds most of the idle time; no drain
        assert 80 < st.gpu_util_mean < 90 and st.host_bound_samples == 13 and 0.65 < st.gpu_idle_host_frac < 0.75
        assert label == "engine-cpu" and "13 of 45 samples were host-bound" in reason
        assert st.frontend_drain_s == 0 and "front end" not in reason, reason
    else:
        assert 80 < st.gpu_util_mean < 90 and st.host_bound_samples == 13 and 0.7 < st.gpu_idle_host_frac < 0.8
        assert label == "engine-cpu" and "13 of 45 samples were host-bound" in reason, reason
        assert 1.5 < st.frontend_drain_s < 2.5 and "The front end lagged" in reason and "(6% of the point)" in reason
    # without the NVML readings: no GPU evidence, and the drain is still seen (engine core idle, API server busy)
    blind_label, blind_reason = labels.classify(p, bottleneck.summarize(blind), roofline=CEILING[variant])
    assert blind_label == "engine" and ("The front end lagged" in blind_reason) == (variant == "fp8-dynamic")


def test_host_bound_phases_are_runs_of_samples_and_a_short_drain_is_not_named():
    """A host-bound phase is 3 or more samples in a row with the GPU under 90% busy and the engine core at a full core:
    a GPU 82% busy in every sample beside a full engine core is one; the same GPU beside an engine core short of a full
    core is no evidence either way; and one or two such samples are NVML's jitter, not a phase."""
    st = bottleneck.summarize(samples([[82]] * 6, engine_core=99.0))
    assert st.host_bound_samples == 6 and st.gpu_idle_host_frac == 1.0
    assert labels.classify(point(), st, roofline=LOW_ROOF)[0] == "engine-cpu"
    st = bottleneck.summarize(samples([[82]] * 6, engine_core=85.0))
    assert st.host_bound_samples == 0 and st.gpu_idle_host_frac == 0
    assert labels.classify(point(), st, roofline=LOW_ROOF)[0] == "engine"
    # two host-bound samples, a busy one, two more: no run of three, no phase
    broken = bottleneck.summarize(samples([[80], [80], [95], [80], [80], [95]], engine_core=99.0))
    assert broken.host_bound_samples == 0 and labels.classify(point(), broken, roofline=LOW_ROOF)[0] == "engine"
    # three host-bound samples of eight holding most of the idle time: engine-cpu
    mixed = samples([[99], [99], [99], [50], [50], [50], [99], [99]], engine_core=99.0)
    st = bottleneck.summarize(mixed)
    assert 70 <= st.gpu_util_mean < 90 and st.host_bound_samples == 3 and st.gpu_idle_host_frac == pytest.approx(150 / 155)
    assert labels.classify(point(), st, roofline=LOW_ROOF)[0] == "engine-cpu"
    # one such sample is not a phase (NVML's window is noisy): undecided
    one = bottleneck.summarize(samples([[95]] * 7 + [[20]], engine_core=99.0))
    assert one.host_bound_samples == 0 and one.gpu_idle_host_frac == 0
    label, reason = labels.classify(point(), one, roofline=LOW_ROOF)
    assert label == "engine" and "host-bound" not in reason, reason
    # a phase inside a 70-90%-busy point does not outrank the recipe's sequence cap (the point-level rule does)
    at_cap = [{**s, "running": 256.0} for s in mixed]
    assert labels.classify(point(), bottleneck.summarize(at_cap), max_num_seqs=256, roofline=LOW_ROOF)[0] == "seq-cap"
    # under 70% busy with the engine core's mean under a full core: the point-level rule's "engine", phases or not
    low = samples([[40]] * 6, engine_core=99.0)
    low = [{**s, "cpu": {**s["cpu"], "engine_core": 99.0 if i < 3 else 50.0}} for i, s in enumerate(low)]
    assert labels.classify(point(), bottleneck.summarize(low), roofline=LOW_ROOF)[0] == "engine"
    # a drain of one sample after the engine's last step: 0.5 s of a 100-s point is not named; of a 10-s point it is
    idle = {"t": 1003.0, "running": 0.0, "waiting": 0.0, "cpu": {"api_server": 99.0, "engine_core": 1.0, "client": 50.0},
            "gpu": [{"index": 0, "util_pct": 0.0, "power_w": 100.0, "power_limit_w": 700.0}]}
    st = bottleneck.summarize(mixed + [idle, {**idle, "t": 1003.5, "cpu": {"api_server": 5.0, "engine_core": 1.0}}])
    assert st.frontend_drain_s == pytest.approx(0.5)
    for duration, named in ((100.0, False), (10.0, True)):
        reason = labels.classify(point().model_copy(update={"duration_s": duration}), st, roofline=LOW_ROOF)[1]
        assert ("The front end lagged" in reason) == named, reason


# Recorded on the project's H200 in issue 16's second ceiling session (vLLM 0.26.0, 4 API servers, the Llama-3-8B shape,
# 1,500 random 512/256 prompts at rate inf, the offline ceiling built with the server's batch limits;
# studies/2026-12-03-llama3-8b-shape-ceiling/results/h200-ceiling-20261204/): the same FP8 dynamic point served twice on one machine, 9 minutes apart. In
# run 1 the lockstep decode of 1,024 sequences kept the GPU 100% busy with the engine core at 67-96% of a core (13,376
# tok/s, 98% of offline); in run 2 the engine core sat at 92-103% and the GPU mostly at 48-81% busy (12,388 tok/s,
# 92% of offline). The label follows the evidence: `gpu`, then `engine-cpu` by its host-bound phases (undecided, with 3
# samples named, by the rule before 2026-12-04).
CEILING2 = {"run1-fp8-static": ({"tensor_frac": 0.3067, "hbm_frac": 0.2664}, 28.5),
            "run1-fp8-dynamic": ({"tensor_frac": 0.3043, "hbm_frac": 0.2650}, 28.7),
            "run2-fp8-dynamic": ({"tensor_frac": 0.2819, "hbm_frac": 0.2447}, 31.0),
            "run2-bf16": ({"tensor_frac": 0.4564, "hbm_frac": 0.2186}, 38.3)}


@pytest.mark.parametrize("variant", sorted(CEILING2))
def test_the_same_fp8_point_served_twice_reads_gpu_when_the_host_kept_up_and_engine_cpu_when_it_did_not(variant):
    rows, blind = recorded(f"llama3-8b-shape-ceiling2-{variant}-rate-inf-1500")
    roof, duration = CEILING2[variant]
    st = bottleneck.summarize(rows)
    assert st.running_max == 1024 and st.gpu_samples == st.loaded_samples >= 40
    p = point().model_copy(update={"duration_s": duration})
    label, reason = labels.classify(p, st, roofline=roof)
    if variant == "run2-fp8-dynamic":
        assert 85 < st.gpu_util_mean < 90 and st.loaded_engine_core_cpu_pct > 80
        assert st.host_bound_samples == 11 and 0.5 < st.gpu_idle_host_frac < 0.6
        assert label == "engine-cpu" and "11 of 45 samples were host-bound" in reason, reason
    else:  # the GPU's timeline full: the ramp's short host-bound run does not matter at >= 90% busy
        assert st.gpu_util_mean >= 94 and label == "gpu", reason
    assert labels.classify(p, bottleneck.summarize(blind), roofline=roof)[0] == "engine"


def test_the_engine_cores_physical_core_shared_with_the_client_in_a_phase_is_counted_and_named(tmp_path):
    """Where each role's busiest process ran (``on_cpu``: logical CPU and physical core) is recorded per sample; the
    summary counts the host-bound phase's samples in which the engine core shared a physical core with the client or
    the busiest API server, and the phase's reason names them (none, too). Samples without placement (records before
    2026-12-04) count None; without sysfs, one logical CPU is one core."""
    rows = samples([[80]] * 4 + [[99]] * 2, engine_core=99.0)
    for i, r in enumerate(rows):  # the client on the engine core's SMT sibling in three samples of the phase
        r["on_cpu"] = {"engine_core": [3, "0:3,11"], "api_server": [7, "0:7,15"],
                       "client": [11, "0:3,11"] if i < 3 else [12, "0:4,12"]}
    st = bottleneck.summarize(rows)
    assert st.host_bound_samples == 4 and st.engine_core_shared_core_samples == 3
    label, reason = labels.classify(point(), st, roofline=LOW_ROOF)
    assert label == "engine-cpu" and "in 3 of them with the engine core on the same physical core" in reason, reason
    for r in rows:
        r["on_cpu"]["client"] = [12, "0:4,12"]
    st = bottleneck.summarize(rows)
    assert st.engine_core_shared_core_samples == 0
    assert "none of them with the engine core on the client's" in labels.classify(point(), st, roofline=LOW_ROOF)[1]
    # a second busy API server (not the busiest) on the engine core's SMT sibling counts too
    for i, r in enumerate(rows):
        r["on_cpu"]["api_servers"] = [[7, "0:7,15"], [11, "0:3,11"] if i < 2 else [9, "0:1,9"]]
    assert bottleneck.summarize(rows).engine_core_shared_core_samples == 2
    for r in rows:
        del r["on_cpu"]["api_servers"]
    for r in rows:  # no sysfs topology: the same logical CPU is the same core, another is not
        r["on_cpu"] = {"engine_core": [3, None], "client": [3, None] if r["t"] < 1001 else [5, None]}
    assert bottleneck.summarize(rows).engine_core_shared_core_samples == 2
    assert bottleneck.summarize(samples([[80]] * 4, engine_core=99.0)).engine_core_shared_core_samples is None
    # sysfs topology: logical CPUs 0 and 2 are one core's SMT siblings
    for cpu, siblings in ((0, "0,2"), (1, "1"), (2, "0,2")):
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text("0\n")
        (d / "thread_siblings_list").write_text(siblings + "\n")
    (tmp_path / "cpufreq").mkdir()
    assert host.cpu_cores(str(tmp_path)) == {0: "0:0,2", 1: "0:1", 2: "0:0,2"}
    # the host's CPU as the benchmark result records it: model, logical CPUs and physical cores
    info = "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nprocessor\t: 1\nmodel name\t: ignored\n"
    assert host.host_cpu(info, str(tmp_path), usable=3) == "AMD EPYC 9654 96-Core Processor, 3 logical CPUs on 2 cores"
    assert host.host_cpu(info, str(tmp_path), usable=2).endswith("on 2 cores, 2 usable by this process")
    assert host.host_cpu("", str(tmp_path / "none")) is None
    assert host.host_cpu(info, str(tmp_path / "none")) == "AMD EPYC 9654 96-Core Processor"
    arm = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    assert host.host_cpu(arm, str(tmp_path / "none")) == "Arm CPU implementer 0x41 part 0xd4f"


def test_a_phase_passes_over_a_sample_without_readings_and_ends_at_a_gap_in_time():
    """A sample without an NVML or engine-core reading neither extends nor ends a run of host-bound samples; a gap in
    time (samples left out below the loaded cut-off, a failed scrape) ends it."""
    rows = samples([[80]] * 2 + [[99]] + [[80]] * 2 + [[99]], engine_core=99.0)
    rows[2]["gpu"] = []  # NVML missed one window inside the run: 4 host-bound samples in a row
    st = bottleneck.summarize(rows)
    assert st.host_bound_samples == 4 and st.gpu_idle_host_frac == pytest.approx(80 / 81)
    gap = samples([[80]] * 4, engine_core=99.0)
    for r in gap[2:]:
        r["t"] += 5.0  # 2 + 2 around a 5-s hole: no run of three
    assert bottleneck.summarize(gap).host_bound_samples == 0
