"""The sensitivity sweep on the demo model, for real: compressed-tensors QDQ one block of decoder layers
at a time, KL against BF16 on held-out calibration text, ranked, with a suggestion for `ignore`."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import DEMO_MODEL, needs_demo_model, run_cli

pytestmark = [pytest.mark.integration, needs_demo_model()]


def test_sweep_ranks_blocks_and_suggests_bf16_layers(tmp_path, demo_model_f32):
    # the float32 copy (conftest): the unquantized reference is then float32, and the sweep ~10x faster on a CPU
    # without AVX-512 BF16
    recipe = {"name": "sens", "model": {"id": str(demo_model_f32)}, "baseline": {"name": "bf16"},
              "variants": [{"name": "fp8", "quantization": {"scheme": "FP8", "calibration": "chat-demo",
                                                            "num_calibration_samples": 16}}],
              "throughput": {"request_rates": [1]}, "output_dir": str(tmp_path / "out")}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    res = run_cli("sensitivity", str(path), "--variant", "fp8", "--samples", "3", "--max-seq-length", "96",
                  "--block", "3")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (result,) = (tmp_path / "out" / "sensitivity").glob("sens-fp8-*/sensitivity.result.json")
    r = json.loads(result.read_text())
    kls = [row["kl"] for row in r["ranked"]]
    assert len(kls) == 10 and kls == sorted(kls, reverse=True) and min(kls) > 0   # 30 layers in blocks of 3
    assert sorted(i for row in r["ranked"] for i in row["layers"]) == list(range(30))
    assert abs(r["baseline_kl"]) < 1e-3 and r["all_layers_kl"] > max(kls)          # the whole model moves most
    assert r["num_texts"] == 3 and r["tokens"] > 50
    for entry in r["suggested_ignore"]:
        assert entry.startswith(r"re:.*layers\.")
    assert "suggested quantization.ignore" in res.stdout or "no layer stands out" in res.stdout


def test_sweep_refuses_a_variant_without_fp8_weights(tmp_path):
    recipe = {"name": "sens", "model": {"id": str(DEMO_MODEL)}, "baseline": {"name": "bf16"},
              "variants": [{"name": "kv", "kv_cache_dtype": "fp8"}], "throughput": {"request_rates": [1]}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    res = run_cli("sensitivity", str(path), "--variant", "kv")
    assert res.returncode == 2 and "FP8 or FP8_DYNAMIC" in res.stderr
    assert run_cli("sensitivity", str(path), "--variant", "nope").returncode == 2
