"""What outputs know of a stage travels with the data they read (outputs never import the stage registry): each
stage's colour in jobs.json for timeline.png, the benchmark's artifact folder named as its folder in the run."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import make_summary
from suite.outputs import mlflow_files, timeline
from suite.stages.registry import BENCHMARK, EVALUATE, QUANTIZE, STAGES
from suite.records.benchmark import BenchmarkResult


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def _colours(png: Path) -> set[tuple[int, int, int]]:
    from PIL import Image

    with Image.open(png) as img:
        return {c[:3] for _, c in img.convert("RGB").getcolors(maxcolors=1 << 20)}


def test_jobs_json_carries_the_registrys_colours_and_the_timeline_draws_them(demo_recipe_copy, tmp_path):
    from suite.orchestrate.executors.local import LocalExecutor
    from suite.orchestrate.jobs import write_timeline
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe

    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    stages = (QUANTIZE, EVALUATE, BENCHMARK)
    rows = [{"id": f"{stage}:fp8-kv", "stage": stage, "started_s": i * 10.0, "ended_s": i * 10.0 + 8.0,
             "placement": "CPU", "wall_s": 8.0, "overhead_s": 0.01} for i, stage in enumerate(stages)]
    path = tmp_path / "jobs.json"
    write_timeline(path, LocalExecutor(plan.executor, gpus=[]), plan, rows, time.time())
    written = json.loads(path.read_text())
    assert written["stages"] == {s: {"colour": STAGES[s].colour} for s in stages}
    assert timeline.write(path, tmp_path / "timeline.png")
    drawn = _colours(tmp_path / "timeline.png")
    assert {_rgb(STAGES[s].colour) for s in stages} <= drawn

    # a jobs.json written before the stages' colours were in it still draws, every bar in one colour
    del written["stages"]
    path.write_text(json.dumps(written))
    assert timeline.write(path, tmp_path / "old.png")
    drawn = _colours(tmp_path / "old.png")
    assert _rgb(timeline.OTHER) in drawn
    assert not {_rgb(STAGES[s].colour) for s in stages} & drawn


def test_the_benchmarks_files_keep_their_artifact_folders(tmp_path):
    """The MLflow layout: the benchmark's files under benchmark/ (its monitor's under benchmark/monitor/), a served
    evaluation's log under stages/served/, as before the folder's name came from the run instead of a literal."""
    vdir = tmp_path / "variants" / "fp8"
    out = vdir / "benchmark"
    out.mkdir(parents=True)
    for name in ("server.log", "bench-slo-1.json", "offline.json", "monitor-r0.jsonl", "evaluate.log",
                 "evaluate.stacks.json"):
        (out / name).write_text("{}")
    (vdir / "benchmark.log").write_text("log")
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "tput.output_tok_s": 100.0},
                      "fp8": {"acc.suite_gsm8k": 0.5, "tput.output_tok_s": 140.0}})
    v = s.variants[1]
    v.stages[BENCHMARK] = v.result(BenchmarkResult).model_copy(update={"server_log": str(out / "server.log")})
    files = mlflow_files.variant_artifacts(v, vdir)
    folders = {Path(f).name: folder for f, folder in files if f and Path(f).parent == out}
    assert folders == {"server.log": "benchmark", "bench-slo-1.json": "benchmark", "offline.json": "benchmark",
                       "monitor-r0.jsonl": "benchmark/monitor", "evaluate.log": "stages/served",
                       "evaluate.stacks.json": "stages/served"}
    assert (str(vdir / "benchmark.log"), "stages") in files
