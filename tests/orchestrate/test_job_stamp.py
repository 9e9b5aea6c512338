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
