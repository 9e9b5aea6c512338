"""The release gate as a CI pipeline (docs/12-ci.md, examples/ci/): the example workflow files are valid YAML whose
`suite` commands exist, and both jobs played on CPU in two separate directories: the "GPU job" makes a finished,
signed, tracked run folder and uploads it as an archive; the "CPU job" downloads it into its own workspace, gates it
on its checkout's copy of the recipe with --verify --junit --json, and registers the passing checkpoint."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, build_gated_run, publish_summary, write_run_facts, write_run_recipe

EXAMPLES = ROOT / "examples" / "ci"
TASK = "suite_gsm8k"
GATES = {"max_drop": {TASK: 0.05}, "non_inferiority_margin": {TASK: 0.06}, "min_throughput_gain": 1.2}
KEY = "ci-secret-for-the-test"


# ------------------------------------------------------------------------------------------- the example workflows


def github_scripts(doc: dict) -> dict[str, list[str]]:
    return {name: [step["run"] for step in job["steps"] if "run" in step] for name, job in doc["jobs"].items()}


def gitlab_scripts(doc: dict) -> dict[str, list[str]]:
    return {name: job["script"] for name, job in doc.items() if isinstance(job, dict) and "script" in job}


def suite_commands(scripts: list[str]) -> list[list[str]]:
    """The `suite ...` command lines of a job's scripts, split as a shell would (comments dropped)."""
    lines = [line for script in scripts for line in script.splitlines()]
    return [words for words in (shlex.split(line, comments=True) for line in lines) if words and words[0] == "suite"]


def options_of(command: str) -> set[str]:
    from suite.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert command in sub.choices, f"`suite {command}` is not a command"
    return {opt for action in sub.choices[command]._actions for opt in action.option_strings}


@pytest.mark.parametrize("name, jobs_of", [("github-actions.yml", github_scripts), ("gitlab-ci.yml", gitlab_scripts)])
def test_the_example_workflows_run_commands_the_cli_has(name, jobs_of):
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    jobs = jobs_of(doc)
    assert len(jobs) == 2, jobs  # a GPU job that runs, a CPU job that gates
    seen = []
    for job, scripts in jobs.items():
        for words in suite_commands(scripts):
            known = options_of(words[1])
            flags = [w.split("=")[0] for w in words[2:] if w.startswith("--")]
            assert set(flags) <= known, f"{name}: {job}: {' '.join(words)}: unknown {set(flags) - known}"
            seen.append(words)
    runs = [w for w in seen if w[1] == "run"]
    gates = [w for w in seen if w[1] == "gate"]
    assert runs and len(gates) == 1, seen
    gate = gates[0]
    assert {"--recipe", "--verify", "--junit"} <= set(gate) and "--no-record" not in gate, gate
    junit = gate[gate.index("--junit") + 1]
    text = (EXAMPLES / name).read_text()
    if name == "gitlab-ci.yml":
        assert doc["gate"]["artifacts"]["reports"]["junit"] == junit and doc["gate"]["needs"] == ["measure"]
    else:
        reporter = [s for s in doc["jobs"]["gate"]["steps"] if "junit-report" in s.get("uses", "")]
        assert reporter and reporter[0]["with"]["report_paths"] == junit and doc["jobs"]["gate"]["needs"] == "measure"
    assert "SUITE_MANIFEST_KEY" in text  # --verify needs the key the run was signed with, in both jobs


# ------------------------------------------------------------------------------------------- both jobs, on CPU


