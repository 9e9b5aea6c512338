"""The wheel, installed outside the checkout: built with `uv build` (a PEP 517 front end, the tool scripts/setup.sh
already uses), installed with its base dependencies (constraints/cpu.txt's pins) into a fresh virtual environment
in tmp_path, and run from a folder with no tasks/ or calibration/ beside it: `suite tasks`, `suite validate` and
`suite plan` of the demo recipe, and `suite score-code`, all finding their data through importlib.resources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WHEEL_CAP_BYTES = 5_000_000  # tasks' data is ~2.7 MB unpacked; a wheel past this carries something it should not


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (scripts/setup.sh installs it)")
    return uv


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "--wheel", "--out-dir", out, REPO], cwd=REPO, timeout=240)
    (whl,) = out.glob("suite-*.whl")
    return whl


def test_the_wheel_carries_the_data_and_not_the_tools(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"suite", f"{wheel.name.split('-py3')[0]}.dist-info"}, tops  # no tools/, tests/, models/
    for need in ("suite/_data/tasks/mmlu/_suite_mmlu.yaml", "suite/_data/tasks/data/humaneval/HumanEval.jsonl.gz",
                 "suite/_data/tasks/humaneval/utils.py", "suite/_data/calibration/chat-demo.yaml",
                 "suite/_data/calibration/data/chat-demo.jsonl", "suite/outputs/templates/report.html.j2"):
        assert need in names, need
    in_repo = sorted(p.relative_to(REPO).as_posix() for d in ("tasks", "calibration") for p in (REPO / d).rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    assert [f for f in in_repo if f"suite/_data/{f}" not in names] == []  # every data file of the repository
    assert wheel.stat().st_size < WHEEL_CAP_BYTES


def test_the_installed_wheel_works_outside_the_checkout(wheel, tmp_path):
    uv = _uv()
    venv = tmp_path / "venv"
    _run([uv, "venv", "-q", "-p", sys.executable, venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    _run([uv, "pip", "install", "-q", "-p", py, "-c", REPO / "constraints" / "cpu.txt", wheel], cwd=tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout must not shadow the wheel
    # the checkout's quantize environment, else the one beside the environment running the tests (a worktree)
    quantize = next((q for q in (REPO / ".venv-quantize" / "bin" / "python",
                                 Path(sys.executable).parents[2] / ".venv-quantize" / "bin" / "python") if q.exists()),
                    REPO / ".venv-quantize" / "bin" / "python")
    env.update(SUITE_SERVE_PYTHON=sys.executable, SUITE_CACHE_DIR=str(tmp_path / "cache"),
               **({"SUITE_QUANTIZE_PYTHON": str(quantize)} if quantize.exists() else {}))
    found = _run([py, "-c", "import suite, suite._data as d; print(suite.__file__); print(d.folder('tasks'))"],
                 cwd=work, env=env).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in found), found  # the wheel's suite, the wheel's tasks
    suite = venv / "bin" / "suite"

    listed = _run([suite, "tasks"], cwd=work, env=env).stdout
    for task in ("suite_mmlu", "suite_gsm8k", "suite_humaneval", "suite_ceval"):
        assert task in listed

    recipe = yaml.safe_load((REPO / "recipes" / "demo-cpu.yaml").read_text())
    recipe["model"]["id"] = str((REPO / "recipes" / recipe["model"]["id"]).resolve())
    del recipe["eval"]["data_dir"]  # no ../tasks/data beside the recipe: the default is the package's copy
    (work / "demo.yaml").write_text(yaml.safe_dump(recipe))
    assert "ok" in _run([suite, "validate", "demo.yaml"], cwd=work, env=env).stdout.lower()
    plan = _run([suite, "plan", "demo.yaml"], cwd=work, env=env).stdout
    assert "quantize" in plan and "evaluate" in plan
    data_dirs = {v["evaluate"]["data_dir"] for v in json.loads(plan)["variants"].values()}
    assert data_dirs == {str(Path(found[1]) / "data")}, data_dirs  # the wheel's tasks/data, inside the venv

    no_tools = subprocess.run([suite, "data", "check", work], cwd=work, env=env, capture_output=True, text=True)
    assert no_tools.returncode == 2 and "needs a checkout" in no_tools.stderr  # tools/ stays out of the wheel

    samples = work / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(s) for s in (
        {"task_id": "HumanEval/0", "completion": "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
                                                 " for b in numbers[i + 1:])\n"},
        {"task_id": "HumanEval/2", "completion": "    return 0.0\n"})) + "\n")
    scored = json.loads(_run([suite, "score-code", samples, "--allow-code-execution", "--sandbox", "process"],
                             cwd=work, env=env).stdout)
    assert [i["passed"] for i in scored["items"]] == [True, False]
