"""The kvcheck stage on a tiny random Qwen2 (layer 1: an outlier k_proj bias, calibrated k/v scales 10x too
small there): it flags layer 1, ranks it first, kv_skip_layers: auto keeps it in BF16; the gate reads it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402

_spec = importlib.util.spec_from_file_location("_kvt", Path(__file__).with_name("test_kvcheck_measure.py"))
_kvt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_kvt)


def _checkpoint(tmp_path):
    from suite.stages.kvcheck import measure as kvcheck

    model_dir = _kvt._tiny_qwen2(tmp_path / "tiny")
    rows = kvcheck.kv_scale_report(model_dir, _kvt.TEXTS, options=["dynamic"])
    ideal = {(r.layer, r.tensor): r.absmax / 448 for r in rows}
    scales = {f"model.layers.{i}.self_attn.{t}_scale": torch.tensor(ideal[i, t] / (10 if i == 1 else 1))
              for i in range(3) for t in "kv"}
    save_file(scales, str(model_dir / "scales.safetensors"))
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": t}) + "\n" for t in _kvt.TEXTS))
    return model_dir, texts


def test_stage_flags_ranks_and_keeps_the_clipping_layer(tmp_path):
    from suite.records.kvcheck import KVCheckConfig
    from suite.stages.kvcheck.stage import capacity, run

    model_dir, texts = _checkpoint(tmp_path)
    res = run(KVCheckConfig(model=str(model_dir), texts_file=str(texts), num_texts=2, max_tokens=64,
                            kv_scales="calibrated", candidates=["calibrated", "unit"], auto_skip=True,
                            kl_target_floor=1e-4))  # the tiny model's KLs are far below the 0.005 floor
    assert res.num_layers == 3 and res.tokens > 40
    assert res.flagged_layers == [] and 1 in {r["layer"] for r in res.flagged}  # flagged, but kept in BF16
    assert any("clips" in f for r in res.flagged if r["layer"] == 1 for f in r["flags"])
    assert res.ranked[0]["layer"] == 1 and res.ranked[0]["kl"] > 10 * res.ranked[-1]["kl"]
    assert res.skip_layers == [1] and res.kl_with_skip <= res.kl_target < res.kl["calibrated"]["kl"]
    assert res.capacity_vs_bf16 == pytest.approx(capacity(3, 1)) == pytest.approx(1.5)
    assert res.recommended == "unit" and "calibrated" in res.recommended_reason
    assert {r["tensor"] for r in res.rows} >= {"k", "v", "attn"}
    without = run(KVCheckConfig(model=str(model_dir), texts_file=str(texts), max_tokens=64, kv_scales="calibrated"))
    assert 1 in without.flagged_layers and without.ranked == [] and without.skip_layers == []


def test_auto_scales_choose_among_the_candidates_and_refuse_a_calibrated_checkpoint(tmp_path):
    from suite.records.kvcheck import KVCheckConfig
    from suite.stages.kvcheck.stage import choose_scales, run

    model_dir, texts = _checkpoint(tmp_path)
    with pytest.raises(ValueError, match="calibrated scales"):
        run(KVCheckConfig(model=str(model_dir), texts_file=str(texts), max_tokens=64, kv_scales="auto",
                          candidates=["unit"]))
    (model_dir / "scales.safetensors").unlink()  # a checkpoint without k/v scales: unit or vLLM's run-time ones
    res = run(KVCheckConfig(model=str(model_dir), texts_file=str(texts), max_tokens=64, kv_scales="auto",
                            candidates=["unit", "dynamic"]))
    assert res.kv_scales_auto and set(res.kl) == {"unit", "dynamic"}
    assert res.kv_scales == res.recommended == choose_scales({o: d["kl"] for o, d in res.kl.items()}, ["unit", "dynamic"])
    assert res.option == {"unit": "unit", "dynamic": "vllm-calc"}[res.kv_scales]
    assert "unit scale unless" in res.recommended_reason


def test_summary_warning_metric_and_gate(tmp_path):
    from conftest import make_summary
    from suite.analysis import gate
    from suite.analysis.summary import kv_warnings, variant_metrics
    from suite.recipe import GateSpec
    from suite.records.kvcheck import KVCheckResult

    res = KVCheckResult(kv_scales="calibrated", option="calibrated", options=["calibrated", "dynamic"], num_layers=24,
                        num_texts=1, tokens=100, rows=[], flagged=[{"layer": 0, "tensor": "attn", "flags": ["x"]}],
                        flagged_layers=[0], recommended="unit", wall_s=2.0)
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5},
                      "fp8-kv": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}})
    v = s.variants[1]
    v.kv_cache_dtype, v.stages["kvcheck"] = "fp8", res
    v.metrics.update(variant_metrics(v, "max"))
    assert v.metrics["kv.flagged_layers"] == 1.0 and v.metrics["time.kvcheck_s"] == 2.0
    assert "layer(s) 0" in kv_warnings(v)[0] and "unit" in kv_warnings(v)[0]
    out = gate.run(gate.GateConfig(s, GateSpec(max_kv_flagged_layers=0)))
    assert not out.problems and [c.passed for c in out.checks] == [False]
    assert gate.run(gate.GateConfig(s, GateSpec(max_kv_flagged_layers=1))).checks[0].passed
    v.metrics["kv.flagged_layers"] = 0.0  # edited to pass: disagrees with the stage result
    assert gate.run(gate.GateConfig(s, GateSpec(max_kv_flagged_layers=0))).problems