def gpu_job(workspace: Path, artifacts: Path, mlflow_uri: str) -> tuple[str, bytes]:
    """`suite run` as the GPU job leaves it: a finished run folder (variant fp8 served from a brought checkpoint
    folder, its sha256 recorded), logged to the shared MLflow, signed with the CI key; uploaded as an archive. The
    workspace is then gone, as a CI runner's is. Returns (the checkpoint's recorded sha256, the recipe's bytes)."""
    from suite.outputs import manifest
    from suite.outputs import mlflow as track
    from suite.plan.keys import weights_fingerprint
    from suite.records.summary import RunSummary

    workspace.mkdir()
    ckpt = workspace / "checkpoints" / "fp8"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text('{"quantization_config": {"quant_method": "fp8"}}')
    (ckpt / "model.safetensors").write_bytes(b"weights" * 100)
    s = build_gated_run(workspace, GATES)
    run = workspace / "run"
    spec = s["recipe"]["variants"][0]
    spec.pop("quantization")
    spec.update(model={"id": str(ckpt), "revision": None}, kv_cache_dtype="auto")
    s = write_run_recipe(run, s)  # the recipe that ran, and its recorded hash
    s["variants"][1].update(model_path=str(ckpt), model_sha256=weights_fingerprint(str(ckpt)))
    write_run_facts(run, s)  # run.json: the recipe's hash and the checkpoint's fingerprint, as the runner records them
    publish_summary(run)
    track.run(track.TrackConfig(RunSummary.model_validate(s), run / "summary.json", mlflow_uri, "ci",
                                workspace / "mlflow-artifacts"))
    manifest.write(run, s["recipe_sha256"], KEY)
    shutil.make_archive(str(artifacts / "run-folder"), "gztar", root_dir=run)
    recipe = (run / "recipe.yaml").read_bytes()
    shutil.rmtree(workspace)
    return s["variants"][1]["model_sha256"], recipe


def cpu_job(workspace: Path, artifacts: Path, recipe: bytes, download_to: Path) -> subprocess.CompletedProcess:
    """The CPU job: a checkout holding the team's recipe, the run folder downloaded, then `suite gate`."""
    (workspace / "recipes").mkdir(parents=True)
    (workspace / "recipes" / "release.yaml").write_bytes(recipe)
    shutil.unpack_archive(artifacts / "run-folder.tar.gz", download_to)
    env = {**os.environ, "SUITE_MANIFEST_KEY": KEY, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "suite", "gate", str(download_to), "--recipe", "recipes/release.yaml",
                           "--verify", "--junit", "gate.xml", "--json", "gate.json"],
                          cwd=workspace, env=env, capture_output=True, text=True)


def play(tmp_path, where: str):
    from suite.outputs import mlflow as track

    artifacts, uri = tmp_path / "artifacts", track.default_uri(tmp_path / "mlflow-server")
    artifacts.mkdir()
    (tmp_path / "mlflow-server").mkdir()
    sha, recipe = gpu_job(tmp_path / "gpu-job", artifacts, uri)
    assert not (tmp_path / "gpu-job").exists()
    cpu = tmp_path / "cpu-job"
    # where the CPU job puts the run: the GPU job's path (a runner with the same workspace path), or its own
    download_to = tmp_path / "gpu-job" / "run" if where == "the same path" else cpu / "run"
    return cpu, sha, uri, cpu_job(cpu, artifacts, recipe, download_to)


def check_pipeline(tmp_path, where):
    from mlflow.tracking import MlflowClient

    cpu, sha, uri, res = play(tmp_path, where)
    said = res.stdout + res.stderr
    assert res.returncode == 0 and "gate: PASS" in res.stdout and "verified:" in res.stderr, said
    root = ET.parse(cpu / "gate.xml").getroot()
    report = json.loads((cpu / "gate.json").read_text())
    assert report["outcome"] == "pass" and report["exit_code"] == 0 and len(report["cases"]) >= 3, report
    assert root.get("tests") == str(len(report["cases"])) and root.get("failures") == root.get("errors") == "0"
    assert {tc.get("name") for tc in root.iter("testcase")} == {c["gate"] for c in report["cases"]}
    assert report["registration"] == [f"registered demo-cpu-fp8 version 1 as 'candidate' ({uri})"], report
    mv = MlflowClient(tracking_uri=uri).get_model_version_by_alias("demo-cpu-fp8", "candidate")
    assert mv.tags["checkpoint_key"] == f"folder:{sha}" and mv.tags["weights"] == "uri"  # the folder stayed on the GPU box


def test_both_jobs_with_the_run_folder_at_the_gpu_jobs_path(tmp_path):
    check_pipeline(tmp_path, "the same path")


def test_both_jobs_with_the_run_folder_at_another_path(tmp_path):
    check_pipeline(tmp_path, "its own path")
