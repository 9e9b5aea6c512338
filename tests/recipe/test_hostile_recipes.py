"""Hostile recipes (issue 40, "Recipes that get through"): `suite validate` exits 2 on each, before any model
loads, with one line per problem that names the field (`error: FILE: FIELD: what (fix: ...)`).

The demo model (SmolLM2-135M: 30 decoder layers, 8192 positions, tied lm_head) is what the model-aware checks
read: its config.json and its safetensors header, never its weights.
"""

from __future__ import annotations

import pytest

from suite import cli
from suite.runtime.envs import REPO_ROOT

EVIL = "/tmp/evil-payload.so"
BIG = 10**9

# case -> (changes to the demo recipe, the field the error names, a fragment of its message)
HOSTILE = {
    "LD_PRELOAD": ({"runtime__env__LD_PRELOAD": EVIL}, "runtime.env", "LD_PRELOAD controls the dynamic loader"),
    "LD_LIBRARY_PATH": ({"runtime__env__LD_LIBRARY_PATH": "/tmp"}, "runtime.env", "LD_LIBRARY_PATH controls"),
    "PYTHONPATH": ({"runtime__env__PYTHONPATH": "/tmp"}, "runtime.env", "PYTHONPATH controls the stage interpreters"),
    "PYTHONSTARTUP": ({"runtime__env__PYTHONSTARTUP": EVIL}, "runtime.env", "PYTHONSTARTUP controls"),
    "PYTHONHOME": ({"runtime__env__PYTHONHOME": "/tmp"}, "runtime.env", "PYTHONHOME controls"),
    "PYTHONINSPECT": ({"runtime__env__PYTHONINSPECT": "1"}, "runtime.env", "PYTHONINSPECT controls"),
    "PATH": ({"runtime__env__PATH": "/tmp"}, "runtime.env", "PATH decides which programs"),
    "lower-case path": ({"runtime__env__Path": "/tmp"}, "runtime.env", "Path decides which programs"),
    "VLLM_PLUGINS": ({"runtime__env__VLLM_PLUGINS": "evil"}, "runtime.env", "VLLM_PLUGINS loads vLLM plugins"),
    "MLFLOW_TRACKING_URI": ({"runtime__env__MLFLOW_TRACKING_URI": "http://h:5000"}, "runtime.env",
                            "tracking section"),
    "SUITE_RUN_LOCK": ({"runtime__env__SUITE_RUN_LOCK": "x"}, "runtime.env", "configures the suite itself"),
    "SUITE_ALLOW_CODE_EXECUTION": ({"runtime__env__SUITE_ALLOW_CODE_EXECUTION": "1"}, "runtime.env",
                                   "eval.allow_code_execution"),
    "SUITE_CODE_SANDBOX": ({"runtime__env__SUITE_CODE_SANDBOX": "process"}, "runtime.env", "eval.code_sandbox"),
    "NUL in a value": ({"runtime__env__MY_FLAG": "a\0b"}, "runtime.env", "NUL byte"),
    "newline in a value": ({"runtime__env__MY_FLAG": "a\nexport X=1"}, "runtime.env", "line break"),
    "utilization 0": ({"baseline__engine_args__gpu_memory_utilization": 0}, "baseline.engine_args.gpu_memory_utilization",
                      "outside vLLM's range"),
    "utilization 1.5": ({"variants__0__engine_args__gpu_memory_utilization": 1.5},
                        "variants[0].engine_args.gpu_memory_utilization", "outside vLLM's range (0.0, 1.0]"),
    "eval utilization -1": ({"eval__engine_args": {"gpu_memory_utilization": -1.0}},
                            "eval.engine_args.gpu_memory_utilization", "outside"),
    "tensor_parallel_size 0": ({"baseline__engine_args__tensor_parallel_size": 0},
                               "baseline.engine_args.tensor_parallel_size", ">= 1"),
    "tensor_parallel_size -2": ({"variants__0__engine_args__tensor_parallel_size": -2},
                                "variants[0].engine_args.tensor_parallel_size", ">= 1"),
    "pipeline_parallel_size 0": ({"baseline__engine_args__pipeline_parallel_size": 0},
                                 "baseline.engine_args.pipeline_parallel_size", ">= 1"),
    "data_parallel_size 0": ({"baseline__engine_args__data_parallel_size": 0},
                             "baseline.engine_args.data_parallel_size", ">= 1"),
    "max_model_len 1e12": ({"model__max_model_len": 10**12}, "model.max_model_len", "above the model's 8192 positions"),
    "max_model_len beyond the model": ({"model__max_model_len": 8193}, "model.max_model_len", "8192"),
    "repetitions 1e9": ({"throughput__repetitions": BIG}, "throughput.repetitions", "<= 100"),
    "num_prompts 1e9": ({"throughput__num_prompts": BIG}, "throughput.num_prompts", "<= 1000000"),
    "calibration samples 1e9": ({"variants__0__quantization__num_calibration_samples": BIG},
                                "variants[0].quantization.num_calibration_samples", "<= 100000"),
    "invalid regex": ({"variants__0__quantization__ignore": ["re:[("]}, "variants[0].quantization.ignore",
                      "not a valid regular expression"),
    "first: 999": ({"variants__0__quantization__ignore": ["lm_head", "first: 999"]},
                   "variants[0].quantization.ignore[1]", "the model has 30 decoder layers"),
    "last: 0": ({"variants__0__quantization__ignore": ["last: 0"]}, "variants[0].quantization.ignore[0]",
                "30 decoder layers"),
    "regex matching nothing": ({"variants__0__quantization__ignore": ["re:.*layers\\.\\d+\\.mlp\\.gate_prj"]},
                               "variants[0].quantization.ignore[0]", "matches no module of the model"),
    "name matching nothing": ({"variants__0__quantization__ignore": ["lm_haed"]},
                              "variants[0].quantization.ignore[0]", "closest: lm_head"),
    "kv_skip_layers out of range": ({"variants__0__kv_skip_layers": [999]}, "variants[0].kv_skip_layers",
                                    "out of range"),
    "raw skip layers out of range": ({"baseline__engine_args__kv_cache_dtype_skip_layers": [40]},
                                     "baseline.engine_args.kv_cache_dtype_skip_layers", "out of range"),
    "names differing by case": ({"variants__0__name": "BF16"}, "", "unique regardless of case; repeated: BF16, bf16"),
    "300-character name": ({"variants__0__name": "v" * 300}, "variants[0].name", "at most 64 characters"),
    "output_dir /": ({"output_dir": "/"}, "output_dir", "is the root folder"),
    "output_dir project root": ({"output_dir": str(REPO_ROOT)}, "output_dir", "project's root folder"),
    "output_dir /etc": ({"output_dir": "/etc/suite-runs"}, "output_dir", "system folder (/etc)"),
    "output_dir /usr/local": ({"output_dir": "/usr/local/runs"}, "output_dir", "system folder (/usr)"),
    "output_dir /var/lib": ({"output_dir": "/var/lib/runs"}, "output_dir", "system folder (/var)"),
    "missing model folder": ({"model__id": "./no-such-model"}, "model.id", "no model folder with config.json at /"),
    "missing folder shaped like a hub id": ({"model__id": "models/no-such-model"}, "model.id",
                                            "so this is no hub id"),
    "password in the tracking URI": ({"tracking": {"uri": "http://admin:hunter2@mlflow:5000"}}, "tracking.uri",
                                     "a password"),
    "token in the tracking URI": ({"tracking": {"uri": "https://mlflow:5000/?access_token=hunter2"}}, "tracking.uri",
                                  "a credential in the query string"),
    "password in the Ray address": ({"executor": {"kind": "ray", "address": "ray://u:hunter2@head:10001"}},
                                    "executor.address", "a password"),
    "password in the model URL": ({"model__id": "https://user:hunter2@hub.example/m"}, "model.id", "a password"),
    # runtime.env is an allow list: a name outside it, and VLLM_* names that take a path or load code
    "unlisted env name (proxy)": ({"runtime__env__HTTPS_PROXY": "http://h:3128"}, "runtime.env",
                                  "HTTPS_PROXY is not on the list a recipe may set"),
    "unlisted env name (cache home)": ({"runtime__env__XDG_CACHE_HOME": "/tmp"}, "runtime.env", "not on the list"),
    "VLLM_ name taking a path": ({"runtime__env__VLLM_LOGGING_CONFIG_PATH": EVIL}, "runtime.env",
                                "VLLM_LOGGING_CONFIG_PATH takes a path"),
    "VLLM_CACHE_ROOT": ({"runtime__env__VLLM_CACHE_ROOT": "/tmp"}, "runtime.env", "takes a path"),
    "VLLM_USE_MODELSCOPE": ({"runtime__env__VLLM_USE_MODELSCOPE": "1"}, "runtime.env", "ModelScope"),
    "VLLM_ALLOW_INSECURE_SERIALIZATION": ({"runtime__env__VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}, "runtime.env",
                                          "pickle"),
    "credential URL in an allowed name's value": ({"runtime__env__VLLM_BUILD_URL": "https://h/x?access_token=hunter2"},
                                                  "runtime.env", "a URI that holds a credential"),
    # credentials in a URI in any position, percent-encoded too
    "token in the tracking URI fragment": ({"tracking": {"uri": "http://mlflow:5000/#access_token=hunter2"}},
                                           "tracking.uri", "a credential in the fragment"),
    "password as a path parameter": ({"tracking": {"uri": "http://mlflow:5000/;password=hunter2"}}, "tracking.uri",
                                     "a credential in a path parameter"),
    "token-shaped value under a harmless key": ({"tracking": {"uri": "http://mlflow:5000/?x=hf_hunter2hunter2hunter2"}},
                                                "tracking.uri", "a credential in the query string"),
    "random-looking value": ({"tracking": {"uri": "http://mlflow:5000/?x=hunter2Q8xLp3ZrT7vWk9MnB4"}},
                             "tracking.uri", "a credential in the query string"),
    "JWT in the query": ({"tracking": {"uri": "http://mlflow:5000/?x=eyJhbGciOiJIUzI1.eyJzdWIiOiJ9.hunter2"}},
                         "tracking.uri", "a credential in the query string"),
    "percent-encoded key": ({"tracking": {"uri": "http://mlflow:5000/?%74oken=hunter2"}}, "tracking.uri",
                            "a credential in the query string"),
    "percent-encoded query": ({"tracking": {"uri": "http://mlflow:5000/%3Ftoken%3Dhunter2"}}, "tracking.uri",
                              "a credential"),
    "token as a Ray address user": ({"executor": {"kind": "ray", "address": "ray://ghp_hunter2hunter2hunter2@head:1"}},
                                    "executor.address", "a token as the user name"),
    "token in the model URL's query": ({"model__id": "https://hub.example/m?x=ghp_hunter2hunter2hunter2"}, "model.id",
                                       "a credential in the query string"),
    "output_dir inside the checkout": ({"output_dir": str(REPO_ROOT / "suite" / "runs")}, "output_dir",
                                       "inside the project's checkout"),
    "output_dir in the checkout's docs": ({"output_dir": str(REPO_ROOT / "docs")}, "output_dir",
                                          "only its runs/ folder"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_recipe_is_refused_naming_the_field(case, demo_recipe_copy, tmp_path, capsys):
    changes, field, fragment = HOSTILE[case]
    (tmp_path / "models").mkdir()  # a folder beside the recipe, for the hub-id-shaped missing folder
    path = demo_recipe_copy(**changes)
    rc = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert lines and all("(fix: " in ln and ln.endswith(")") for ln in lines), err
    assert any(ln.startswith(f"error: {path}: {field}:" if field else f"error: {path}: ") and fragment in ln
               for ln in lines), err
    assert "Traceback" not in err and EVIL not in err and "hunter2" not in err  # nothing secret is echoed


def test_the_demo_recipe_and_the_switches_vllm_defines_stay_allowed(demo_recipe_copy, capsys):
    """VLLM_* switches (batch invariance) and ordinary values pass; ignore by a module's last part and an 're:'
    pattern that matches pass; engine values inside vLLM's ranges pass."""
    path = demo_recipe_copy(runtime__env__VLLM_BATCH_INVARIANT="1", runtime__env__OMP_NUM_THREADS="2",
                            variants__0__quantization__ignore=["lm_head", "re:.*layers\\.0\\.mlp.*", "q_proj",
                                                               "first: 2", "LlamaDecoderLayer"],
                            baseline__engine_args__gpu_memory_utilization=1.0, model__max_model_len=8192)
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


# every runtime.env name the repository's recipes, studies and tests set: the allow list keeps them
REPO_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "VLLM_BATCH_INVARIANT": "1", "VLLM_ATTENTION_BACKEND": "FLASHINFER",
            "VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
            "CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "WARN"}


def test_the_env_names_the_repository_uses_stay_allowed(demo_recipe_copy, capsys):
    path = demo_recipe_copy(runtime__env=REPO_ENV)
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_the_checkouts_runs_folder_stays_allowed(demo_recipe_copy, capsys):
    """The repository's recipes say output_dir: ../runs, the checkout's runs/ (ignored by git): the README's demo
    command writes there, so it is the one folder inside the checkout a run folder may go in."""
    for out in (REPO_ROOT / "runs", REPO_ROOT / "runs" / "team-a"):
        path = demo_recipe_copy(output_dir=str(out))
        assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("uri", ["http://mlflow:5000", "https://mlflow.example.com/?experiment=my_experiment_2024",
                                 "sqlite:///runs/mlflow.db", "file:///tmp/mlruns", "databricks://profile"])
def test_ordinary_tracking_uris_stay_allowed(uri, demo_recipe_copy, capsys):
    path = demo_recipe_copy(tracking={"uri": uri})
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err
