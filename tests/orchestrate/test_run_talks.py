"""`suite run` talks while it works: the run folder and logs before any stage ends, the stages' counts as log lines,
the gate verdict and report at the end; and the Python API that it goes through (stand-in stages: see
test_runner_stage.fake_stage)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from test_runner_stage import fake_stage

import suite
import suite.api
from suite import cli
from suite.cli import talk
from suite.orchestrate.progress import StageProgress
from suite.records.benchmark import BenchmarkResult, LoadPoint
from suite.records.quantize import QuantizeResult
from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV

ROOT = Path(__file__).resolve().parents[2]


def stand_in_stages(tmp_path, monkeypatch, counts: int = 0) -> None:
    """Stages that succeed at once; each evaluate first writes ``counts`` progress records, 0.7 s apart."""
    quantized = QuantizeResult(checkpoint=str(tmp_path / "ckpt"), key="k", cache_hit=False, wall_s=1.0)
    bench = BenchmarkResult(points=[LoadPoint(label="rate-inf", request_rate="inf", completed=32, output_tok_s=100.0)],
                            server_start_s=1.0, wall_s=2.0, server_log="server.log")
    script = fake_stage(tmp_path, f"""
        import json, time
        stage = sys.argv[-3]
        if stage == "evaluate":
            for i in range({counts}):
                with open(out + ".p", "w") as f:
                    json.dump({{"what": "lm-eval generate_until", "done": i + 1, "total": {counts}}}, f)
                os.replace(out + ".p", out.replace("result.json", "progress.json"))
                time.sleep(0.7)
        if stage == "quantize":
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}),
                                       "key": json.load(open(sys.argv[-2]))["key"]}})
        if stage == "benchmark":
            result_json = {bench.model_dump_json()!r}
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)


def test_start_lines_come_before_any_stage_ends_and_counts_become_log_lines(tmp_path, demo_recipe_copy, monkeypatch,
                                                                           capsys):
    stand_in_stages(tmp_path, monkeypatch, counts=3)
    monkeypatch.setattr(talk, "LOG_EVERY_S", 0.0)  # every new count a line (the periodic limit: test below)
    rc = cli.main(["run", str(demo_recipe_copy()), "--no-track"])
    out = capsys.readouterr()
    err = out.err
    assert rc == 0, err
    lines = err.splitlines()
    first_end = next(i for i, ln in enumerate(lines) if re.search(r" (ok|ok \(cached\))$", ln))
    start = next(i for i, ln in enumerate(lines) if ln.startswith("run folder: "))
    assert start < first_end
    run_dir = Path(lines[start].split(": ", 1)[1])
    assert f"  {run_dir / 'variants' / 'fp8-kv' / 'quantize.log'}" in lines[start:first_end]
    assert f"  {run_dir / 'variants' / 'bf16' / 'evaluate.log'}" in lines[start:first_end]
    counted = [ln for ln in lines if re.fullmatch(r"\d\d:\d\d:\d\d evaluate\s+bf16\s+lm-eval generate_until \d/3", ln)]
    assert len(counted) >= 2 and counted[-1].endswith("3/3"), err
    assert f"report: {run_dir / 'report.html'}" in out.out
    assert re.search(r"^gate: (PASS|FAIL|INCONCLUSIVE|NO VERDICT) \(suite gate .* for the details\)$", out.out, re.M), out.out


def test_the_recipe_check_is_announced_before_it_runs(tmp_path, monkeypatch, capsys):
    """`suite run` checks the recipe first (on a new serve environment ~20 s of asking its vLLM, with nothing on the
    screen before this line): it says so before the check starts."""
    import suite.recipe
    from suite.recipe import Problem, SuiteError

    def slow_check(path, *a, **k):
        assert capsys.readouterr().err.startswith(f"checking {path} ("), "nothing said before the check"
        raise SuiteError(Problem(str(path), "", "stop here", "-"))

    monkeypatch.setattr(suite.recipe, "load_recipe", slow_check)
    assert cli.main(["run", str(tmp_path / "r.yaml"), "--no-track"]) != 0


def test_a_run_without_the_analysis_modules_is_refused_before_any_stage(tmp_path, demo_recipe_copy, monkeypatch,
                                                                       capsys):
    """An installed wheel without its serve extra has no scipy: the run is refused at the start, naming the extra,
    not after its stages (it died in the analysis, after 2 min 37 s of the demo's stages)."""
    stand_in_stages(tmp_path, monkeypatch)
    monkeypatch.setattr(suite.api, "RUN_MODULES", ("scipy", "no_such_module_for_the_test"))
    rc = cli.main(["run", str(demo_recipe_copy()), "--no-track"])
    err = capsys.readouterr().err
    assert rc != 0 and "no_such_module_for_the_test not installed" in err and "suite[serve-cpu]" in err, err
    assert not (tmp_path / "runs").exists()  # no run folder, no stage


