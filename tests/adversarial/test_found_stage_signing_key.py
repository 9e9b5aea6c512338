"""Found by the adversarial review: the stage processes inherited ``SUITE_MANIFEST_KEY``, the CI secret that signs a
run folder's manifest and seals the store. A stage runs code the suite does not control (a team's task folder's
Python, model-written code under evaluation, lm-eval's and vLLM's imports), and with the key such code could sign a
forged run folder or seal a poisoned store entry. Signing and sealing are the parent's: the key stays there."""

from __future__ import annotations

from suite.outputs.manifest import KEY_ENV
from suite.runtime.envs import stage_env


def test_the_signing_key_never_reaches_a_stage_process(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "the-ci-secret")
    env = stage_env({})
    assert KEY_ENV not in env and "the-ci-secret" not in env.values()
