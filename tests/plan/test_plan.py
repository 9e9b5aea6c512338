"""The planner turns a recipe into stage jobs with typed configs; checkpoints are content-addressed."""

from __future__ import annotations

from conftest import ROOT
from suite.plan.planner import make_plan
from suite.recipe import load_recipe


def test_jobs_and_configs(demo_recipe_copy, tmp_path):
    loaded = load_recipe(demo_recipe_copy())
    plan = make_plan(loaded, tmp_path / "run")
    assert plan.jobs() == [("quantize", "fp8-kv"), ("evaluate", "bf16"), ("evaluate", "fp8-kv"),
                           ("benchmark", "bf16"), ("benchmark", "fp8-kv")]
    base, fp8 = plan.variants
    assert base.is_baseline and base.quantize is None
    assert base.model_path == str(ROOT / "models" / "smollm2-135m-instruct")
    assert fp8.quantize.kv_cache == "fp8" and fp8.quantize.scheme is None
    assert fp8.model_path == fp8.quantize.checkpoint_dir
    assert fp8.evaluate.engine.model == fp8.model_path and fp8.evaluate.engine.kv_cache_dtype == "fp8"
    assert fp8.benchmark.engine == fp8.evaluate.engine  # the same engine settings for both stages
    mmlu = next(t for t in fp8.evaluate.tasks if t.name == "suite_mmlu")
    gsm = next(t for t in fp8.evaluate.tasks if t.name == "suite_gsm8k")
    assert (mmlu.num_fewshot, mmlu.limit) == (0, 1)
    assert gsm.num_fewshot is None  # the task's own default (5)
    assert plan.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    # the demo's engines are eager (nothing compiled to share): the evaluations keep vLLM's own batch limits
    assert {vp.evaluate.batch_limits for vp in plan.variants} == {"llm"}
    # a compiling engine: the server after its evaluation reads its torch.compile cache, so serve's limits
    compiled = make_plan(load_recipe(demo_recipe_copy(baseline__engine_args={})), tmp_path / "run2")
    assert [vp.evaluate.batch_limits for vp in compiled.variants] == ["serve", "llm"]


def test_eval_engine_args_reach_the_evaluation_engines_only(demo_recipe_copy, tmp_path):
    import pytest

    from suite.recipe import SuiteError

    plan = make_plan(load_recipe(demo_recipe_copy(eval__engine_args={"max_num_seqs": 16})), tmp_path / "run")
    for vp in plan.variants:
        assert vp.evaluate.engine.engine_args["max_num_seqs"] == 16
        assert vp.evaluate.engine.engine_args["enforce_eager"] is True  # the variant's own stay
        assert "max_num_seqs" not in vp.benchmark.engine.engine_args  # the server starts as the variant says
    with pytest.raises(SuiteError, match="eval.engine_args are for lm-eval's in-process engine"):
        load_recipe(demo_recipe_copy(eval__engine_args={"enforce_eager": True}, eval__engine="served"))
    for key in ("calculate_kv_scales", "kv_cache_dtype_skip_layers", "attention_backend", "quantization"):
        with pytest.raises(SuiteError, match=f"eval.engine_args.{key}: decides which model"):
            load_recipe(demo_recipe_copy(eval__engine_args={key: True}))


def test_accuracy_only_recipe_plans_no_benchmark(demo_recipe_copy, tmp_path):
    import pytest

    from suite.recipe import SuiteError

    loaded = load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None))
    plan = make_plan(loaded, tmp_path / "run")
    assert plan.jobs() == [("quantize", "fp8-kv"), ("evaluate", "bf16"), ("evaluate", "fp8-kv")]
    assert all(vp.benchmark is None for vp in plan.variants)
    assert {vp.evaluate.batch_limits for vp in plan.variants} == {"llm"}  # no server after it: vLLM's defaults
    with pytest.raises(SuiteError, match="min_throughput_gain needs a throughput section"):
        load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=1.1))
    with pytest.raises(SuiteError, match="nothing to measure"):
        load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, eval__tasks=[]))