def test_counts_in_a_log_are_periodic_with_the_first_and_last_at_once():
    t = talk.Talk(every_s=3600)
    key = ("evaluate", "bf16")
    said = [t.progress(key, StageProgress("lm-eval generate_until", i, 10)) for i in range(11)]
    assert [s is not None for s in said] == [True] + [False] * 9 + [True]
    assert t.progress(key, StageProgress("lm-eval loglikelihood", 0, 5)) is not None  # a new phase: at once


def _drawn(display) -> list[str]:
    """What a terminal shows of the live display now: its lines, right-trimmed."""
    import io

    from rich.console import Console

    screen = Console(file=io.StringIO(), force_terminal=True, width=140, color_system=None)
    screen.print(display)
    return [ln.rstrip() for ln in screen.file.getvalue().splitlines()]


def _live_display(gpus: list[int]):
    """The live display of a demo run whose executor section lists ``gpus`` (the GPUs a local executor uses), on a
    terminal."""
    import io

    import yaml
    from rich.console import Console

    from suite.recipe import Recipe

    recipe = Recipe.model_validate({**yaml.safe_load((ROOT / "recipes" / "demo-cpu.yaml").read_text()),
                                    "executor": {"gpus": gpus}})
    console = Console(file=io.StringIO(), force_terminal=True, width=140)
    return talk.LiveDisplay(console, recipe, track=False)


def test_the_live_display_shows_a_job_count_only_once_its_stage_wrote_one():
    display = _live_display([0])
    display.report("evaluate", "bf16", "start", "GPU 0")
    display.report("quantize", "fp8", "start", "GPU 0")
    line = next(ln for ln in _drawn(display) if "evaluate" in ln)
    assert "/" not in line and "?" not in line, line  # no "0/?" before the first count
    display.report("evaluate", "bf16", "progress", StageProgress("lm-eval generate_until", 3, 10))
    line = next(ln for ln in _drawn(display) if "evaluate" in ln)
    assert "lm-eval generate_until" in line and " 3/10" in line, line
    display.report("evaluate", "bf16", "progress", StageProgress("lm-eval generate_until", 10, 10))
    display.report("evaluate", "bf16", "ok")
    display.report("quantize", "fp8", "failed")
    drawn = _drawn(display)
    evaluate = next(ln for ln in drawn if "evaluate" in ln)
    quantize = next(ln for ln in drawn if "quantize" in ln)
    assert "ok" in evaluate and "10/10" in evaluate and "1/1" not in evaluate, evaluate  # its own last count
    assert "FAILED" in quantize and "/" not in quantize, quantize  # it never counted: no "1/1"
    display.report("benchmark", "fp8", "skipped")  # never started: a line that says so, and no count
    skipped = next(ln for ln in _drawn(display) if "benchmark" in ln)
    assert "skipped" in skipped and "/" not in skipped, skipped


def test_queued_jobs_say_what_they_will_use_on_this_machine():
    from suite.plan.dag import Job, Resources

    bench = Job("benchmark", "fp8", resources=Resources(gpus=1, exclusive=True))
    evaluate = Job("evaluate", "fp8", resources=Resources(gpus=1, gpu_share=0.5))
    on_gpu = _live_display([0])
    on_gpu.watch([], [bench, evaluate])
    drawn = "\n".join(_drawn(on_gpu))
    assert "1 GPU (exclusive), 1 CPU" in drawn and "0.5 GPU, 1 CPU" in drawn, drawn
    on_cpu = _live_display([])  # a local executor without GPUs: every job on the CPU, one at a time
    on_cpu.watch([], [bench, evaluate])
    drawn = "\n".join(_drawn(on_cpu))
    assert "GPU" not in drawn and drawn.count("CPU, one job at a time") == 2, drawn
    on_cpu.watch([], [])
    assert on_cpu.table is None


def test_the_python_api_runs_the_demo_recipe_and_returns_the_frames(tmp_path, demo_recipe_copy, monkeypatch):
    stand_in_stages(tmp_path, monkeypatch)
    events = []
    run = suite.run(demo_recipe_copy(), track=False, output_dir=str(tmp_path / "api-runs"),
                    report=lambda *e: events.append(e))
    assert run.run_dir.parent == tmp_path / "api-runs"
    assert events[0] == ("run", "", "started", str(run.run_dir))
    variants = run.variants()
    assert list(variants.index) == ["bf16", "fp8-kv"] and variants.loc["bf16", "is_baseline"]
    points = run.points()
    assert list(points["variant"]) == ["bf16", "fp8-kv"] and list(points["output_tok_s"]) == [100.0, 100.0]
    assert list(run.items().columns) == ["variant", "task", "subtask", "doc_id", "metric", "score"]


