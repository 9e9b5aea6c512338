"""Issue 39: a variant given as a path to a checkpoint that the quantize stage built in an earlier run is scored and
served, in one `suite run`, without a quantize job; the summary names what its config.json holds (integration)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DEMO_MODEL, needs_cpu_fp8_kv, needs_demo_model
from suite import cli

pytestmark = [pytest.mark.integration, needs_demo_model(), needs_cpu_fp8_kv()]


def test_a_checkpoint_built_earlier_is_scored_and_served_without_a_quantize_job(demo_recipe_copy, DELETE, tmp_path,
                                                                                capsys):
    from suite.orchestrate.jobs import run_stage
    from suite.records.quantize import QuantizeConfig

    # the earlier run: the real quantize stage (llmcompressor), the demo's fp8-kv scheme on a few samples
    cfg = QuantizeConfig(model=str(DEMO_MODEL), checkpoint_dir=str(tmp_path / "built" / "fp8-kv"), key="fp8-kv",
                         kv_cache="fp8", calibration="chat-demo", num_calibration_samples=4, max_seq_length=64,
                         ignore=["lm_head"])
    built = run_stage("quantize", cfg, tmp_path / "earlier", dict(os.environ, HF_HUB_OFFLINE="1"))
    assert built.error is None, built.error
    counted = json.loads((tmp_path / "earlier" / "quantize.progress.json").read_text())  # the calibration counter
    assert counted["what"].startswith("calibration passes (4 samples x 30 layers)"), counted
    assert counted["done"] == counted["total"] == 4 * 30, counted
    ckpt = Path(built.result.checkpoint)
    assert json.loads((ckpt / "config.json").read_text())["quantization_config"]["kv_cache_scheme"]["type"] == "float"

    recipe = demo_recipe_copy(
        variants=[{"name": "prebuilt", "model": {"id": str(ckpt)}, "kv_cache_dtype": "fp8",
                   "engine_args": {"enforce_eager": True, "distributed_executor_backend": "uni"}}],
        eval__tasks=[{"name": "suite_gsm8k", "limit": 1, "num_fewshot": 1}], eval__max_gen_toks=32,
        throughput={"input_len": 32, "output_len": 8, "num_prompts": 4, "request_rates": ["inf"], "repetitions": 1,
                    "warmup_requests": 1, "server_timeout_s": 300},
        gates=DELETE)
    rc = cli.main(["run", str(recipe), "--no-track"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    (run_dir,) = [d for d in (tmp_path / "runs").iterdir() if (d / "summary.json").is_file()]  # not eval-cache/
    jobs = json.loads((run_dir / "jobs.json").read_text())["jobs"]
    assert {(j["stage"], j["variant"]) for j in jobs} == {("evaluate", "bf16"), ("evaluate", "prebuilt"),
                                                         ("benchmark", "bf16"), ("benchmark", "prebuilt")}
    summary = json.loads((run_dir / "summary.json").read_text())
    (v,) = [v for v in summary["variants"] if v["name"] == "prebuilt"]
    assert "quantize" not in v["stages"] and v["model_path"] == str(ckpt) and not v["errors"]
    assert v["stages"]["evaluate"]["scores"][0]["task"] == "suite_gsm8k" and v["stages"]["evaluate"]["scores"][0]["n"] == 1  # scored
    assert v["stages"]["benchmark"]["points"][0]["completed"] == 4  # served
    # from the checkpoint's config.json: compressed-tensors, BF16 weights, an FP8 KV cache with its scales
    assert v["scheme"] == "compressed-tensors" and v["kv_cache"] == "fp8"
