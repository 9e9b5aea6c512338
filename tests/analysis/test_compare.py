"""`suite compare`: two runs of one recipe; accuracy paired item by item across the runs, throughput by
the repetitions' ranges, package versions."""

from __future__ import annotations

import json

from conftest import make_summary, run_cli, run_folder
from suite.analysis import compare
from suite.records.benchmark import BenchmarkResult, LoadPoint
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.stages.registry import BENCHMARK, EVALUATE


def write_samples(path, scores):
    with open(path, "w") as fh:
        for i, s in enumerate(scores):
            fh.write(json.dumps({"doc_id": i, "task": "suite_gsm8k", "filter": "strict-match", "exact_match": s}) + "\n")


def run_summary(tmp_path, name, gsm_scores, mmlu, tput, versions):
    run_dir = tmp_path / name
    run_dir.mkdir()
    s = make_summary({"bf16": {}}, run_dir=str(run_dir))
    write_samples(run_dir / "samples_gsm8k.jsonl", gsm_scores)
    v = s.variants[0]
    v.stages[EVALUATE] = EvaluateResult(
        scores=[TaskScore(task="suite_gsm8k", metric="exact_match,strict-match", value=sum(gsm_scores) / len(gsm_scores)),
                TaskScore(task="suite_mmlu", metric="acc,none", value=mmlu, stderr=0.004)],
        results_file="r.json", samples_files={"suite_gsm8k": str(run_dir / "samples_gsm8k.jsonl")}, wall_s=1,
        engine_load_s=1)
    v.stages[BENCHMARK] = BenchmarkResult(points=[
        LoadPoint(label=label, request_rate=1, output_tok_s=med, output_tok_s_min=lo, output_tok_s_max=hi,
                  repetitions=[{}, {}, {}]) for label, (lo, med, hi) in tput.items()],
        server_start_s=1, wall_s=1, server_log="x")
    s.versions = versions
    run_folder(run_dir, s)  # the run folder its stage results and run.json make
    return s


def test_compare_separates_moves_from_noise(tmp_path):
    a_items = [1.0] * 300 + [0.0] * 200
    b_items = [1.0] * 240 + [0.0] * 260  # 60 items lost, none gained: a real drop of 0.12
    a = run_summary(tmp_path, "a", a_items, 0.600, {"rate-50": (900, 1000, 1050), "rate-100": (1900, 2000, 2100)},
                    {"vllm": "0.26.0", "lm-eval": "0.4.13"})
    b = run_summary(tmp_path, "b", b_items, 0.605, {"rate-50": (950, 1010, 1060), "rate-100": (2300, 2400, 2500)},
                    {"vllm": "0.27.0", "lm-eval": "0.4.13"})
    res = compare.run(compare.CompareConfig(a, b))
    by = {c.what: c for c in res.changes}
    gsm = by["acc suite_gsm8k"]
    assert gsm.moved and gsm.high < 0 and abs(gsm.delta + 0.12) < 1e-9 and "60 lost" in gsm.how
    mmlu = by["acc suite_mmlu"]  # +0.005 with stderrs of 0.004 each: noise
    assert not mmlu.moved and "unpaired" in mmlu.how
    assert not by["tput rate-50"].moved          # overlapping ranges
    assert by["tput rate-100"].moved and abs(by["tput rate-100"].delta - 0.2) < 1e-9
    assert res.versions == {"vllm": ("0.26.0", "0.27.0")}

    cli = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert sum(c["moved"] for c in out["changes"]) == 2
    table = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert "2 of 4 figures moved beyond noise" in table.stdout and "0.26.0 → 0.27.0" in table.stdout
