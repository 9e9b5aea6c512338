"""`suite validate` makes every check `suite plan` makes: a recipe validate calls ok is one plan can plan."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import DEMO_RECIPE, ROOT


def test_validate_refuses_what_plan_would_refuse_and_names_the_wheel_route(tmp_path):
    """No interpreter with llmcompressor for the demo's quantize job: validate says so (exit 2, one line), as plan
    does, and the fix names what a wheel user does, not only a checkout's script."""
    env = {**os.environ, "SUITE_QUANTIZE_PYTHON": str(tmp_path / "no-such-python")}
    said = {}
    for command in ("validate", "plan"):
        res = subprocess.run([sys.executable, "-m", "suite", command, str(DEMO_RECIPE)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
        said[command] = (res.returncode, res.stderr)
        assert res.returncode == 2, (command, res.stdout[-500:], res.stderr[-2000:])
        assert "Traceback" not in res.stderr and "no-such-python" in res.stderr
    assert said["validate"][1].strip().splitlines()[-1] == said["plan"][1].strip().splitlines()[-1]
    assert "pip install 'suite[quantize]'" in said["validate"][1]


def test_plan_jobs_says_what_a_job_uses_on_a_machine_without_gpus():
    """`suite plan --jobs` on a CPU machine: each job asks for a GPU, and the table says it runs on the CPU here."""
    from suite.orchestrate.executors.local import machine_gpus
    from suite.recipe import load_recipe

    if machine_gpus(load_recipe(DEMO_RECIPE).recipe.executor):
        import pytest

        pytest.skip("this machine has GPUs")
    res = subprocess.run([sys.executable, "-m", "suite", "plan", str(DEMO_RECIPE), "--jobs"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [ln for ln in res.stdout.splitlines() if "evaluate:bf16" in ln]
    assert rows and "1 GPU" in rows[0] and "CPU, one job at a time" in rows[0]
