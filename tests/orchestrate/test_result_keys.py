"""The content keys of kvcheck's and benchmark's results (suite.plan.keys): what decides a result is in its key (the
config, the model's identity, the versions of the environment it runs in), what does not (where it writes) is not;
a run folder's result recorded under its job's key now is a hit (store.find), one made under another is set aside
and its job runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.orchestrate import rundir, store
from suite.plan import keys
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.records.benchmark import BenchmarkResult
from suite.records.kvcheck import KVCheckResult
from suite.records.quantize import QuantizeResult
from suite.stages.registry import BENCHMARK, KVCHECK, QUANTIZE

SERVE = {"lm-eval": "0.4.9", "vllm": "0.32.0", "torch": "2.9.0", "transformers": "4.57.0"}


@pytest.fixture
def plan(demo_recipe_copy, tmp_path):
    loaded = load_recipe(demo_recipe_copy(eval__kv_check=True))
    return loaded, make_plan(loaded, tmp_path / "run")


def variant(plan, quantized: bool):
    return next(vp for vp in plan.variants if (vp.quantize is not None) == quantized)


def test_a_benchmark_key_moves_with_its_config_versions_model_and_engine_switches_only(plan):
    _, p = plan
    config = variant(p, quantized=False).benchmark
    key = keys.benchmark_key(config, "model-a", SERVE)
    assert keys.benchmark_key(config, "model-a", dict(SERVE)) == key  # unchanged: the same key (a hit)
    assert keys.benchmark_key(config.model_copy(update={"output_dir": "/elsewhere"}), "model-a", SERVE) == key
    assert keys.benchmark_key(config.model_copy(update={"num_prompts": config.num_prompts + 1}), "model-a",
                              SERVE) != key
    assert keys.benchmark_key(config, "model-a", {**SERVE, "vllm": "0.33.0"}) != key
    assert keys.benchmark_key(config, "model-b", SERVE) != key
    assert keys.benchmark_key(config, "model-a", SERVE, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}) != key
    assert keys.benchmark_key(config, "model-a", SERVE, env={"VLLM_CACHE_ROOT": "/tmp/x"}) == key  # where, not what


def test_a_kvcheck_key_moves_with_its_texts_content_and_the_quantize_environments_versions(plan, tmp_path):
    _, p = plan
    texts = tmp_path / "docs.jsonl"
    texts.write_text('{"text": "a"}\n')
    config = variant(p, quantized=True).kvcheck.model_copy(update={"texts_file": str(texts)})
    versions = {"torch": "2.9.0", "transformers": "4.57.0"}
    key = keys.kvcheck_key(config, "ckpt:sha", versions)
    assert keys.kvcheck_key(config, "ckpt:sha", dict(versions)) == key
    assert keys.kvcheck_key(config.model_copy(update={"num_texts": 3}), "ckpt:sha", versions) != key
    assert keys.kvcheck_key(config, "ckpt:sha", {**versions, "torch": "2.10.0"}) != key
    assert keys.kvcheck_key(config, "ckpt:other", versions) != key
    texts.write_text('{"text": "b"}\n')  # same path, other texts
    assert keys.kvcheck_key(config, "ckpt:sha", versions) != key


def test_job_key_covers_kvcheck_and_benchmark_once_the_checkpoint_is_known(plan):
    _, p = plan
    fp8, bf16 = variant(p, quantized=True), variant(p, quantized=False)
    assert store.job_key(fp8, KVCHECK) is None and store.job_key(fp8, BENCHMARK) is None  # checkpoint not built yet
    built = QuantizeResult(checkpoint=fp8.model_path, key=fp8.quantize.key, cache_hit=False, wall_s=1.0,
                           content_sha256="a" * 64)
    chk = store.job_key(fp8, KVCHECK, {QUANTIZE: built})
    assert chk == keys.kvcheck_key(fp8.kvcheck, f"checkpoint:{'a' * 64}")  # the checkpoint by its content
    assert store.job_key(fp8, BENCHMARK, {QUANTIZE: built}) is None  # kvcheck's choice not known
    same = built.model_copy(update={"key": "another-checkpoint-key"})  # the same bytes built under another key
    assert store.job_key(fp8, KVCHECK, {QUANTIZE: same}) == chk  # (a quantizer upgrade): same model
    other = built.model_copy(update={"content_sha256": "b" * 64})  # a rebuild that differs: another model
    assert store.job_key(fp8, KVCHECK, {QUANTIZE: other}) != chk
    base = keys.weights_fingerprint(bf16.model_path)
    assert store.job_key(bf16, BENCHMARK) == keys.benchmark_key(bf16.benchmark, base)


def benchmark_result(key: str | None) -> BenchmarkResult:
    return BenchmarkResult(points=[], server_start_s=1.0, wall_s=2.0, server_log="server.log", key=key)


def look(p, vp, stage: str, done=None) -> store.Found:
    """The job's one lookup in its run folder, as the job loop asks it (its key with ``done`` its prerequisites')."""
    from suite.runtime.envs import stage_env

    env, config = stage_env(p.env), vp.config(stage)
    return store.find(stage, store.job_key(vp, stage, done, env), config,
                      store.RunFolder(Path(p.run_dir) / "variants" / vp.variant.name),
                      store.shared_store(stage, config, env, Path(p.run_dir).parent))


def note(found: store.Found, vp, stage: str) -> str:
    return f"{vp.variant.name}: its {stage} result{found.why}: it runs again"


def test_a_resume_keeps_a_benchmark_made_under_its_key_and_redoes_one_made_under_another(plan, monkeypatch):
    loaded, p = plan
    bf16 = variant(p, quantized=False)
    vdir = Path(p.run_dir) / "variants" / bf16.variant.name
    vdir.mkdir(parents=True)
    from suite.runtime.envs import stage_env

    key = store.job_key(bf16, BENCHMARK, env=stage_env(p.env))
    benchmark_result(key).write(vdir / "benchmark.result.json")
    found = look(p, bf16, BENCHMARK)
    assert found.where == "run" and found.result.key == key and found.earlier is None  # the same key: a hit
    assert (BENCHMARK, bf16.variant.name) in rundir.expected_hits(p, Path(p.run_dir), Path(p.run_dir).parent)

    import suite.runtime.envs as envs

    real = envs.serve_versions
    monkeypatch.setattr(envs, "serve_versions", lambda: {**real(), "vllm": "99.0"})  # another vLLM now
    assert (BENCHMARK, bf16.variant.name) not in rundir.expected_hits(p, Path(p.run_dir), Path(p.run_dir).parent)
    found = look(p, bf16, BENCHMARK)
    assert found.result is None and found.earlier.key == key
    assert note(found, bf16, BENCHMARK) == (f"{bf16.variant.name}: its benchmark result's content key changed since "
                                            "the run began: it runs again")
    assert (vdir / "benchmark.result.stale-key.json").is_file() and not (vdir / "benchmark.result.json").exists()


def checkpoint(vp, weights: str = "w") -> QuantizeResult:
    """The variant's checkpoint built where the plan puts it, as the quantize stage leaves it: its weights, its result
    (with the files' content hash) and the completeness mark."""
    from suite.runtime import ckptfiles

    folder = Path(vp.quantize.checkpoint_dir)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text(weights)
    built = QuantizeResult(checkpoint=str(folder), key=vp.quantize.key, cache_hit=False, wall_s=1.0,
                           content_sha256=ckptfiles.content_sha256(folder))
    built.write(folder / ckptfiles.RESULT_FILE)
    (folder / ckptfiles.COMPLETE_MARK).write_text(vp.quantize.key)
    return built


def test_a_resume_keeps_no_result_that_records_no_key(plan):
    """A result without its key (a run folder from before keys were recorded, or one whose key was removed): nothing
    says which job made it, so it is set aside (``.no-key``) and its job runs again, with a line saying so."""
    loaded, p = plan
    bf16 = variant(p, quantized=False)
    vdir = Path(p.run_dir) / "variants" / bf16.variant.name
    vdir.mkdir(parents=True)
    benchmark_result(None).write(vdir / "benchmark.result.json")
    found = look(p, bf16, BENCHMARK)
    assert found.result is None and (vdir / "benchmark.result.no-key.json").is_file()
    assert note(found, bf16, BENCHMARK) == (f"{bf16.variant.name}: its benchmark result records no content key (made "
                                            "before results recorded one): it runs again")


def test_a_kept_kvcheck_is_judged_by_its_key_once_its_checkpoint_result_is_kept_too(plan, monkeypatch):
    loaded, p = plan
    fp8 = variant(p, quantized=True)
    vdir = Path(p.run_dir) / "variants" / fp8.variant.name
    built = checkpoint(fp8)
    built.write(vdir / "quantize.result.json")
    made = KVCheckResult(kv_scales="unit", option="unit", options=["unit"], num_layers=2, num_texts=1, tokens=8,
                         rows=[], wall_s=1.0, key=store.job_key(fp8, KVCHECK, {QUANTIZE: built}))
    made.write(vdir / "kvcheck.result.json")
    run = Path(p.run_dir)
    assert {(QUANTIZE, fp8.variant.name), (KVCHECK, fp8.variant.name)} <= set(rundir.expected_hits(p, run, run.parent))
    assert look(p, fp8, QUANTIZE).where == "run"
    assert look(p, fp8, KVCHECK, {QUANTIZE: built}).where == "run"
    import suite.plan.keys as k

    real = k.quantizer_versions
    monkeypatch.setattr(k, "quantizer_versions", lambda: {**real(), "torch": "0.0.1"})  # kvcheck's env changed
    assert (KVCHECK, fp8.variant.name) not in rundir.expected_hits(p, run, run.parent)
    assert look(p, fp8, KVCHECK, {QUANTIZE: built}).result is None
    assert (vdir / "kvcheck.result.stale-key.json").is_file()


def test_a_resume_redoes_the_evaluations_whose_task_data_changed_since(demo_recipe_copy, tmp_path, monkeypatch,
                                                                       capsys):
    """The task data is in an evaluation's key, and the run folder's result records that key: the baseline's is
    compared before anything runs, the quantized variant's once its checkpoint's content is known (runner.schedule).
    Unchanged data: nothing runs again; changed data: both evaluations do, their old results set aside."""
    import json
    import shutil

    from conftest import ROOT
    from test_resume_promises import accuracy_only, stand_in

    from suite import cli

    data = tmp_path / "data"
    shutil.copytree(ROOT / "tasks" / "data", data)
    _, calls = stand_in(tmp_path, monkeypatch)
    assert cli.main(["run", str(accuracy_only(demo_recipe_copy, eval__data_dir=str(data))), "--no-track"]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    recorded = json.loads((run_dir / "variants" / "fp8-kv" / "evaluate.result.json").read_text())["cache_key"]
    assert recorded  # the run folder's result records its key
    calls.write_text("")
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 0
    assert calls.read_text() == ""  # the same keys: every kept result is a hit
    mmlu = next(p for p in sorted((data / "mmlu").rglob("*")) if p.is_file())
    mmlu.write_bytes(mmlu.read_bytes() + b"\n")
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 0
    assert sorted(calls.read_text().split("\n")[:-1]) == ["evaluate bf16", "evaluate fp8-kv"]
    for name in ("bf16", "fp8-kv"):
        assert (run_dir / "variants" / name / "evaluate.result.stale-key.json").is_file()
    warnings = json.loads((run_dir / "summary.json").read_text())["warnings"]
    assert "fp8-kv: its evaluate result's content key changed since the run began: it runs again" in warnings


def test_the_plan_is_not_opened_again_for_a_job_after_no_prerequisite(demo_recipe_copy, tmp_path):
    """jobs.ready_plan: what kvcheck chose reaches the jobs after it (their configs, so their keys); a job after no
    prerequisite stage runs the plan as it is (the same object)."""
    from suite.analysis.summary import variant_summary
    from suite.orchestrate.jobs import ready_plan
    from suite.stages.registry import EVALUATE

    p = make_plan(load_recipe(demo_recipe_copy(variants__0__kv_skip_layers="auto")), tmp_path / "run")
    auto, bf16 = variant(p, quantized=True), variant(p, quantized=False)
    vs = variant_summary(auto)
    vs.stages[KVCHECK] = KVCheckResult(kv_scales="calibrated", option="calibrated", options=[], num_layers=30,
                                       num_texts=1, tokens=10, rows=[], skip_layers=[0], auto=True, wall_s=1.0)
    assert ready_plan(auto, QUANTIZE, vs.stages) is auto and ready_plan(bf16, EVALUATE, {}) is bf16
    ready = ready_plan(auto, EVALUATE, vs.stages)
    assert ready.evaluate.engine.engine_args["kv_cache_dtype_skip_layers"] == ["0"]
    assert ready.benchmark.engine.engine_args["kv_cache_dtype_skip_layers"] == ["0"]
    built = QuantizeResult(checkpoint=auto.model_path, key=auto.quantize.key, cache_hit=False, wall_s=1.0)
    vs.stages[QUANTIZE] = built
    # the key of the job as it runs: the same whether given the plan or the plan as the job runs it
    other_choice = vs.stages[KVCHECK].model_copy(update={"skip_layers": [1]})
    assert store.job_key(auto, BENCHMARK, vs.stages) == store.job_key(ready, BENCHMARK, vs.stages) != store.job_key(
        auto, BENCHMARK, {QUANTIZE: built, KVCHECK: other_choice})


def test_the_run_folder_records_a_key_only_while_the_run_owns_the_folder(tmp_path):
    from suite.runtime.lock import RunLock

    vdir = tmp_path / "variants" / "bf16"
    lock = RunLock(tmp_path).acquire()
    put = store.RunFolder(vdir, lock).put(BENCHMARK, "k1", benchmark_result(None))
    assert put.key == "k1" and store.RunFolder(vdir).lookup(BENCHMARK, "k1").key == "k1"
    assert store.RunFolder(vdir).lookup(BENCHMARK, "k2") is None  # made under another key: a miss
    lock.release()  # the run no longer owns the folder: its result file is left as it is
    assert store.RunFolder(vdir, lock).put(BENCHMARK, "k2", benchmark_result(None)).key == "k2"
    assert store.RunFolder(vdir).result(BENCHMARK).key == "k1" and store.RunFolder(vdir).lookup(BENCHMARK, None) is None


def test_on_vllm_cpu_a_benchmark_key_moves_with_the_instruction_set_caps_as_an_evaluations_does(plan, monkeypatch):
    """ONEDNN_MAX_CPU_ISA set in the environment between two attempts caps vllm-cpu's kernels (BF16 without AVX-512
    is ~130x slower): a benchmark made without the cap is not kept for the capped engine, as an evaluation is not
    (tests/stages/evaluate/test_cpu_kernels.py); off vllm-cpu the key is as before."""
    from suite.runtime.engine import cpukernels

    _, p = plan
    config = variant(p, quantized=False).benchmark
    cpu = {**SERVE, "vllm-cpu": "0.32.0"}
    plain = keys.benchmark_key(config, "model-a", cpu)
    assert keys.benchmark_key(config, "model-a", cpu, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}) != plain
    assert keys.benchmark_key(config, "model-a", cpu, env={"ATEN_CPU_CAPABILITY": "avx2"}) != plain
    assert keys.benchmark_key(config, "model-a", SERVE, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}) == keys.benchmark_key(
        config, "model-a", SERVE)
    monkeypatch.setattr(cpukernels, "isa_flags", lambda cpuinfo=None: ["avx2", "fma"])  # another machine's CPU
    assert keys.benchmark_key(config, "model-a", cpu) != plain


