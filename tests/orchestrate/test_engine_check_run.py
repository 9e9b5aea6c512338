"""eval.engine_check through a run (issue 41, 2b), with stand-in stages (test_runner_stage.fake_stage): each
evaluate-check-<i> job writes its own result file, the summary's engine_checks holds those evaluations by label,
analysis.engine_spread turns them into acc.<task>.engine_spread / flip_rate, and a resume keeps them."""

from __future__ import annotations

import json
from pathlib import Path

from test_runner_stage import fake_stage

from suite import cli
from suite.records.quantize import QuantizeResult
from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV
from suite.stages.registry import ENGINE_CHECKS

# per stage, the four items' 0/1 scores: the 64-sequence check flips one item of four against the main evaluation
ITEMS = {"evaluate": [1, 1, 0, 0], ENGINE_CHECKS[0]: [1, 0, 0, 0], ENGINE_CHECKS[1]: [1, 1, 0, 0]}


def stand_in(tmp_path: Path, monkeypatch) -> Path:
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
        if stage == "quantize":
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}), "key": cfg["key"]}})
        items = {ITEMS!r}.get(stage)
        if items is not None:
            os.makedirs(cfg["output_dir"], exist_ok=True)
            samples = os.path.join(cfg["output_dir"], "samples_suite_mmlu.jsonl")
            with open(samples, "w") as f:
                for i, v in enumerate(items):
                    f.write(json.dumps({{"doc_id": i, "task": "suite_mmlu", "filter": "none", "acc": v}}) + "\\n")
            result_json = json.dumps({{**json.loads(result_json), "samples_files": {{"suite_mmlu": samples}},
                "scores": [{{"task": "suite_mmlu", "metric": "acc,none", "value": sum(items) / 4, "n": 4}}]}})
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    return calls


def test_a_run_records_the_checks_and_the_summary_gets_the_engine_spread(demo_recipe_copy, tmp_path, monkeypatch,
                                                                         capsys):
    calls = stand_in(tmp_path, monkeypatch)
    recipe = demo_recipe_copy(throughput=None, gates__min_throughput_gain=None,
                              eval__engine_check={"max_num_seqs": [64, 1024]},
                              eval__tasks=[{"name": "suite_mmlu", "limit": 1, "num_fewshot": 0}])
    assert cli.main(["run", str(recipe), "--no-track"]) == 0, capsys.readouterr().err
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    ran = calls.read_text().split("\n")
    for stage in ENGINE_CHECKS[:2]:
        assert f"{stage} bf16" in ran and f"{stage} fp8-kv" in ran
        for v in ("bf16", "fp8-kv"):
            assert (run_dir / "variants" / v / f"{stage}.result.json").is_file()
            assert (run_dir / "variants" / v / stage / "samples_suite_mmlu.jsonl").is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    for v in summary["variants"]:
        assert list(v["engine_checks"]) == ["max_num_seqs=64", "max_num_seqs=1024"], v["name"]
        (spread,) = v["engine_spread"]
        assert spread["configs"] == ["as run", "max_num_seqs=64", "max_num_seqs=1024"]
        assert (spread["items"], spread["flipped"]) == (4, 1)
        m = v["metrics"]
        (key,) = [k for k in m if k.endswith(".engine_spread")]
        assert m[key] == 0.25 and m[key.replace("engine_spread", "flip_rate")] == 0.25
        assert m[key.replace("engine_spread", "engine_configs")] == 3.0

    calls.write_text("")  # a resume keeps every check's result and records it again
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 0
    assert calls.read_text() == ""
    again = json.loads((run_dir / "summary.json").read_text())
    assert [list(v["engine_checks"]) for v in again["variants"]] == [["max_num_seqs=64", "max_num_seqs=1024"]] * 2
    assert [v["engine_spread"] for v in again["variants"]] == [v["engine_spread"] for v in summary["variants"]]

    (run_dir / "summary.json").unlink()  # `suite summarize` files each check under the label the run used
    assert cli.main(["summarize", str(run_dir)]) == 0, capsys.readouterr().err
    rebuilt = json.loads((run_dir / "summary.json").read_text())
    assert [list(v["engine_checks"]) for v in rebuilt["variants"]] == [["max_num_seqs=64", "max_num_seqs=1024"]] * 2
    assert [v["engine_spread"] for v in rebuilt["variants"]] == [v["engine_spread"] for v in summary["variants"]]
