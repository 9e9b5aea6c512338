"""Every stage result is bound to the job that made it (issue 47, part 3): the stage process writes the job (variant,
stage, content key, its config file's sha256) and the key into its result in its one atomic write, so no result is on
disk without its key; a resume keeps none that records no key (test_result_keys)."""

from __future__ import annotations

import hashlib
import json

from suite.records.base import JOB_ENV
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.records.quantize import SensitivityResult
from suite.stages.__main__ import stamped
from suite.stages.registry import BENCHMARK, EVALUATE


def test_the_stage_writes_its_job_and_key_into_its_result(tmp_path, monkeypatch):
    cfg = tmp_path / "fp8" / "evaluate.config.json"
    cfg.parent.mkdir()
    cfg.write_text('{"tasks": []}')
    monkeypatch.setenv(JOB_ENV, json.dumps({"variant": "fp8", "key": "k1"}))
    made = stamped(EvaluateResult(scores=[], results_file="r", wall_s=1, engine_load_s=1), EVALUATE, cfg)
    assert made.cache_key == "k1" and made.job.model_dump() == {
        "variant": "fp8", "stage": EVALUATE, "key": "k1", "config_sha256": hashlib.sha256(cfg.read_bytes()).hexdigest()}
    bench = stamped(BenchmarkResult(points=[], server_start_s=1, wall_s=1, server_log="l"), BENCHMARK, cfg)
    assert bench.key == "k1" and bench.job.stage == BENCHMARK


def test_a_stage_run_by_hand_or_a_result_without_a_job_field_is_left_as_it_is(tmp_path, monkeypatch):
    cfg = tmp_path / "c.json"
    cfg.write_text("{}")
    monkeypatch.delenv(JOB_ENV, raising=False)
    made = EvaluateResult(scores=[], results_file="r", wall_s=1, engine_load_s=1)
    assert stamped(made, EVALUATE, cfg) is made
    monkeypatch.setenv(JOB_ENV, json.dumps({"variant": "fp8", "key": "k1"}))
    other = SensitivityResult.model_construct()
    assert stamped(other, "sensitivity", cfg) is other


def test_a_keyless_result_is_not_kept_by_a_resume_that_accepts_a_recipe_change(demo_recipe_copy, tmp_path,
                                                                              monkeypatch, capsys):
    """The issue's case: a finished run, fp8-kv's evaluate result stripped of its key and job (as a parent killed
    between two writes once left it), eval.max_gen_toks changed 192 -> 32 in the run folder's recipe.yaml, then
    `suite run --resume --accept-recipe-change`: that evaluation runs again (the one that records its key under the
    old max_gen_toks runs again too, its key changed), and `suite gate` judges what the resume made (every result
    bound to its job in the rewritten plan.json)."""
    from pathlib import Path

    from test_resume_promises import accuracy_only, stand_in

    from suite import cli

    _, calls = stand_in(tmp_path, monkeypatch)
    recipe = accuracy_only(demo_recipe_copy, eval__tasks=[{"name": "suite_mmlu", "num_fewshot": 0, "limit": 1.0}])
    assert cli.main(["run", str(recipe), "--no-track"]) == 0  # the task the stand-in scores
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    path = run_dir / "variants" / "fp8-kv" / "evaluate.result.json"
    res = json.loads(path.read_text())
    assert res["job"]["variant"] == "fp8-kv" and res["job"]["key"] == res["cache_key"]
    del res["job"], res["cache_key"]
    path.write_text(json.dumps(res))
    recipe = run_dir / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("max_gen_toks: 192", "max_gen_toks: 32"))
    calls.write_text("")
    assert cli.main(["run", "--resume", str(run_dir), "--no-track", "--accept-recipe-change"]) == 0
    assert sorted(calls.read_text().split("\n")[:-1]) == ["evaluate bf16", "evaluate fp8-kv"]
    assert (run_dir / "variants" / "fp8-kv" / "evaluate.result.no-key.json").is_file()
    redone = json.loads(path.read_text())
    assert redone["cache_key"] and redone["job"]["key"] == redone["cache_key"]
    planned = json.loads((run_dir / "plan.json").read_text())["variants"]["fp8-kv"]
    assert planned[EVALUATE]["max_gen_toks"] == 32  # the plan the resume ran
    capsys.readouterr()
    code = cli.main(["gate", str(run_dir), "--no-record"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 3) and "gate: " in out and "error:" not in err, out + err  # a verdict, bound to its jobs