@pytest.mark.parametrize("page", ["docs/01-concepts.md", "README.md"])
def test_the_guide_example_runs_on_the_demo(page, tmp_path, demo_recipe_copy, monkeypatch, capsys):
    """The Python API example of the guide and of the README runs as written (on the demo recipe, stand-in stages)."""
    stand_in_stages(tmp_path, monkeypatch)
    text = (ROOT / page).read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert '"recipes/demo-cpu.yaml"' in code
    scope: dict = {}
    exec(compile(code.replace('"recipes/demo-cpu.yaml"', repr(str(demo_recipe_copy()))), page, "exec"), scope)
    assert scope["run"].gate().outcome in ("pass", "fail", "inconclusive", "bad input")  # stand-ins score one task
    if page.startswith("docs/"):
        out = capsys.readouterr().out
        assert "rate-inf" in out and "gate passed:" in out


def test_load_run_reads_a_recorded_run_folder():
    run = suite.load_run(ROOT / "studies" / "2026-12-01-four-variants-gpu-sharing" / "results" / "h200-4variants-20261201")
    variants = run.variants()
    assert len(variants) >= 2 and variants["is_baseline"].sum() == 1


STUDY_RESULT = ROOT / "studies" / "2026-12-01-four-variants-gpu-sharing" / "results" / "h200-4variants-20261204" / \
    "bf16.evaluate.result.json"


@pytest.mark.parametrize("terminal", [True, False])
def test_an_evaluations_scores_are_a_line_each_as_recorded(terminal):
    """A real evaluate result (the H200 study's baseline): each task's headline score, ± its stderr and n, printed the
    way the result holds it, on a terminal (above the live display) and in a log alike."""
    import io

    from rich.console import Console

    from suite.records.evaluate import EvaluateResult

    result = EvaluateResult.read(STUDY_RESULT)
    display = _live_display([])
    display.console = Console(file=io.StringIO(), force_terminal=terminal, width=200, color_system=None)
    display.report("evaluate", "bf16", "scores", result.scores)
    lines = display.console.file.getvalue().splitlines()
    assert len(lines) == len(result.scores) == 4
    for line, sc in zip(lines, result.scores):
        assert re.fullmatch(r"\d\d:\d\d:\d\d evaluate  bf16  .*", line), line
        assert line.endswith(f"{sc.task} {sc.metric} {sc.value:.4f} ± {sc.stderr:.4f} (n={sc.n})"), line
    gsm8k = next(ln for ln in lines if "suite_gsm8k" in ln)
    assert gsm8k.endswith("suite_gsm8k exact_match,strict-match 0.1198 ± 0.0089 (n=1319)"), gsm8k


def test_the_first_number_is_the_baselines_score_printed_before_the_checkpoint_is_built(tmp_path, demo_recipe_copy,
                                                                                        monkeypatch, capsys):
    """On a machine without GPUs (one job at a time) the baseline's evaluation runs before the variant's quantize, and
    its scores are printed the moment its result lands, as its result file in the run folder holds them."""
    from suite.records.evaluate import EvaluateResult

    stand_in_stages(tmp_path, monkeypatch)
    rc = cli.main(["run", str(demo_recipe_copy(executor={"gpus": []})), "--no-track"])
    err = capsys.readouterr().err
    assert rc == 0, err
    lines = err.splitlines()
    run_dir = Path(next(ln for ln in lines if ln.startswith("run folder: ")).split(": ", 1)[1])
    scored = EvaluateResult.read(run_dir / "variants" / "bf16" / "evaluate.result.json").scores[0]
    events = [(i, ln) for i, ln in enumerate(lines) if re.match(r"\d\d:\d\d:\d\d ", ln)]
    first = next(i for i, ln in events if ln.endswith(" bf16 start on CPU") or ln.endswith(" fp8-kv start on CPU"))
    assert lines[first].split()[1:] == ["evaluate", "bf16", "start", "on", "CPU"], err
    ok = next(i for i, ln in events if ln.split()[1:] == ["evaluate", "bf16", "ok"])
    quantize = next(i for i, ln in events if ln.split()[1:] == ["quantize", "fp8-kv", "start", "on", "CPU"])
    assert ok + 1 < quantize, err
    assert lines[ok + 1].endswith(f"evaluate  bf16  {scored.task} {scored.metric} {scored.value:.4f} (n={scored.n})"), err