def test_a_resume_under_a_newly_set_isa_cap_redoes_a_cpu_benchmark(plan, monkeypatch):
    """The cap set in the shell reaches the key through the stage environment (envs.stage_env): the kept result is set
    aside and its job runs again, with a line that says so."""
    import suite.runtime.envs as envs

    loaded, p = plan
    real = envs.serve_versions
    monkeypatch.setattr(envs, "serve_versions", lambda: {**real(), "vllm-cpu": "0.32.0"})
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    bf16 = variant(p, quantized=False)
    vdir = Path(p.run_dir) / "variants" / bf16.variant.name
    vdir.mkdir(parents=True)
    benchmark_result(store.job_key(bf16, BENCHMARK, env=envs.stage_env(p.env))).write(vdir / "benchmark.result.json")
    assert look(p, bf16, BENCHMARK).where == "run"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    found = look(p, bf16, BENCHMARK)
    assert found.result is None and (vdir / "benchmark.result.stale-key.json").is_file()
    assert note(found, bf16, BENCHMARK) == (f"{bf16.variant.name}: its benchmark result's content key changed since "
                                            "the run began: it runs again")


def test_a_result_whose_key_was_deleted_or_rewritten_is_still_judged_by_the_versions_it_records(plan, monkeypatch):
    """An edited run folder: a benchmark made on another vLLM, its key deleted (as an older result records none) or
    rewritten to the job's key now. Neither is kept: one without its key is not, one with it fails the version
    check."""
    import suite.runtime.envs as envs

    loaded, p = plan
    bf16 = variant(p, quantized=False)
    vdir = Path(p.run_dir) / "variants" / bf16.variant.name
    vdir.mkdir(parents=True)
    now = envs.serve_versions()
    older = {**now, "vllm": "0.0.1-other"}
    for key, tag in ((None, "no-key"), (store.job_key(bf16, BENCHMARK, env=envs.stage_env(p.env)), "stale-versions")):
        made = benchmark_result(key).model_copy(update={"versions": older})
        made.write(vdir / "benchmark.result.json")
        found = look(p, bf16, BENCHMARK)
        assert found.result is None
        why = ("records no content key (made before results recorded one)" if key is None else "was made with other "
               f"versions than this environment's (vllm 0.0.1-other -> {now.get('vllm')})")
        assert note(found, bf16, BENCHMARK) == f"{bf16.variant.name}: its benchmark result {why}: it runs again"
        assert (vdir / f"benchmark.result.{tag}.json").is_file()


