"""How the runner judges a stage process by what it leaves: its result file, its exit code, its children.

The stage interpreter here is a small script standing in for `python -m suite.stages` (the real stages
are run by the integration tests); it writes what a stage writes and then ends the way a real one did.
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from suite.runtime.envs import SERVE_PYTHON_ENV
from suite.records.evaluate import EngineConfig
from suite.records.evaluate import EvaluateConfig, EvaluateResult, TaskScore
from suite.orchestrate.jobs import run_stage
from suite.records.quantize import QuantizeResult

RESULT = EvaluateResult(scores=[TaskScore(task="suite_mmlu", metric="acc,none", value=0.27, n=14042)],
                        results_file="r.json", wall_s=1.0, engine_load_s=0.5)


def fake_stage(tmp_path: Path, body: str) -> str:
    """An interpreter whose 'stage' runs `body` with RESULT (JSON) and the result path in scope.

    It lives at one path for the whole session (the session's base temp folder), rewritten by each test: the
    suite caches what it asks an interpreter (vLLM's engine-argument facts, ~15 s to ask on 2 cores) by the
    interpreter's path, and this interpreter answers those questions as this process's Python does, so a new
    path per test only asked the same question again. Written whole and renamed into place: a process that
    starts while it is rewritten reads one version or the other. A quantize result it writes has its checkpoint
    made where the plan puts it (a weights file whose bytes are the result's ``content_sha256`` field, if any, the
    result with the files' real content hash, the completeness mark), as the quantize stage does."""
    script = tmp_path.parent / "stage-python"
    staged = tmp_path / "stage-python"
    staged.write_text(f"#!{sys.executable}\n" + textwrap.dedent("""
        import os, subprocess, sys
        if sys.argv[1:2] == ["-c"]:  # the suite asking the interpreter about itself (versions, engine args)
            os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
        result_json, out = {result!r}, sys.argv[-1]
        def as_checkpoint(text):  # a quantize result: its checkpoint made where the plan puts it, as the stage does
            import json
            sys.path.insert(0, {root!r})
            from suite.runtime.ckptfiles import COMPLETE_MARK, RESULT_FILE, content_sha256
            cfg, res = json.load(open(sys.argv[-2])), json.loads(text)
            if "checkpoint" not in res or not cfg.get("checkpoint_dir"):
                return text
            folder = cfg["checkpoint_dir"]
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "model.safetensors"), "w") as f:  # the test's content_sha256 picks the bytes
                f.write(res.get("content_sha256") or "weights")
            res.update(checkpoint=folder, key=cfg["key"], content_sha256=content_sha256(folder))
            with open(os.path.join(folder, RESULT_FILE), "w") as f:
                f.write(json.dumps(res))
            with open(os.path.join(folder, COMPLETE_MARK), "w") as f:
                f.write(cfg["key"])
            return json.dumps(res)
        def write_result():
            text = as_checkpoint(result_json) if sys.argv[-3] == "quantize" else result_json
            with open(out + ".tmp", "w") as f:
                f.write(text)
            os.replace(out + ".tmp", out)
        print("lm-eval finished", flush=True)
    """).format(result=RESULT.model_dump_json(), root=str(Path(__file__).resolve().parents[2])) + textwrap.dedent(body))
    staged.chmod(staged.stat().st_mode | stat.S_IEXEC)
    os.replace(staged, script)
    return str(script)


@pytest.fixture
def config(tmp_path):
    return EvaluateConfig(engine=EngineConfig(model="m"), tasks=[], data_dir=str(tmp_path), include_path=str(tmp_path),
                          output_dir=str(tmp_path / "out"))


def test_result_written_then_abort_in_teardown_is_kept_with_a_note(tmp_path, config, monkeypatch):
    # what every evaluate process did on the H200: result written, then SIGABRT at interpreter exit
    monkeypatch.setenv(SERVE_PYTHON_ENV, fake_stage(tmp_path, """
        write_result()
        print("terminate called without an active exception", flush=True)
        os.abort()
    """))
    outcome = run_stage("evaluate", config, tmp_path / "v", dict(os.environ))
    assert outcome.error is None
    # a relative name is the run folder's (variants/<v>/ is two folders below it): resolved against it when read
    assert outcome.result == RESULT.model_copy(update={"results_file": str(tmp_path.parent / "r.json")})
    assert "exited with code -6 after writing its result (kept)" in outcome.note
    assert "terminate called without an active exception" in outcome.note


def test_abort_before_the_result_is_a_failure(tmp_path, config, monkeypatch):
    monkeypatch.setenv(SERVE_PYTHON_ENV, fake_stage(tmp_path, """
        print("RuntimeError: CUDA error: out of memory", flush=True)
        os.abort()
    """))
    outcome = run_stage("evaluate", config, tmp_path / "v", dict(os.environ))
    assert outcome.result is None and outcome.note is None
    assert outcome.error.startswith("evaluate failed (exit -6): RuntimeError: CUDA error: out of memory")


def test_a_result_that_does_not_parse_is_a_failure(tmp_path, config, monkeypatch):
    monkeypatch.setenv(SERVE_PYTHON_ENV, fake_stage(tmp_path, """
        open(out, "w").write('{"scores": "half a file')
        sys.exit(1)
    """))
    outcome = run_stage("evaluate", config, tmp_path / "v", dict(os.environ))
    assert outcome.result is None
    assert "its result file does not parse" in outcome.error


def test_children_left_behind_by_a_stage_are_killed(tmp_path, config, monkeypatch):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv(SERVE_PYTHON_ENV, fake_stage(tmp_path, f"""
        child = subprocess.Popen(["sleep", "300"])   # an engine core that outlives its parent
        open({str(pid_file)!r}, "w").write(str(child.pid))
        write_result()
    """))
    outcome = run_stage("evaluate", config, tmp_path / "v", dict(os.environ))
    assert outcome.error is None and outcome.note is None
    pid = int(pid_file.read_text())
    for _ in range(100):  # the orphan is reparented to init, which reaps it once killed
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"process {pid} left by the stage is still alive")


def test_resume_keeps_finished_stages_and_runs_the_rest(demo_recipe_copy, tmp_path, monkeypatch):
    """A run whose fp8-kv evaluation failed is resumed: the quantize and bf16 results are kept, only the
    failed evaluation runs again, and the summary is whole."""
    from suite.runtime.envs import QUANTIZE_PYTHON_ENV
    from suite.recipe import load_recipe
    from suite.records.quantize import QuantizeResult
    from suite.recipe.load import load_run_recipe
    from suite.orchestrate.runner import execute

    calls = tmp_path / "calls.txt"
    fail_flag = tmp_path / "fail-fp8-kv"
    fail_flag.touch()
    quantized = QuantizeResult(checkpoint=str(tmp_path / "ckpt"), key="k", cache_hit=False, wall_s=3.0)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".complete").write_text("k")  # the checkpoint is still there: nothing to rebuild
    script = fake_stage(tmp_path, f"""
        import json
        stage, cfg = sys.argv[-3], json.load(open(sys.argv[-2]))
        variant = os.path.basename(os.path.dirname(out))
        open({str(calls)!r}, "a").write(f"{{stage}} {{variant}}\\n")
        if stage == "evaluate" and variant == "fp8-kv" and os.path.exists({str(fail_flag)!r}):
            print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
            sys.exit(1)
        if stage == "quantize":  # with the planned content key, as the quantize stage writes it
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}), "key": cfg["key"]}})
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    events = []
    # executor.gpus []: one job at a time, as on a machine without GPUs, whatever this one has
    loaded = load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, executor={"gpus": []}))
    first = execute(loaded, report=lambda *e: events.append(e), track=False)
    assert [v.errors != [] for v in first.variants] == [False, True]
    # one job at a time (no GPU): the baseline's evaluation before the checkpoint's build (LocalExecutor.order)
    assert calls.read_text().split("\n")[:-1] == ["evaluate bf16", "quantize fp8-kv", "evaluate fp8-kv"]

    fail_flag.unlink()
    calls.write_text("")
    run_dir = Path(first.run_dir)
    again = load_run_recipe(run_dir)  # the run's own copy of the recipe, resolved where the recipe was
    assert again.sha256 == loaded.sha256 and again.path == loaded.path
    events.clear()
    resumed = execute(again, report=lambda *e: events.append(e), track=False, resume=run_dir)
    assert calls.read_text() == "evaluate fp8-kv\n"
    assert events[0] == ("run", "", "started", str(run_dir))  # the run's own event, before any job
    assert [e[:3] for e in events[1:] if e[2] != "start"] == [
        ("evaluate", "bf16", "resumed"), ("evaluate", "bf16", "scores"), ("quantize", "fp8-kv", "resumed"),
        ("evaluate", "fp8-kv", "ok"), ("evaluate", "fp8-kv", "scores")]  # each evaluation's scores as it lands
    assert next(e[3] for e in events if e[:3] == ("evaluate", "fp8-kv", "scores")) == \
        EvaluateResult.read(run_dir / "variants" / "fp8-kv" / "evaluate.result.json").scores
    assert resumed.run_dir == first.run_dir and all(not v.errors for v in resumed.variants)
    assert resumed.variants[1].metrics["acc.suite_mmlu.delta"] == 0.0
    assert resumed.stage_wall_s["quantize"] == 3.0  # the kept result's own time
    assert (run_dir / "summary.json").is_file() and (run_dir / "report.html").is_file()


def test_stage_processes_get_no_tracking_or_cloud_credentials(monkeypatch):
    """The evaluate stage runs model-written code: nothing it runs may find the tracking password in its
    environment (issue 13), and no stage needs one (tracking is the parent's)."""
    from suite.runtime.envs import stage_env

    secrets = {"MLFLOW_TRACKING_PASSWORD": "pw", "MLFLOW_TRACKING_USERNAME": "me", "MLFLOW_TRACKING_TOKEN": "t",
               "AWS_SECRET_ACCESS_KEY": "s", "AWS_ACCESS_KEY_ID": "id", "OPENAI_API_KEY": "k", "MY_SECRET": "x",
               "MLFLOW_TRACKING_URI": "http://admin:hunter2@tracking:5000", "DB_PASS": "p", "MYSQL_PASSWD": "p",
               "GOOGLE_APPLICATION_CREDENTIALS": "/k.json", "PGPASSWORD": "p", "AZURE_STORAGE_CONNECTION_STRING": "c"}
    for k, v in {**secrets, "HF_TOKEN": "hub", "SUITE_SERVE_PYTHON": "/x/python"}.items():
        monkeypatch.setenv(k, v)
    env = stage_env({"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert not set(secrets) & set(env)
    assert env["HF_TOKEN"] == "hub" and env["SUITE_SERVE_PYTHON"] == "/x/python"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"


def checkpointing_stage(tmp_path: Path, calls: Path, ckpt: Path, sha: Path, other: str = "") -> str:
    """A stand-in for every stage that logs "stage variant" to ``calls``; its quantize makes ``ckpt`` (complete) and
    writes the planned content key with the content hash in ``sha``; the other stages run ``other`` first."""
    other = textwrap.indent(textwrap.dedent(other).strip() or "pass", " " * 4)
    return fake_stage(tmp_path, textwrap.dedent(f"""
        import json
        stage = sys.argv[-3]
        variant = os.path.basename(os.path.dirname(out))
        open({str(calls)!r}, "a").write(f"{{stage}} {{variant}}\\n")
        if stage == "quantize":
            os.makedirs({str(ckpt)!r}, exist_ok=True)
            open(os.path.join({str(ckpt)!r}, ".complete"), "w").write("k")
            result_json = json.dumps({{"checkpoint": {str(ckpt)!r}, "key": json.load(open(sys.argv[-2]))["key"],
                                      "cache_hit": False, "wall_s": 1.0, "content_sha256": open({str(sha)!r}).read()}})
        else:
    """) + other + "\nwrite_result()\n")


@pytest.mark.parametrize("same", [True, False])
def test_resume_on_a_fresh_machine_rebuilds_the_checkpoint_and_redoes_what_a_different_one_made(
        demo_recipe_copy, tmp_path, monkeypatch, same):
    """The run folder comes back without its checkpoints (another machine): the quantize job runs again;
    a rebuild with the recorded content hash keeps the evaluations, one that differs redoes them (and the
    evaluation cache, keyed by the content hash too, does not hand back the old scores)."""
    from suite.runtime.envs import QUANTIZE_PYTHON_ENV
    from suite.recipe.load import load_run_recipe
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    calls, sha = tmp_path / "calls.txt", tmp_path / "sha"
    ckpt = tmp_path / "ckpt"
    sha.write_text("a" * 64)
    script = checkpointing_stage(tmp_path, calls, ckpt, sha)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    first = execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None)), track=False)
    made = first.variants[1].result(QuantizeResult).content_sha256
    assert made and Path(first.variants[1].result(QuantizeResult).checkpoint).is_dir()
    import shutil

    shutil.rmtree(first.variants[1].result(QuantizeResult).checkpoint)  # the machine the run continues on has no checkpoints
    if not same:
        sha.write_text("b" * 64)  # e.g. another GPU's reductions
    calls.write_text("")
    run_dir = Path(first.run_dir)
    resumed = execute(load_run_recipe(run_dir), track=False, resume=run_dir)
    ran = calls.read_text().split("\n")[:-1]
    warning = next(w for w in resumed.warnings if "checkpoint rebuilt" in w)
    if same:
        assert ran == ["quantize fp8-kv"] and "identical" in warning
    else:
        assert ran == ["quantize fp8-kv", "evaluate fp8-kv"]
        assert "differs" in warning and "redoing evaluate fp8-kv" in warning
        assert resumed.variants[1].result(QuantizeResult).content_sha256 not in (None, made)


def test_resume_redoes_what_was_made_from_other_inputs(demo_recipe_copy, tmp_path, monkeypatch):
    """Between the attempts the quantizer was upgraded (the checkpoint's content key changes) and the evaluations of
    the first attempt say they ran on another vLLM than the serve environment has now: the checkpoint is built
    again (the same bytes here, so nothing is redone for it), and every evaluation recorded with other versions
    runs again, its old result renamed .stale-versions; the summary says why. A result with this environment's
    versions is kept."""
    import json

    from suite.runtime.envs import QUANTIZE_PYTHON_ENV, serve_versions
    from suite.recipe.load import load_run_recipe
    from suite.orchestrate.runner import execute
    from suite.plan import planner
    from suite.recipe import load_recipe

    calls, versions, ckpt, sha = tmp_path / "calls.txt", tmp_path / "versions.json", tmp_path / "ckpt", tmp_path / "sha"
    sha.write_text("a" * 64)
    script = checkpointing_stage(tmp_path, calls, ckpt, sha, other=f"""  # the versions this evaluation ran with
        result_json = json.dumps({{**json.loads(result_json), "versions": json.load(open({str(versions)!r}))[variant]}})
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    now = serve_versions()  # what the serve environment has (the stand-in answers as this interpreter)
    versions.write_text(json.dumps({"bf16": now, "fp8-kv": {**now, "torch": "0.0.1-older"}}))
    first = execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None)), track=False)
    run_dir = Path(first.run_dir)
    key = first.variants[1].result(QuantizeResult).key
    real = planner.quantizer_versions
    monkeypatch.setattr(planner, "quantizer_versions", lambda: {**real(), "llmcompressor": "99.0"})
    calls.write_text("")
    resumed = execute(load_run_recipe(run_dir), track=False, resume=run_dir)
    assert calls.read_text().split("\n")[:-1] == ["quantize fp8-kv", "evaluate fp8-kv"]
    assert resumed.variants[1].result(QuantizeResult).key != key and all(not v.errors for v in resumed.variants)
    assert any(f"fp8-kv: the checkpoint's content key changed since the run began ({key[:12]} -> " in w
               for w in resumed.warnings)
    assert any("identical" in w for w in resumed.warnings)  # the same bytes: nothing redone for the checkpoint
    assert any(w.startswith("fp8-kv: its evaluate result was made with other versions than this environment's "
                            f"(torch 0.0.1-older -> {now.get('torch')})") for w in resumed.warnings), resumed.warnings
    assert (run_dir / "variants" / "fp8-kv" / "evaluate.result.stale-versions.json").is_file()
    assert not (run_dir / "variants" / "bf16" / "evaluate.result.stale-versions.json").exists()


def test_resume_redoes_the_results_of_a_base_model_rewritten_between_the_attempts(demo_recipe_copy, tmp_path,
                                                                                     monkeypatch):
    """The base model's folder is rewritten between the attempts (same names and sizes, other weights): its content is
    in the baseline's keys, so its results are not hits (renamed .stale-key) and run again, and a second resume keeps
    what the first made. The quantized variant's checkpoint key follows the model's content, so it is built again
    too (the same bytes here: its evaluation stands)."""
    import shutil

    from suite.runtime.envs import QUANTIZE_PYTHON_ENV
    from suite.recipe.load import load_run_recipe
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    from conftest import ROOT

    model = tmp_path / "model"
    model.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "models" / "smollm2-135m-instruct" / f, model / f)
    (model / "model.safetensors").write_bytes(b"a" * 4096)
    calls, ckpt, sha = tmp_path / "calls.txt", tmp_path / "ckpt", tmp_path / "sha"
    sha.write_text("a" * 64)
    script = checkpointing_stage(tmp_path, calls, ckpt, sha)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    first = execute(load_recipe(demo_recipe_copy(model__id=str(model), throughput=None,
                                                 gates__min_throughput_gain=None, executor={"gpus": []})), track=False)
    run_dir = Path(first.run_dir)
    (model / "model.safetensors").write_bytes(b"b" * 4096)
    calls.write_text("")
    resumed = execute(load_run_recipe(run_dir), track=False, resume=run_dir)
    assert calls.read_text().split("\n")[:-1] == ["evaluate bf16", "quantize fp8-kv"]  # no GPU: the measurement first
    assert "bf16: its evaluate result's content key changed since the run began: it runs again" in resumed.warnings
    assert (run_dir / "variants" / "bf16" / "evaluate.result.stale-key.json").is_file()
    calls.write_text("")
    execute(load_run_recipe(run_dir), track=False, resume=run_dir)  # what the resume made stands
    assert calls.read_text() == ""


def test_an_engine_core_failure_names_its_root_cause_not_the_wrapper():
    """The end of an evaluate log from the H200 (vLLM 0.26, 2026-12-01): the exception that ends
    the process is vLLM's 'Engine core initialization failed. See root cause above'; the failure line
    names the engine core's own AssertionError first."""
    from suite.runtime.procs import failure_line

    line = failure_line(Path(__file__).parent / "data" / "h200-vllm-0.26-engine-core-failure.log")
    assert line.startswith("AssertionError: Error in memory profiling. Initial free memory 106.13 GiB")
    assert line.endswith("(RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {})")


def test_ray_not_installed_is_one_clear_error(demo_recipe_copy, monkeypatch):
    """executor.kind: ray without Ray: the install hint, not a traceback from closing what never started."""
    import builtins

    from suite.runtime.errors import SuiteError
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "ray" or name.startswith("ray.") else real_import(name, *a, **k))
    with pytest.raises(SuiteError, match="Ray is not installed"):
        execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None,
                                             executor={"kind": "ray"})), track=False)


