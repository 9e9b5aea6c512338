"""The scheme table is the one place a quantization scheme is described: a scheme registered from here is accepted
by the recipe, its calibration rule and CPU refusal follow its entry, and a checkpoint's config.json reads as it."""

from __future__ import annotations

import pytest

from suite.records import schemes
from suite.records.schemes import Scheme


@pytest.fixture
def toy_scheme():
    toy = schemes.register(Scheme("FP8_TOY", "a toy static per-tensor scheme", needs_calibration=True,
                                  weights="tensor", activations="static tensor", cpu_unsupported="no toy kernel"))
    yield toy
    schemes.SCHEMES.unregister(toy.name)


def test_a_registered_scheme_is_validated_by_its_entry(toy_scheme):
    from pydantic import ValidationError

    from suite.recipe.schema import QuantizationSpec

    with pytest.raises(ValidationError, match="needs calibration data"):
        QuantizationSpec(scheme="FP8_TOY")
    assert QuantizationSpec(scheme="FP8_TOY", calibration="chat-demo").scheme == "FP8_TOY"
    with pytest.raises(ValidationError, match="unsupported scheme 'FP8_NOPE'"):
        QuantizationSpec(scheme="FP8_NOPE")


def test_the_cpu_refusal_comes_from_the_table(toy_scheme, monkeypatch):
    from types import SimpleNamespace

    from suite.runtime import envs

    monkeypatch.setattr(envs, "vllm_platform", lambda: "cpu")
    monkeypatch.setattr(envs, "cpu_serves_fp8_kv", lambda *a: True)
    variant = SimpleNamespace(kv_cache_dtype="auto", quantization=SimpleNamespace(scheme="FP8_TOY"))
    recipe = SimpleNamespace(baseline=SimpleNamespace(kv_cache_dtype="auto"), variants=[variant])
    (field, message, _fix), = envs.platform_problems(recipe)
    assert field == "variants[0].quantization.scheme" and "no toy kernel" in message
    variant.quantization.scheme = "FP8_TOY_UNKNOWN"
    assert envs.platform_problems(recipe) == []


@pytest.mark.parametrize("weights, acts, scheme", [
    ({"type": "float", "num_bits": 8, "strategy": "tensor"},
     {"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": False}, "FP8"),
    ({"type": "float", "num_bits": 8, "strategy": "channel"},
     {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": True}, "FP8_DYNAMIC"),
    ({"type": "float", "num_bits": 8, "strategy": "block", "block_structure": [128, 128]},
     {"type": "float", "num_bits": 8, "strategy": "group", "dynamic": True, "group_size": 128}, "FP8_BLOCK"),
    ({"type": "int", "num_bits": 8, "strategy": "channel"}, None, None),
    ({"type": "float", "num_bits": 8, "strategy": "channel"},
     {"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": False}, None),
])
def test_a_checkpoint_config_reads_as_the_scheme_it_holds(weights, acts, scheme):
    qcfg = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights,
                                                                               "input_activations": acts}}}
    assert schemes.scheme_in_config(qcfg) == scheme


def test_the_quantize_stage_refuses_a_checkpoint_that_is_not_the_scheme_asked_for():
    from suite.records.quantize import QuantizeConfig
    from suite.stages.quantize.stage import verify_checkpoint

    dynamic = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel"},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": True}}}}
    cfg = QuantizeConfig.model_construct(scheme="FP8", kv_cache=None)
    assert any("read as FP8_DYNAMIC" in p for p in verify_checkpoint(dynamic, 0, 30, cfg))
    assert verify_checkpoint(dynamic, 0, 30, QuantizeConfig.model_construct(scheme="FP8_DYNAMIC", kv_cache=None)) == []
