"""`suite validate` refuses each class of malformed recipe before any model loads, and every refusal
names the file and the field and ends with a fix (`FILE: FIELD: what (fix: ...)`).

Engine arguments are checked against the EngineArgs of the serve environment's vLLM, asked of its
interpreter once (cached on disk): the first test that needs it pays ~15 s on 2 cores, the rest read
the cache.
"""

from __future__ import annotations

import math

import pytest
import yaml

from conftest import run_cli
from suite.runtime.errors import SuiteError
from suite.recipe import load_recipe


def refusals(path) -> list[str]:
    with pytest.raises(SuiteError) as e:
        load_recipe(path)
    msgs = [str(p) for p in e.value.problems]
    for m in msgs:
        assert m.startswith(str(path)) and "(fix: " in m and m.endswith(")"), m
    return msgs


# (changes to the demo recipe, a fragment every refusal must contain): the classes issue 13 found
# accepted, then numbers the schema let through (a YAML `true` or `.inf` where a number belongs)
MALFORMED = {
    "engine-arg typo": ({"baseline__engine_args": {"enforce_eagre": True}},
                        "baseline.engine_args.enforce_eagre: not an engine argument of vLLM"),
    "engine-arg type": ({"variants__0__engine_args": {"max_num_seqs": "many"}},
                        "variants[0].engine_args.max_num_seqs: vLLM"),
    "engine-arg choice": ({"baseline__engine_args": {"distributed_executor_backend": "uni", "scheduling_policy": "fifo"}},
                          "baseline.engine_args.scheduling_policy: 'fifo' is not one of"),
    "engine-arg set by the suite": ({"baseline__engine_args": {"dtype": "float16"}},
                                    "baseline.engine_args.dtype: set by the suite"),
    "request rate 0": ({"throughput__request_rates": [0]}, "throughput.request_rates: [0] = 0"),
    "request rate -1": ({"throughput__request_rates": [-1]}, "throughput.request_rates: [0] = -1"),
    "request rate nan": ({"throughput__request_rates": [math.nan]}, "throughput.request_rates"),
    "request rate 'fast'": ({"throughput__request_rates": ["fast"]}, "throughput.request_rates"),
    "concurrency -4": ({"throughput__concurrencies": [-4]}, "throughput.concurrencies[0]: must be >= 1"),
    "concurrency 0": ({"throughput__request_rates": [], "throughput__concurrencies": [0]},
                      "throughput.concurrencies[0]: must be >= 1"),
    "slo without limits": ({"throughput__slo": {"start_rate": 4}}, "throughput: slo sets no latency limit"),
    "slo min_rate > max_rate": ({"throughput__slo": {"ttft_p99_ms": 200, "min_rate": 64, "max_rate": 8,
                                                     "start_rate": 16}}, "slo.min_rate 64 is above slo.max_rate 8"),
    "slo start outside": ({"throughput__slo": {"ttft_p99_ms": 200, "start_rate": 512}}, "slo.start_rate 512"),
    "slo cap below a probe": ({"throughput__slo": {"ttft_p99_ms": 200, "num_prompts": 300, "max_num_prompts": 100}},
                              "slo.max_num_prompts 100 is below the 300 prompts of a probe"),
    "slo infinite limit": ({"throughput__slo": {"ttft_p99_ms": math.inf}}, "ttft_p99_ms = inf"),
    "limit 1.5": ({"eval__tasks__1__limit": 1.5}, "eval.tasks[1].limit: 1.5 is neither a row count"),
    "eval limit 2.5": ({"eval__limit": 2.5}, "eval.limit: 2.5"),
    "limit 0": ({"eval__tasks__1__limit": 0}, "eval.tasks[1].limit"),
    "max_api_server_count < api_server_count": ({"throughput__api_server_count": 4, "throughput__max_api_server_count": 2},
                                                "max_api_server_count 2 is below api_server_count 4"),
    "repetitions 0": ({"throughput__repetitions": 0}, "throughput.repetitions: must be >= 1"),
    "repetitions true": ({"throughput__repetitions": True}, "throughput.repetitions: must be an integer"),
    "num_prompts 2.5": ({"throughput__num_prompts": 2.5}, "throughput.num_prompts: must be an integer"),
    "warmup -1": ({"throughput__warmup_requests": -1}, "throughput.warmup_requests: must be >= 0"),
    "metrics interval inf": ({"throughput__metrics_interval_s": math.inf}, "throughput.metrics_interval_s: must be a finite"),
    "workload longer than the model": ({"throughput__input_len": 2000}, "exceed model.max_model_len 2048"),
    "max_gen_toks >= max_model_len": ({"eval__max_gen_toks": 4096}, "eval.max_gen_toks 4096 leaves no room"),
    "batch_size 0": ({"eval__batch_size": 0}, "eval.batch_size: must be >= 1 or one of 'auto'"),
    "negative seed": ({"eval__seed": -1}, "eval.seed: must be >= 0"),
    "num_fewshot -1": ({"eval__num_fewshot": -1}, "eval.num_fewshot: must be >= 0"),
    "calibration samples 0": ({"variants__0__quantization__num_calibration_samples": 0},
                              "variants[0].quantization.num_calibration_samples: must be > 0"),
    "calibration weight inf": ({"variants__0__quantization__calibration": [{"set": "chat-demo", "weight": math.inf}]},
                               "variants[0].quantization.calibration[0].weight: must be a finite number"),
    "gate drop negative": ({"gates__default_max_drop": -0.1}, "gates.default_max_drop: must be >= 0"),
    "gate drop nan": ({"gates__max_drop": {"suite_gsm8k": math.nan}}, "gates.max_drop.suite_gsm8k: must be a finite"),
    "gate throughput inf": ({"gates__min_throughput_gain": math.inf}, "gates.min_throughput_gain: must be a finite"),
    "gate relative drop > 1": ({"gates__default_max_relative_drop": 2}, "gates.default_max_relative_drop: must be <= 1"),
    "secret in runtime.env": ({"runtime__env__HF_TOKEN": "hf_abcdefgh"}, "runtime.env: HF_TOKEN looks like a credential"),
    "secret password": ({"runtime__env__MLFLOW_TRACKING_PASSWORD": "hunter2"}, "MLFLOW_TRACKING_PASSWORD looks like"),
    "secret api key": ({"runtime__env__OPENAI_API_KEY": "sk-1"}, "OPENAI_API_KEY looks like a credential"),
    "secret access key": ({"runtime__env__AWS_SECRET_ACCESS_KEY": "x"}, "AWS_SECRET_ACCESS_KEY looks like"),
    "duplicate task": ({"eval__tasks": ["suite_gsm8k", "suite_gsm8k"]}, "task(s) listed twice: suite_gsm8k"),
    "duplicate request rate": ({"throughput__request_rates": [4, 4]}, "request_rates lists a load point twice"),
    "secret passwd": ({"runtime__env__MYSQL_PASSWD": "x"}, "MYSQL_PASSWD looks like a credential"),
    "secret credentials file": ({"runtime__env__GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}, "looks like a credential"),
    "password in a URL": ({"runtime__env__MLFLOW_TRACKING_URI": "http://admin:hunter2@host:5000"},
                          "MLFLOW_TRACKING_URI holds a URL with a password"),
    "unknown key": ({"throughput__repetitons": 2}, "throughput.repetitons: unknown key; did you mean 'repetitions'?"),
    "bad literal": ({"model__dtype": "bf16"}, "model.dtype: must be one of 'bfloat16', 'float16' or 'auto'"),
    "bad name": ({"variants__0__name": "fp8 kv"}, "variants[0].name: not a valid name"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_recipe_is_refused_with_a_fix(case, demo_recipe_copy):
    changes, fragment = MALFORMED[case]
    msgs = refusals(demo_recipe_copy(**changes))
    assert any(fragment in m for m in msgs), msgs


def test_secrets_are_never_printed(demo_recipe_copy):
    path = demo_recipe_copy(runtime__env__HF_TOKEN="hf_s3cr3tvalue", runtime__env__MY_SECRET=12345)
    for cmd in ("validate", "plan"):
        res = run_cli(cmd, str(path))
        assert res.returncode == 2 and "HF_TOKEN" in res.stderr and "Traceback" not in res.stderr
        assert "hf_s3cr3tvalue" not in res.stdout + res.stderr and "12345" not in res.stdout + res.stderr


def test_engine_arg_typo_names_the_closest_valid_field(demo_recipe_copy):
    (msg,) = refusals(demo_recipe_copy(baseline__engine_args={"enforce_eagre": True}))
    assert "did you mean 'enforce_eager'?" in msg and "fix: write 'enforce_eager'" in msg


def test_output_dir_that_is_a_file_or_unwritable(demo_recipe_copy, tmp_path):
    afile = tmp_path / "runs-file"
    afile.write_text("x")
    (msg,) = refusals(demo_recipe_copy(output_dir=str(afile)))
    assert "output_dir" in msg and "is a file, not a folder" in msg
    (msg,) = refusals(demo_recipe_copy(output_dir=str(afile / "below")))
    assert "cannot be made" in msg and "is a file" in msg
    (msg,) = refusals(demo_recipe_copy(output_dir="/proc/suite-runs"))  # a system folder (and not writable)
    assert "output_dir" in msg and "is a system folder (/proc)" in msg
    load_recipe(demo_recipe_copy(output_dir=str(tmp_path / "new" / "runs")))  # creatable: fine
    assert not (tmp_path / "new").exists()  # and nothing was made by validating


def test_duplicate_yaml_keys_are_refused_with_their_lines(demo_recipe_copy):
    path = demo_recipe_copy()
    text = path.read_text().replace("name: demo-cpu\n", "name: demo-cpu\nname: other\n", 1)
    path.write_text(text)
    (msg,) = refusals(path)
    line = text.splitlines().index("name: other") + 1
    assert f"key 'name' appears twice (lines {line - 1} and {line})" in msg and f": line {line}:" in msg


def test_duplicate_keys_on_one_line_are_refused():
    """A flow mapping repeating a key on one line (`{a: 1, a: 2}`) silently weakened the gates."""
    from suite.runtime.errors import SuiteError
    from suite.recipe import load_yaml

    for text in ("gates: {default_max_drop: 0.01, min_throughput_gain: 1.5, default_max_drop: 1.0}\n",
                 "engine_args: {enforce_eager: true, enforce_eager: false}\n"):
        with pytest.raises(SuiteError, match="appears twice"):
            load_yaml(text, "x.yaml")


def test_yaml_merge_keys_are_not_duplicates():
    from suite.recipe import load_yaml

    data = load_yaml("base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\n", "x.yaml")
    assert data["other"] == {"a": 1, "b": 3}


def test_non_utf8_and_non_mapping_recipes_are_clean_errors(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: d\u00e9mo\n".encode("latin-1"))
    res = run_cli("validate", str(bad))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{bad}: not UTF-8 text" in res.stderr and "(fix: save the file as UTF-8)" in res.stderr
    for text, what in (("- a\n- b\n", "not list"), ("", "not an empty file"), ("42\n", "not int")):
        path = tmp_path / "r.yaml"
        path.write_text(text)
        (msg,) = refusals(path)
        assert "a recipe is a YAML mapping" in msg and what in msg


def test_list_valued_engine_args_are_accepted_and_typed_as_vllm_takes_them(demo_recipe_copy, tmp_path):
    from suite.plan.planner import make_plan

    path = demo_recipe_copy(baseline__engine_args={"enforce_eager": True, "kv_cache_dtype_skip_layers": [0, 1]})
    plan = make_plan(load_recipe(path), tmp_path / "run")
    engine = plan.variants[0].evaluate.engine
    assert engine.engine_args["kv_cache_dtype_skip_layers"] == ["0", "1"]  # list[str] in EngineArgs
    assert plan.variants[0].benchmark.engine.engine_args == engine.engine_args


def test_engine_flags_are_what_vllms_own_parser_and_config_take(demo_recipe_copy, tmp_path):
    """The flags engine_flags writes, parsed by the installed vLLM's CLI parser, give the same values
    as the typed arguments LLM(...) gets, and vLLM's CacheConfig accepts them."""
    import json
    import subprocess

    from suite.stages.benchmark.server import engine_flags
    from suite.runtime.envs import _probe_env, serve_python
    from suite.plan.planner import make_plan

    args = {"enforce_eager": True, "enable_prefix_caching": False, "disable_log_stats": False,
            "kv_cache_dtype_skip_layers": [0, 1], "compilation_config": {"mode": 0}, "max_num_seqs": 8}
    plan = make_plan(load_recipe(demo_recipe_copy(baseline__engine_args=args)), tmp_path / "run")
    engine = plan.variants[0].benchmark.engine
    flags = engine_flags(engine)
    i = flags.index("--kv-cache-dtype-skip-layers")
    assert flags[i + 1:i + 3] == ["0", "1"]  # nargs='+': separate values, not one JSON string
    assert "--no-enable-prefix-caching" in flags and "--disable-log-stats" not in flags  # store_true: left out
    code = """
import json, sys
from suite.runtime.vllm_alias import install_vllm_version_alias
install_vllm_version_alias()
from vllm.engine.arg_utils import EngineArgs
from vllm.config import CacheConfig
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
EngineArgs.add_cli_args(p)
ns = p.parse_args(["--model", "m", *json.loads(sys.argv[1])])
typed = json.loads(sys.argv[2])
out = {k: getattr(ns, k) for k in typed}
out["compilation_config"] = ns.compilation_config.mode
CacheConfig(kv_cache_dtype_skip_layers=typed["kv_cache_dtype_skip_layers"])
print("ANSWER" + json.dumps(out))
"""
    res = subprocess.run([serve_python(), "-c", code, json.dumps(flags), json.dumps(engine.engine_args)],
                         capture_output=True, text=True, env=_probe_env(), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    parsed = json.loads(res.stdout.split("ANSWER", 1)[1])
    assert parsed["compilation_config"] == 0
    parsed.pop("compilation_config")
    assert parsed == {k: v for k, v in engine.engine_args.items() if k != "compilation_config"}


def test_validation_imports_no_stage_dependency(demo_recipe_copy):
    """Engine arguments and a standard lm-eval task name are checked by asking the serve interpreter:
    the parent imports neither vLLM nor lm-eval nor torch."""
    import subprocess
    import sys

    path = demo_recipe_copy(**{"eval__tasks__0__name": "gsm8k", "baseline__engine_args": {"max_num_seqs": 4}})
    code = ("import sys; from suite.recipe import load_recipe; from suite.plan.planner import make_plan; from pathlib import Path;"
            f"make_plan(load_recipe({str(path)!r}), Path({str(path.parent / 'run')!r}));"
            "print(sorted(m for m in ('vllm', 'lm_eval', 'torch', 'transformers', 'llmcompressor') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_standard_task_is_refused_by_the_serve_environments_lm_eval(demo_recipe_copy):
    (msg,) = refusals(demo_recipe_copy(eval__tasks__0__name="gsm8k_nonexistent_task"))
    assert "eval.tasks[0].name: unknown task 'gsm8k_nonexistent_task'" in msg


def test_every_schema_refusal_has_a_fix():
    """Each pydantic error type the schema can raise comes out with a fix, none as bare pydantic text."""
    from pydantic import ValidationError

    from suite.recipe import Recipe, validation_problems

    from conftest import DEMO_RECIPE

    base = yaml.safe_load(DEMO_RECIPE.read_text())
    broken = {**base, "extra": 1, "model": {"dtype": 3, "max_model_len": "long"},
              "variants": [], "eval": {"tasks": "x", "limit": True, "batch_size": "big", "seed": 1.5}}
    with pytest.raises(ValidationError) as e:
        Recipe.model_validate(broken)
    problems = validation_problems("r.yaml", e.value)
    assert len(problems) >= 7
    for p in problems:
        assert p.fix and "Input should be" not in p.message and "Value error" not in p.message, str(p)


def test_perplexity_tasks_are_accepted_and_their_gate_needs_one(demo_recipe_copy):
    """suite_longppl's metric is lower-is-better: accepted as a perplexity task (paired by document), and
    gates.max_perplexity_increase without any perplexity task is refused before any model loads."""
    tasks = [{"name": "suite_mmlu", "limit": 1, "num_fewshot": 0}]
    load_recipe(demo_recipe_copy(eval__tasks=tasks + [{"name": "suite_longppl", "limit": 2}],
                                 gates__max_perplexity_increase=0.2))  # no refusal
    assert any("gates.max_perplexity_increase" in p and "no perplexity task" in p
               for p in refusals(demo_recipe_copy(eval__tasks=tasks, gates__max_perplexity_increase=0.2)))
