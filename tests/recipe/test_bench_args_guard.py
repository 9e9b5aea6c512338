"""What is measured belongs to the suite (issue 47 part 1): throughput.bench_args are read the way `vllm bench serve`'s
parser reads the argv they are spliced into, so no key or value can change the target, the arrival process, the
prompts or the result files; the argv each repetition ran is recorded, and `suite gate` refuses one that disagrees
with the benchmark's config."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import build_gated_run, needs_demo_model, run_gate
from suite import cli
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.records.bench_argv import argv_problem
from suite.stages.benchmark.points import bench_command

# case -> (bench_args, a fragment of the one error line)
HOSTILE = {
    "flag spliced through a list": ({"metadata": ["a=b", "--base-url", "http://10.1.2.3:80"]}, "would be read by vllm"),
    "rate spliced through a label": ({"label": ["x", "--request-rate", "0.5", "--num-prompts", "1"]},
                                     "would be read by vllm"),
    "a lone '--'": ({"label": "--"}, "would be read by vllm"),
    "a value like -O3": ({"label": "-O3"}, "would be read by vllm"),
    "vLLM's input_len alias": ({"input_len": 8}, "use throughput.input_len"),
    "vLLM's output_len alias": ({"output_len": 8}, "use throughput.output_len"),
    "ramp-up": ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 1}, "use throughput.request_rates"),
    "burstiness": ({"burstiness": 0.1}, "how requests arrive"),
    "an owned flag's prefix": ({"request_r": 0.5}, "reads it as --request-rate"),
    "a prefix of a target flag": ({"base_u": "http://10.1.2.3:80"}, "reads it as --base-url"),
    "host": ({"host": "10.1.2.3"}, "loads the server it started itself"),
    "port": ({"port": 80}, "loads the server it started itself"),
    "endpoint": ({"endpoint": "/v1/chat/completions"}, "loads the server it started itself"),
    "random length family": ({"random_range_ratio": 0.9}, "use throughput.workload"),
    "another dataset's output length": ({"hf_output_len": 4}, "use throughput.output_len"),
    "save detailed": ({"save_detailed": True}, "result file itself"),
    "result dir": ({"result_dir": "/tmp/x"}, "result file itself"),
    "extra_body": ({"extra_body": '{"max_tokens": 1}'}, "rewrites every request's body"),
    "a key with '='": ({"label=x": "y"}, "is not an option name"),
    "a key with a dot": ({"label.x": "y"}, "is not an option name"),
    "an empty list": ({"goodput": []}, "an empty list"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_bench_args_entry_that_changes_what_is_measured_is_refused(case, demo_recipe_copy, capsys):
    bench_args, fragment = HOSTILE[case]
    path = demo_recipe_copy(throughput__bench_args=bench_args)
    rc = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert rc == 2 and len(lines) == 1 and fragment in lines[0] and "throughput.bench_args" in lines[0], err
    assert "Traceback" not in err and "10.1.2.3" not in err


# read with the serve environment's own parser (its option list, cached): abbreviations and value counts
PARSED = {
    "an abbreviation of a harmless option": ({"temp": 0.5}, "throughput.bench_args.temp: argparse would read it as "
                                             "--temperature"),
    "two values for a one-value option": ({"label": ["a", "b"]}, "takes 1 value(s); got 2"),
    "the negative spelling of an owned option": ({"no_self_timed": True}, "how requests arrive"),
}


@needs_demo_model()
@pytest.mark.parametrize("case", list(PARSED))
def test_bench_args_are_read_as_the_parser_reads_them(case, demo_recipe_copy, capsys):
    bench_args, fragment = PARSED[case]
    rc = cli.main(["validate", str(demo_recipe_copy(throughput__bench_args=bench_args))])
    err = capsys.readouterr().err
    assert rc == 2 and fragment in err and "Traceback" not in err, err


@needs_demo_model()
def test_options_that_leave_the_measurement_alone_stay_allowed(demo_recipe_copy, capsys):
    path = demo_recipe_copy(throughput__bench_args={"goodput": ["ttft:200", "tpot:50"], "metric_percentiles": "90,99",
                                                    "temperature": -0.0, "label": "team-a", "metadata": ["a=b", "c=-1"]})
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


@needs_demo_model()
def test_a_recorded_argv_must_be_what_the_config_asks_for(demo_recipe_copy, tmp_path):
    path = demo_recipe_copy(throughput__bench_args={"goodput": ["ttft:200"], "label": "team-a"})
    cfg = make_plan(load_recipe(path), tmp_path / "run").variants[1].benchmark
    rate = cfg.request_rates[0]
    argv = bench_command(cfg, 8000, rate, None, tmp_path, "out.json")
    argv = argv[argv.index("serve") + 1:]
    assert argv_problem(argv, cfg, rate, None) is None
    swap = lambda flag, value: [value if i and argv[i - 1] == flag else a for i, a in enumerate(argv)]  # noqa: E731
    forged = {
        "another host": swap("--base-url", "http://10.1.2.3:8000"),
        "another rate": swap("--request-rate", "0.5"),
        "fewer prompts": swap("--num-prompts", "1"),
        "another input length": swap("--random-input-len", "8"),
        "an added flag": argv + ["--burstiness", "0.1"],
        "a repeated flag": argv + ["--request-rate", "0.5"],
        "an abbreviation": argv + ["--request-r", "0.5"],
        "a bench_args value changed": swap("--label", "other"),
        "a bench_args entry dropped": [a for i, a in enumerate(argv) if a != "--goodput" and argv[i - 1] != "--goodput"],
        "ignore_eos dropped": [a for a in argv if a != "--ignore-eos"],
    }
    for what, bad in forged.items():
        assert argv_problem(bad, cfg, rate, None) is not None, what
    assert argv_problem(argv, cfg, 0.5, None) is not None  # a rate the config does not ask for


def _with_argv(s: dict, run, argv_of) -> dict:
    """The summary ``s`` with every repetition row recording ``argv_of(variant)``, and each variant's benchmark config
    written where the run keeps it."""
    import hashlib

    plan = json.loads((run / "plan.json").read_text())
    for v in s["variants"]:
        vdir = run / "variants" / v["name"]
        vdir.mkdir(parents=True, exist_ok=True)
        (vdir / "benchmark.config.json").write_text(json.dumps(CONFIG))
        # the config is the job's, as a run leaves it: planned, and the result stamped with its sha256
        plan["variants"][v["name"]]["benchmark"] = CONFIG
        sha = hashlib.sha256((vdir / "benchmark.config.json").read_bytes()).hexdigest()
        result = json.loads((vdir / "benchmark.result.json").read_text())
        result["job"]["config_sha256"] = v["stages"]["benchmark"]["job"]["config_sha256"] = sha
        for p in [*v["stages"]["benchmark"]["points"], *result["points"]]:  # the stage record (judged) and the summary (a cache)
            p["request_rate"] = "inf"
            for r in p["repetitions"]:
                r["argv"] = argv_of(v["name"])
        (vdir / "benchmark.result.json").write_text(json.dumps(result))
    (run / "plan.json").write_text(json.dumps(plan))
    return s


CONFIG = {"engine": {"model": "/m"}, "input_len": 8, "output_len": 4, "num_prompts": 4, "request_rates": ["inf"],
          "output_dir": "/tmp/x"}
HONEST = ["--backend", "vllm", "--base-url", "http://127.0.0.1:8000", "--endpoint", "/v1/completions", "--model", "/m",
          "--tokenizer", "/m", "--dataset-name", "random", "--random-input-len", "8", "--random-output-len", "4",
          "--num-prompts", "4", "--request-rate", "inf", "--ignore-eos", "--seed", "0", "--percentile-metrics",
          "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--save-result", "--result-dir", "/tmp/x",
          "--result-filename", "f.json", "--disable-tqdm"]


def test_the_gate_refuses_a_run_whose_recorded_argv_disagrees_with_its_config(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"min_throughput_gain": 0.2})
    run = tmp_path / "run"
    code, out, err = run_gate(tmp_path, capsys, _with_argv(copy.deepcopy(s), run, lambda name: HONEST))
    assert code == 0, out + err
    elsewhere = [("http://10.1.2.3:80" if a == "http://127.0.0.1:8000" else a) for a in HONEST]
    code, out, err = run_gate(tmp_path, capsys, _with_argv(copy.deepcopy(s), run,
                                                           lambda n: elsewhere if n == "fp8" else HONEST))
    assert code == 2 and "fp8: benchmark point rate-inf: a repetition's vllm bench serve argv --base-url" in err, err
    assert "Traceback" not in err
    code, out, err = run_gate(tmp_path, capsys, _with_argv(copy.deepcopy(s), run,
                                                           lambda n: None if n == "fp8" else HONEST))
    assert code == 2 and "argv is not recorded" in err, err