def test_checkpoint_key_is_stable_and_content_addressed(demo_recipe_copy, tmp_path):
    key = lambda path: make_plan(load_recipe(path), tmp_path).variants[1].quantize.key  # noqa: E731
    a = key(demo_recipe_copy())
    assert a == key(demo_recipe_copy())
    assert a != key(demo_recipe_copy(**{"variants__0__quantization__num_calibration_samples": 16}))
    assert a != key(demo_recipe_copy(**{"variants__0__quantization__calibration": "gsm8k"}))


def test_model_fingerprint_follows_content_not_file_times(tmp_path):
    """The H200 run copies the repository; with file times in the key every checkpoint was rebuilt."""
    import os
    import shutil

    from suite.plan.keys import FileHashes, weights_fingerprint

    src = tmp_path / "m"
    src.mkdir()
    (src / "config.json").write_text('{"hidden_size": 8}')
    big = src / "model.safetensors"
    size = 66 << 20  # over the 64 MiB above which only the first and last MiB were read
    big.write_bytes(b"a" * size)
    a = weights_fingerprint(str(src))
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    os.utime(copy / "config.json", (1, 1))
    assert weights_fingerprint(str(copy)) == a
    (copy / "config.json").write_text('{"hidden_size": 9}')
    assert weights_fingerprint(str(copy)) != a
    hashes = FileHashes(tmp_path / "hashes.json")
    assert weights_fingerprint(str(src), hashes) == a
    with open(big, "r+b") as fh:  # one byte in the middle of the weights (not read before 2026-12-05)
        fh.seek(size // 2)
        fh.write(b"b")
    assert weights_fingerprint(str(src), hashes) != a
    assert weights_fingerprint("org/name") == "org/name"


def test_checkpoint_key_uses_the_quantize_environments_versions(demo_recipe_copy, tmp_path, monkeypatch):
    """Not a hard-coded 'llmcompressor==0.14.0.1': the versions the quantize interpreter really has (read
    here from its dist-info folders), and another quantize environment gives another key."""
    import glob
    import re

    import pytest

    qpy = ROOT / ".venv-quantize" / "bin" / "python"
    if not qpy.exists():
        pytest.skip("no .venv-quantize (scripts/setup.sh)")
    monkeypatch.setenv("SUITE_QUANTIZE_PYTHON", str(qpy))
    path = demo_recipe_copy()
    q = make_plan(load_recipe(path), tmp_path).variants[1].quantize
    (dist,) = glob.glob(str(ROOT / ".venv-quantize" / "lib" / "python*" / "site-packages" / "llmcompressor-*.dist-info"))
    assert q.provenance["quantizer"]["llmcompressor"] == re.search(r"llmcompressor-(.+)\.dist-info", dist).group(1)
    (ct,) = glob.glob(str(ROOT / ".venv-quantize" / "lib" / "python*" / "site-packages" / "compressed_tensors-*.dist-info"))
    assert q.provenance["quantizer"]["compressed-tensors"] == re.search(r"tensors-(.+)\.dist-info", ct).group(1)
    monkeypatch.setenv("SUITE_QUANTIZE_PYTHON", str(ROOT / ".venv" / "bin" / "python"))  # other versions there
    other = make_plan(load_recipe(path), tmp_path).variants[1].quantize
    assert other.key != q.key and other.provenance["quantizer"]["llmcompressor"] is None


def test_every_throughput_field_reaches_the_benchmark_config_or_is_named_as_not_passed():
    """ThroughputSpec -> BenchmarkConfig is an explicit mapping: a field added or renamed on either side
    fails here instead of being dropped silently (the planner used to copy the fields whose names matched)."""
    from suite.plan.configs import THROUGHPUT_NOT_PASSED, THROUGHPUT_TO_BENCHMARK
    from suite.recipe import ThroughputSpec
    from suite.records.benchmark import BenchmarkConfig

    assert set(ThroughputSpec.model_fields) == set(THROUGHPUT_TO_BENCHMARK) | set(THROUGHPUT_NOT_PASSED)
    assert not set(THROUGHPUT_TO_BENCHMARK) & set(THROUGHPUT_NOT_PASSED)
    assert set(THROUGHPUT_TO_BENCHMARK.values()) <= set(BenchmarkConfig.model_fields)
    # evaluate: eval.engine served; adaptive: throughput.adaptive_repetitions with the gates and the baseline
    set_by_planner = {"engine", "data_dir", "chat_template", "output_dir", "evaluate", "adaptive"}
    assert set(BenchmarkConfig.model_fields) == set(THROUGHPUT_TO_BENCHMARK.values()) | set_by_planner


def test_the_stage_registry_names_each_stage_once_and_its_entry_exists():
    """One StageSpec per stage; each entry 'module:function' is a module file of its subpackage (found, not
    imported: the parent never imports a stage module); a run's jobs follow run_order()."""
    import importlib.util

    from suite.stages.registry import ENGINE_CHECKS, SERVED_CHECK, STAGES, run_order

    # eval.engine_check's evaluate-check-<i> stages run after the main evaluations, before the benchmark; the served
    # check after the benchmark whose server scored the served evaluation
    assert run_order() == ("quantize", "kvcheck", "evaluate", *ENGINE_CHECKS, "benchmark", SERVED_CHECK)
    assert "sensitivity" in STAGES
    assert ENGINE_CHECKS == tuple(f"evaluate-check-{i}" for i in range(1, 5))
    for name, spec in STAGES.items():
        module, _, func = spec.entry.partition(":")
        assert spec.name == name and func == "run" and spec.environment in ("quantize", "serve")
        assert module.startswith("suite.stages.") and importlib.util.find_spec(module) is not None


def test_an_evaluation_made_under_other_batch_limits_than_the_plans_is_not_a_hit(demo_recipe_copy, tmp_path):
    """A run planned before ``EvaluateConfig.batch_limits`` existed scored with vLLM's own limits ('llm'); planned now,
    the compiling baseline gets 'serve'. The limits are in the evaluation's key, so the older result is not a hit and
    runs again under the plan's: every evaluation a resume keeps or runs pairs with the others under one setting."""
    from suite.orchestrate import store
    from suite.plan import keys
    from suite.records.evaluate import EvaluateResult
    from suite.runtime.envs import stage_env

    loaded = load_recipe(demo_recipe_copy(baseline__engine_args={}))  # a compiling baseline: planned 'serve'
    plan = make_plan(loaded, tmp_path / "run")
    vp = plan.variants[0]
    assert vp.evaluate.batch_limits == "serve"
    env = stage_env(plan.env)
    identity = keys.weights_fingerprint(vp.model_path)
    older = keys.evaluate_job_key(vp.evaluate.model_copy(update={"batch_limits": "llm"}), identity, env)
    folder = store.RunFolder(tmp_path / "run" / "variants" / vp.variant.name)
    made = EvaluateResult(scores=[], results_file="r.json", wall_s=1.0, engine_load_s=1.0)
    folder.put("evaluate", older, made)
    now = store.job_key(vp, "evaluate", None, env)
    assert now != older and folder.lookup("evaluate", now) is None
    folder.put("evaluate", now, made)
    assert folder.lookup("evaluate", now).cache_key == now


def test_the_hash_cache_sees_a_same_size_change_whose_old_mtime_was_put_back(tmp_path):
    """``rsync -t`` / ``cp -p`` / ``touch -d`` keep a changed file's size and mtime: the remembered hash must not be
    reused (a stale content key would give a cached evaluation of other weights). A file left alone is not read
    again."""
    import hashlib
    import os

    from suite.plan.keys import FileHashes

    f = tmp_path / "model.safetensors"
    f.write_bytes(b"A" * 4096)
    cache = FileHashes(tmp_path / "hashes.json")
    first = cache.sha256(f)
    cache.save()
    again = FileHashes(tmp_path / "hashes.json")
    assert again.sha256(f) == first and not again.dirty  # unchanged: from the cache, not read
    st = f.stat()
    f.write_bytes(b"B" * 4096)  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime put back
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_size == st.st_size
    assert again.sha256(f) == hashlib.sha256(b"B" * 4096).hexdigest() != first
    replaced = tmp_path / "other"
    replaced.write_bytes(b"C" * 4096)
    os.utime(replaced, ns=(st.st_atime_ns, st.st_mtime_ns))
    replaced.replace(f)  # a same-size, same-mtime file renamed onto the path
    assert again.sha256(f) == hashlib.sha256(b"C" * 4096).hexdigest()


def test_a_hub_models_revision_reaches_the_engines_and_the_evaluation_key(demo_recipe_copy, tmp_path):
    """``model.revision`` pins what the checkpoints are built from; the baseline is served and scored from it too
    (before, vLLM loaded the default branch for the baseline while the FP8 builds came from the pinned revision),
    and another revision is another evaluation cache key."""
    from suite.plan.keys import cache_key
    from suite.stages.benchmark.server import serve_command

    def baseline(revision):
        loaded = load_recipe(demo_recipe_copy(model__id="HuggingFaceTB/SmolLM2-135M-Instruct", model__revision=revision))
        return make_plan(loaded, tmp_path / f"run-{revision}").variants[0]

    a, b = baseline("abc123"), baseline("def456")
    assert a.evaluate.engine.engine_args["revision"] == "abc123" == a.benchmark.engine.engine_args["revision"]
    assert a.evaluate.engine.engine_args["tokenizer_revision"] == "abc123"  # lm-eval's own tokenizer
    cmd = serve_command(a.benchmark.engine, 8000, 1, 0)
    assert cmd[cmd.index("--revision") + 1] == "abc123"
    versions = {"vllm": "x"}
    assert cache_key(a.evaluate, "HuggingFaceTB/SmolLM2-135M-Instruct", versions) != \
        cache_key(b.evaluate, "HuggingFaceTB/SmolLM2-135M-Instruct", versions)
    quantized = make_plan(load_recipe(demo_recipe_copy(model__revision="abc123")), tmp_path / "run-local").variants[1]
    assert "revision" not in quantized.evaluate.engine.engine_args  # a local checkpoint has no hub revision


def test_an_org_name_shaped_folder_beside_the_recipe_is_a_local_model(demo_recipe_copy, tmp_path):
    """``model.id: models/my-finetune`` is a folder, not a hub id: its content keys its checkpoints (before, the
    name alone did, and a rewritten fine-tune kept them)."""
    import shutil

    folder = tmp_path / "models" / "my-finetune"  # the recipe copy is written to tmp_path
    folder.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "models" / "smollm2-135m-instruct" / f, folder / f)
    (folder / "model.safetensors").write_bytes(b"a" * 1024)
    loaded = load_recipe(demo_recipe_copy(model__id="models/my-finetune"))
    assert loaded.model_is_local() and loaded.model_path() == str(folder.resolve())
    key = make_plan(loaded, tmp_path / "run").variants[1].quantize.key
    (folder / "model.safetensors").write_bytes(b"b" * 1024)  # the fine-tune rewritten in place
    assert make_plan(loaded, tmp_path / "run2").variants[1].quantize.key != key
    assert not load_recipe(demo_recipe_copy(model__id="org/not-here")).model_is_local()


def test_the_data_digest_reads_through_symlinked_folders(tmp_path):
    """A data folder whose gsm8k is a link to elsewhere: a change there is a new digest (Path.rglob did not follow
    the link), and a link loop ends."""
    from suite.plan.keys import _tree_digest

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test.jsonl").write_text('{"q": 1}\n')
    data = tmp_path / "data"
    data.mkdir()
    (data / "gsm8k").symlink_to(elsewhere, target_is_directory=True)
    (data / "loop").symlink_to(data, target_is_directory=True)
    before = _tree_digest(data)
    (elsewhere / "test.jsonl").write_text('{"q": 2}\n')
    assert _tree_digest(data) != before
