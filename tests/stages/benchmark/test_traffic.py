"""The team's traffic: a dataset-file workload (ShareGPT or JSONL of prompts with output lengths) and
throughput.bench_args reach `vllm bench serve`'s own parser and loader; bad ones are refused by `suite validate`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_MODEL, ROOT, needs_demo_model, run_cli
from suite.plan.planner import make_plan
from suite.recipe import SuiteError, load_recipe
from suite.stages.benchmark.stage import bench_command
from suite.stages.benchmark.workload import dataset_rows, write_dataset

# vLLM's own `vllm bench serve` parser and its dataset loader (get_samples), in the serve environment
PARSE_AND_SAMPLE = r"""
import json, sys
from suite.runtime.vllm_alias import install_vllm_version_alias
install_vllm_version_alias()
from vllm.benchmarks.serve import add_cli_args
from vllm.benchmarks.datasets import get_samples
from vllm.utils.argparse_utils import FlexibleArgumentParser
from transformers import AutoTokenizer
p = FlexibleArgumentParser(); add_cli_args(p)
args = p.parse_args(json.loads(sys.argv[1]))
reqs = get_samples(args, AutoTokenizer.from_pretrained(sys.argv[2]))
print(json.dumps({"goodput": args.goodput, "metric_percentiles": args.metric_percentiles,
                  "percentile_metrics": args.percentile_metrics, "dataset_name": args.dataset_name,
                  "output_lens": [r.expected_output_len for r in reqs]}))
"""


def jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sharegpt(path: Path) -> Path:
    conv = lambda q, a: {"conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}  # noqa: E731
    path.write_text(json.dumps([conv("Say hello to the team.", "Hello, team! Nice to meet you all today."),
                                conv("Name a colour.", "Blue is a colour."), {"conversations": [{"value": "x"}]}]))
    return path


def traffic_recipe(demo_recipe_copy, **throughput):
    return demo_recipe_copy(**{f"throughput__{k}": v for k, v in throughput.items()})


def parsed(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", PARSE_AND_SAMPLE, json.dumps(argv), str(DEMO_MODEL)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def argv_after_bench_serve(cmd: list[str]) -> list[str]:
    return cmd[cmd.index("serve") + 1:]


@needs_demo_model()
def test_a_jsonl_workload_and_bench_args_reach_vllm_bench_serve(demo_recipe_copy, tmp_path):
    jsonl(tmp_path / "traffic.jsonl", [{"prompt": "Summarise our release notes.", "output_len": 7},
                                       {"prompt": "Write a haiku about FP8.", "output_len": 3}])
    path = traffic_recipe(demo_recipe_copy, workload="dataset", dataset={"path": "traffic.jsonl", "format": "jsonl"},
                          bench_args={"goodput": ["ttft:200", "tpot:50"], "metric_percentiles": "90,99"})
    cfg = make_plan(load_recipe(path), tmp_path / "run").variants[1].benchmark
    assert cfg.dataset["path"] == str(tmp_path / "traffic.jsonl") and len(cfg.dataset["sha256"]) == 64
    rows = dataset_rows(Path(cfg.dataset["path"]), "jsonl")
    file = write_dataset([p for p, _ in rows], 4, tmp_path / "prompts-x.jsonl", "r1", [o for _, o in rows])
    cmd = bench_command(cfg, 8000, "inf", None, tmp_path, "out.json", 4, dataset=file, row_output_lens=True)
    got = parsed(argv_after_bench_serve(cmd))
    assert got["goodput"] == ["ttft:200", "tpot:50"]
    assert got["metric_percentiles"] == "50,99,90"  # merged with the suite's own p50/p99, which it reads back
    assert got["percentile_metrics"] == "ttft,tpot,itl,e2el"
    assert got["dataset_name"] == "custom" and sorted(got["output_lens"]) == [3, 3, 7, 7]  # each row's own (vLLM shuffles them)


@needs_demo_model()
def test_a_sharegpt_file_is_read_by_vllms_sharegpt_loader(demo_recipe_copy, tmp_path):
    sharegpt(tmp_path / "chats.json")
    path = traffic_recipe(demo_recipe_copy, workload=["random", "dataset"],
                          dataset={"path": "chats.json", "format": "sharegpt"})
    cfg = make_plan(load_recipe(path), tmp_path / "run").variants[0].benchmark
    cmd = bench_command(cfg, 8000, "inf", None, tmp_path, "out.json", 2, dataset=Path(cfg.dataset["path"]),
                        dataset_name="sharegpt")
    got = parsed(argv_after_bench_serve(cmd))
    assert got["dataset_name"] == "sharegpt" and len(got["output_lens"]) == 2 and min(got["output_lens"]) >= 4


@needs_demo_model()
def test_the_dataset_is_keyed_by_content(demo_recipe_copy, tmp_path):
    f = jsonl(tmp_path / "t.jsonl", [{"prompt": "a", "output_len": 4}])
    path = traffic_recipe(demo_recipe_copy, workload="dataset", dataset={"path": "t.jsonl", "format": "jsonl"})
    sha = lambda: make_plan(load_recipe(path), tmp_path / "run").variants[0].benchmark.dataset["sha256"]  # noqa: E731
    before = sha()
    jsonl(f, [{"prompt": "a", "output_len": 5}])
    assert sha() != before


@needs_demo_model()
@pytest.mark.parametrize("throughput, said", [
    ({"bench_args": {"goodputt": ["ttft:200"]}}, "throughput.bench_args.goodputt: not an option of the serve "
     "environment's `vllm bench serve`; did you mean 'goodput'?"),
    ({"bench_args": {"request_rate": 4}}, "throughput.bench_args: request_rate: it changes how requests arrive"),
    ({"bench_args": {"num-prompts": 4}}, "throughput.bench_args: num-prompts: the benchmark stage sets the prompts "
     "per load point (fix: use throughput.num_prompts)"),
    ({"workload": "dataset", "dataset": {"path": "none.jsonl", "format": "jsonl"}}, "throughput.dataset.path: "),
    ({"workload": "dataset", "dataset": {"path": "bad.jsonl", "format": "jsonl"}}, "line 2: not a JSON object"),
    ({"workload": "dataset", "dataset": {"path": "long.jsonl", "format": "jsonl"}}, "1 row(s) ask for an output of "
     "max_model_len 2048 tokens or more (e.g. row 2)"),
    ({"dataset": {"path": "bad.jsonl", "format": "jsonl"}}, "no workload uses it"),
])
def test_validate_refuses_bad_traffic_before_any_model_loads(demo_recipe_copy, tmp_path, throughput, said):
    jsonl(tmp_path / "bad.jsonl", [{"prompt": "fine", "output_len": 4}, {"prompt": "no length"}])
    jsonl(tmp_path / "long.jsonl", [{"prompt": "fine", "output_len": 4}, {"prompt": "long", "output_len": 2048}])
    out = run_cli("validate", str(traffic_recipe(demo_recipe_copy, **throughput)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert said in out.stderr, out.stderr
