"""`suite summarize RUN_DIR` (issue 38 part 3): a run folder's summary rebuilt from its stage results, running no
stage: the same metrics as the runner's for a full run, an error per missing job for a partial run (no gate passes
it), and the same for a folder moved elsewhere (stand-in stages: see test_run_talks.stand_in_stages)."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_run_talks import stand_in_stages

import suite
from suite import cli
from suite.analysis.load import load_summary
from suite.orchestrate.summarize import summarize
from suite.runtime.errors import EXIT_OK


def a_run(tmp_path, demo_recipe_copy, monkeypatch) -> Path:
    stand_in_stages(tmp_path, monkeypatch)
    recipe = demo_recipe_copy(eval__tasks=[{"name": "suite_mmlu", "num_fewshot": 0, "limit": 1.0}],  # what it scores
                              gates__min_throughput_gain=None)  # the stand-in serves both variants alike
    return suite.run(recipe, track=False, output_dir=str(tmp_path / "runs"), report=lambda *e: None).run_dir


def metrics(summary) -> dict:
    return {v.name: (v.metrics, v.errors, [s.model_dump() for s in (v.evaluate.scores if v.evaluate else [])])
            for v in summary.variants}


def test_a_deleted_summary_is_rebuilt_with_the_same_metrics(tmp_path, demo_recipe_copy, monkeypatch, capsys):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    before = load_summary(run_dir)
    assert all(v.metrics for v in before.variants)
    (run_dir / "summary.json").unlink()
    (run_dir / "report.html").unlink()
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    assert f"{run_dir}/summary.json: 2 variant(s)\n" == capsys.readouterr().out
    after = load_summary(run_dir)
    assert metrics(after) == metrics(before)
    assert after.run_dir == before.run_dir and after.stage_elapsed_s == before.stage_elapsed_s
    assert (run_dir / "report.html").is_file()


def test_summarize_over_a_summary_keeps_the_runs_facts(tmp_path, demo_recipe_copy, monkeypatch):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    before = load_summary(run_dir)
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    after = load_summary(run_dir)
    assert metrics(after) == metrics(before)
    assert (after.started, after.finished, after.platform, after.versions) == \
        (before.started, before.finished, before.platform, before.versions)
    assert after.warnings == before.warnings


def test_a_partial_run_gives_an_error_per_missing_job_and_no_gate_passes(tmp_path, demo_recipe_copy, monkeypatch,
                                                                       capsys):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    assert cli.main(["gate", str(run_dir), "--no-record"]) == EXIT_OK
    (run_dir / "summary.json").unlink()  # interrupted after fp8-kv's quantize: no evaluate, no benchmark, no summary
    for stage in ("evaluate", "benchmark"):
        (run_dir / "variants" / "fp8-kv" / f"{stage}.result.json").unlink()
    capsys.readouterr()
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    assert "with errors: fp8-kv" in capsys.readouterr().out
    errors = {v.name: v.errors for v in load_summary(run_dir).variants}
    assert errors["bf16"] == []
    assert sorted(e.split(" ", 1)[0] for e in errors["fp8-kv"]) == ["benchmark", "evaluate"]
    assert all("not finished" in e for e in errors["fp8-kv"])
    assert cli.main(["gate", str(run_dir), "--no-record"]) != EXIT_OK


def test_a_failed_stage_stays_an_error(tmp_path, demo_recipe_copy, monkeypatch):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    (run_dir / "summary.json").unlink()
    (run_dir / "variants" / "fp8-kv" / "evaluate.result.json").write_text("{not json")  # a stage that broke
    summary = summarize(run_dir)
    (err,) = next(v for v in summary.variants if v.name == "fp8-kv").errors
    assert err.startswith("evaluate not finished")
    assert not next(v for v in summary.variants if v.name == "fp8-kv").metrics.get("acc.suite_mmlu")


def test_a_moved_run_folder_is_summarized_at_its_new_place(tmp_path, demo_recipe_copy, monkeypatch):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    before = load_summary(run_dir)
    moved = tmp_path / "elsewhere" / run_dir.name
    moved.parent.mkdir()
    shutil.move(run_dir, moved)
    (moved / "summary.json").unlink()
    assert cli.main(["summarize", str(moved)]) == EXIT_OK
    after = load_summary(moved)
    assert after.run_dir == str(moved)
    assert metrics(after) == metrics(before)
    text = (moved / "summary.json").read_text()
    assert str(run_dir) + "/" not in text, "a path still names the folder's old place"
    assert cli.main(["gate", str(moved), "--no-record"]) == EXIT_OK
