"""Variants (and the baseline) served from an existing checkpoint (``model``): planned without a quantize job, their
quantization read from config.json, refused when unreadable or unservable, keyed by the checkpoint's content."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import DEMO_MODEL, needs_demo_model
from suite.plan.planner import make_plan
from suite.recipe import SuiteError, load_recipe
from suite.recipe.checkpoint import quantization_of

# what llmcompressor wrote for the demo's fp8-kv variant (BF16 weights, calibrated per-tensor FP8 k/v scales)
KV_ONLY = {"quant_method": "compressed-tensors", "format": "dense", "config_groups": {},
           "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                               "symmetric": True}}
FP8_DYNAMIC = {"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False},
    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}


def checkpoint(folder: Path, qc: dict | None) -> Path:
    """A checkpoint folder: the demo model's files (linked) under a config.json carrying ``qc``."""
    folder.mkdir(parents=True)
    for f in DEMO_MODEL.iterdir():
        if f.name != "config.json" and f.is_file():
            os.symlink(f, folder / f.name)
    cfg = json.loads((DEMO_MODEL / "config.json").read_text())
    if qc is not None:
        cfg["quantization_config"] = qc
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_quantization_is_read_from_config_json():
    assert quantization_of({}) == {}
    kv = quantization_of({"quantization_config": KV_ONLY})
    assert kv["quant_method"] == "compressed-tensors" and kv["kv_cache"] == "fp8 tensor" and "weights" not in kv
    dyn = quantization_of({"quantization_config": FP8_DYNAMIC})
    assert dyn["scheme"] == "FP8_DYNAMIC" and dyn["weights"] == "fp8 channel" and dyn["activations"] == "fp8 token dynamic"
    vllm_fp8 = quantization_of({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                                        "weight_block_size": [128, 128]}})
    assert vllm_fp8["scheme"] == "FP8_BLOCK" and vllm_fp8["weights"] == "fp8 block 128x128"
    assert quantization_of({"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}})["scheme"] == "FP8"


@needs_demo_model()
def test_a_checkpoint_variant_is_planned_without_a_quantize_job(demo_recipe_copy, tmp_path):
    from suite.orchestrate.rundir import plan_json

    ck = checkpoint(tmp_path / "team-fp8", FP8_DYNAMIC)
    path = demo_recipe_copy(variants=[{"name": "team-fp8", "model": {"id": str(ck)}, "engine_args": {"enforce_eager": True}}])
    plan = make_plan(load_recipe(path), tmp_path / "run")
    assert [s for s, _ in plan.jobs()] == ["evaluate", "evaluate", "benchmark", "benchmark"]
    vp = plan.variants[1]
    assert vp.quantize is None and vp.model_path == str(ck)
    assert vp.evaluate.engine.model == str(ck) and vp.benchmark.engine.model == str(ck)
    assert vp.evaluate.engine.dtype == "auto"  # the checkpoint's own dtype, as a built variant's
    shown = json.loads(plan_json(plan))["variants"]["team-fp8"]["checkpoint"]
    assert shown["scheme"] == "FP8_DYNAMIC" and "compressed-tensors (float-quantized)" in shown["summary"]
    from suite.analysis.summary import variant_summary

    assert variant_summary(vp).scheme == "FP8_DYNAMIC"  # the report's row names what the checkpoint holds


@needs_demo_model()
def test_the_baseline_may_be_a_checkpoint_and_a_relative_path_is_the_recipes(demo_recipe_copy, tmp_path):
    checkpoint(tmp_path / "current-fp8", KV_ONLY)
    path = demo_recipe_copy(baseline__model="current-fp8")  # the shorthand: just the id, relative to the recipe
    plan = make_plan(load_recipe(path), tmp_path / "run")
    base = plan.variants[0]
    assert base.model_path == str(tmp_path / "current-fp8") and base.quantize is None
    assert base.checkpoint["kv_cache"] == "fp8 tensor"
    assert plan.variants[1].quantize.model == str(DEMO_MODEL)  # quantized variants are still built from model.id


@needs_demo_model()
def test_model_and_quantization_together_are_refused(demo_recipe_copy, tmp_path):
    checkpoint(tmp_path / "ck", None)
    with pytest.raises(SuiteError) as e:
        load_recipe(demo_recipe_copy(variants__0__model="ck"))
    assert "variants[0]: both 'model'" in str(e.value) and "remove 'quantization'" in str(e.value)


@needs_demo_model()
def test_a_missing_or_unservable_checkpoint_is_refused_by_validate(demo_recipe_copy, tmp_path):
    with pytest.raises(SuiteError) as e:
        load_recipe(demo_recipe_copy(variants=[{"name": "gone", "model": "no-such-folder"}]))
    assert "variants[0].model.id: no readable config.json" in str(e.value)
    checkpoint(tmp_path / "odd", {"quant_method": "not-a-vllm-method"})
    with pytest.raises(SuiteError) as e:
        load_recipe(demo_recipe_copy(variants=[{"name": "odd", "model": "odd"}]))
    assert "variants[0].model.id: its config.json's quant_method 'not-a-vllm-method'" in str(e.value)
    checkpoint(tmp_path / "fine", FP8_DYNAMIC)
    load_recipe(demo_recipe_copy(variants=[{"name": "fine", "model": "fine"}]))  # compressed-tensors: vLLM loads it


@needs_demo_model()
def test_an_overwritten_checkpoint_gets_a_new_evaluation_key(demo_recipe_copy, tmp_path, monkeypatch):
    """The evaluation cache keys an unbuilt variant by its folder's content: the same path rewritten is not served
    from the scores of what was there before."""
    from suite.plan.keys import cache_key, weights_fingerprint

    monkeypatch.setenv("SUITE_CACHE_DIR", str(tmp_path / "cache"))
    ck = checkpoint(tmp_path / "ck", FP8_DYNAMIC)
    (ck / "model.safetensors").unlink()
    shutil.copy(DEMO_MODEL / "tokenizer_config.json", ck / "model.safetensors")  # small stand-in weights
    plan = make_plan(load_recipe(demo_recipe_copy(variants=[{"name": "ck", "model": "ck"}])), tmp_path / "run")
    vp = plan.variants[1]
    key = lambda: cache_key(vp.evaluate, weights_fingerprint(vp.model_path), versions={})  # noqa: E731
    before = key()
    with open(ck / "model.safetensors", "ab") as fh:
        fh.write(b" ")
    assert key() != before