def test_a_second_run_finds_the_checkpoint_by_the_same_lookup_and_starts_no_quantize_process(
        demo_recipe_copy, tmp_path, monkeypatch):
    """The checkpoint folder is the checkpoints' store entry: a new run of the recipe in the same output folder finds
    it before any process starts (event 'cached', its result filed and bound as this run's job), and builds it again
    once its files no longer hash to what its result records."""
    from suite.runtime.envs import QUANTIZE_PYTHON_ENV
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    calls, ckpt, sha = tmp_path / "calls.txt", tmp_path / "ckpt", tmp_path / "sha"
    sha.write_text("a" * 64)
    script = checkpointing_stage(tmp_path, calls, ckpt, sha)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    recipe = demo_recipe_copy(throughput=None, gates__min_throughput_gain=None)
    first = execute(load_recipe(recipe), track=False)
    calls.write_text("")
    events = []
    second = execute(load_recipe(recipe), track=False, report=lambda *e: events.append(e))
    assert "quantize fp8-kv" not in calls.read_text() and ("quantize", "fp8-kv", "cached") in events
    made, found = first.variants[1].result(QuantizeResult), second.variants[1].result(QuantizeResult)
    assert found.cache_hit and found.content_sha256 == made.content_sha256 and found.job.variant == "fp8-kv"
    assert Path(second.run_dir, "variants", "fp8-kv", "quantize.config.json").is_file()
    (Path(made.checkpoint) / "model.safetensors").write_text("b" * 64)  # rewritten in place since
    calls.write_text("")
    execute(load_recipe(recipe), track=False)
    assert calls.read_text().split("\n")[:-1][0] == "quantize fp8-kv"
