"""eval.served_check_items through a run, with stand-in stages (test_runner_stage.fake_stage, as
test_engine_check_run.py): the benchmark's served evaluation and the evaluate-served-check job each write their
per-item records; the check runs after its variant's benchmark, lands in the summary's stages under its name, is compared item
by item (suite.analysis.served_check, the real code), gates the task, and a second run on the same store reuses it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_runner_stage import fake_stage

from suite import cli
from suite.records.quantize import QuantizeResult
from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV
from suite.stages.registry import SERVED_CHECK

SERVED = [1, 1, 0, 0]  # the served evaluation's four items; the check scores the first two (served_check_items: 2)


def stand_in(tmp_path: Path, monkeypatch, check_items: list[int]) -> Path:
    calls = tmp_path / "calls.txt"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / ".complete").write_text("k")
    quantized = QuantizeResult(checkpoint=str(ckpt), key="k", cache_hit=False, wall_s=1.0)
    script = fake_stage(tmp_path, f"""
        import json
        stage, cfg = sys.argv[-3], json.load(open(sys.argv[-2]))
        variant = os.path.basename(os.path.dirname(out))
        open({str(calls)!r}, "a").write(f"{{stage}} {{variant}}\\n")
        def evaluation(ev, items):
            os.makedirs(ev["output_dir"], exist_ok=True)
            samples = os.path.join(ev["output_dir"], "samples_suite_mmlu.jsonl")
            with open(samples, "w") as f:
                for i, v in enumerate(items):
                    f.write(json.dumps({{"doc_id": i, "task": "suite_mmlu", "filter": "none", "acc": v,
                                        "prompt_hash": f"p{{i}}"}}) + "\\n")
            return {{**json.loads(result_json), "samples_files": {{"suite_mmlu": samples}}, "backend": ev["backend"],
                     "scores": [{{"task": "suite_mmlu", "metric": "acc,none", "value": sum(items) / len(items),
                                  "n": len(items)}}]}}
        if stage == "quantize":
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}), "key": cfg["key"]}})
        elif stage == "benchmark":
            result_json = json.dumps({{"points": [], "server_start_s": 1.0, "wall_s": 2.0, "server_log": "s.log",
                                      "evaluate": evaluation(cfg["evaluate"], {SERVED!r})}})
        elif stage == {SERVED_CHECK!r}:
            assert cfg["backend"] == "vllm" and cfg["tasks"][0]["limit"] == 2.0, cfg
            result_json = json.dumps(evaluation(cfg, {check_items!r}))
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    return calls


def _run(recipe, capsys) -> tuple[int, Path, str]:
    code = cli.main(["run", str(recipe), "--no-track"])
    out, err = capsys.readouterr()
    return code, Path(out.split("run folder: ")[1].split()[0]), out + err


def test_the_check_runs_after_the_benchmark_is_compared_and_is_reused_from_the_store(demo_recipe_copy, tmp_path,
                                                                                     monkeypatch, capsys):
    calls = stand_in(tmp_path, monkeypatch, check_items=SERVED[:2])
    monkeypatch.setenv("SUITE_STORE", str(tmp_path / "store"))
    recipe = demo_recipe_copy(eval__engine="served", eval__served_check_items=2, gates__min_throughput_gain=None,
                              eval__tasks=[{"name": "suite_mmlu", "limit": 4, "num_fewshot": 0}])
    code, run_dir, said = _run(recipe, capsys)
    assert code == 0, said
    ran = calls.read_text().split("\n")
    for v in ("bf16", "fp8-kv"):
        assert ran.index(f"{SERVED_CHECK} {v}") > ran.index(f"benchmark {v}")  # the server stopped first
    summary = json.loads((run_dir / "summary.json").read_text())
    for v in summary["variants"]:
        (rec,) = v["served_agreement"]
        assert (rec["task"], rec["items"], rec["disagree"], rec["exact"]) == ("suite_mmlu", 2, 0, False), v["name"]
        assert v["stages"][SERVED_CHECK]["backend"] == "vllm" and v["stages"]["evaluate"]["backend"] == "served"
        assert v["metrics"]["acc.suite_mmlu.served_check_disagree"] == 0.0
    assert any("served check: scores compared only" in w for w in summary["warnings"])

    calls.write_text("")  # a second run of the same configuration: the checks come from the store, no engine start
    code, again, said = _run(recipe, capsys)
    assert code == 0 and again != run_dir, said
    assert f"{SERVED_CHECK} bf16" not in calls.read_text() and "benchmark bf16" in calls.read_text()
    assert re.search(rf"{SERVED_CHECK} +bf16 +cached", said) and re.search(rf"{SERVED_CHECK} +fp8-kv +cached", said)
    reused = json.loads((again / "summary.json").read_text())
    assert [v["served_agreement"] for v in reused["variants"]] == [v["served_agreement"] for v in summary["variants"]]


def test_a_check_that_disagrees_makes_the_run_inconclusive(demo_recipe_copy, tmp_path, monkeypatch, capsys):
    stand_in(tmp_path, monkeypatch, check_items=[1, 0])  # item 1: right when served, wrong in-process
    recipe = demo_recipe_copy(eval__engine="served", eval__served_check_items=2, gates__min_throughput_gain=None,
                              eval__tasks=[{"name": "suite_mmlu", "limit": 4, "num_fewshot": 0}])
    code, run_dir, said = _run(recipe, capsys)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert any("served check: suite_mmlu item suite_mmlu/1: score 1 served, 0 in-process" in w
               for w in summary["warnings"]), summary["warnings"]
    gate = cli.main(["gate", str(run_dir), "--no-record"])
    out = capsys.readouterr().out
    assert gate == 3 and "disagree with the in-process engine on 1 of 2 checked items" in out, out