def test_a_benchmark_copied_from_another_variants_folder_is_not_kept(demo_recipe_copy, tmp_path):
    """The FP8 variant's folder given the baseline's benchmark result (its key recorded): once the FP8 checkpoint is
    known the job's key is another (another model): set aside, a line says so."""
    loaded = load_recipe(demo_recipe_copy())
    p = make_plan(loaded, tmp_path / "run")
    fp8, bf16 = variant(p, quantized=True), variant(p, quantized=False)
    from suite.runtime.envs import stage_env

    env = stage_env(p.env)
    fdir = Path(p.run_dir) / "variants" / fp8.variant.name
    built = checkpoint(fp8)
    done = {QUANTIZE: built}
    if fp8.kvcheck is not None:  # what kvcheck chose is known too
        done[KVCHECK] = KVCheckResult(kv_scales="unit", option="unit", options=["unit"], num_layers=2, num_texts=1,
                                      tokens=8, rows=[], wall_s=1.0)
    benchmark_result(store.job_key(bf16, BENCHMARK, env=env)).write(fdir / "benchmark.result.json")
    found = look(p, fp8, BENCHMARK, done)
    assert found.result is None and (fdir / "benchmark.result.stale-key.json").is_file()
    assert note(found, fp8, BENCHMARK) == (f"{fp8.variant.name}: its benchmark result's content key changed since the "
                                           "run began: it runs again")
