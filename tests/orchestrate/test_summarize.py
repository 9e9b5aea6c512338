"""`suite summarize RUN_DIR` (issue 38 part 3): a run folder's summary rebuilt from its stage results, running no
stage: the same metrics as the runner's for a full run, an error per missing job for a partial run (no gate passes
it), and the same for a folder moved elsewhere (stand-in stages: see test_run_talks.stand_in_stages); an archived
folder (items.jsonl.gz in place of lm-eval's samples files) is compared item by item from its items files."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from test_run_talks import stand_in_stages

import suite
from suite import cli
from suite.analysis.load import load_summary
from suite.analysis.derive import ARCHIVED, summarize
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK, SuiteError
from suite.records.evaluate import EvaluateResult


def a_run(tmp_path, demo_recipe_copy, monkeypatch) -> Path:
    stand_in_stages(tmp_path, monkeypatch)
    recipe = demo_recipe_copy(eval__tasks=[{"name": "suite_mmlu", "num_fewshot": 0, "limit": 1.0}],  # what it scores
                              gates__min_throughput_gain=None)  # the stand-in serves both variants alike
    return suite.run(recipe, track=False, output_dir=str(tmp_path / "runs"), report=lambda *e: None).run_dir


def metrics(summary) -> dict:
    return {v.name: (v.metrics, v.errors, [s.model_dump() for s in (v.result(EvaluateResult).scores if v.result(EvaluateResult) else [])])
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
    (run_dir / "run.json").unlink()  # nor what the runner writes when its job loop ends
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
    (run_dir / "run.json").unlink()  # an interrupted run: its job loop never ended
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


def test_a_finished_runs_result_removed_or_broken_is_refused_not_a_failure(tmp_path, demo_recipe_copy, monkeypatch,
                                                                          capsys):
    """A finished run (run.json says its errors: none) whose stage result was then removed or broken: the folder is
    not what the run left, so no verdict (exit 2), never a verdict without it."""
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    result = run_dir / "variants" / "fp8-kv" / "evaluate.result.json"
    kept = result.read_bytes()
    for tamper in (lambda: result.unlink(), lambda: result.write_text("{not json")):
        tamper()
        capsys.readouterr()
        assert cli.main(["gate", str(run_dir), "--no-record"]) == EXIT_BAD_INPUT
        assert "fp8-kv/evaluate.result.json" in capsys.readouterr().err
        result.write_bytes(kept)
    assert cli.main(["gate", str(run_dir), "--no-record"]) == EXIT_OK


TASK = "suite_mmlu"  # what the stand-in evaluate scores, on acc,none (test_runner_stage.RESULT)


def with_samples(run_dir: Path, scores: dict[str, list[float]]) -> None:
    """Give each variant's evaluate result a samples file of lm-eval's shape holding these per-item scores."""
    for name, values in scores.items():
        vdir = run_dir / "variants" / name
        samples = vdir / "evaluate" / f"samples_{TASK}.jsonl"
        samples.parent.mkdir(exist_ok=True)
        samples.write_text("".join(json.dumps({
            "doc_id": i, "task": TASK, "filter": "none", "doc": {"question": f"q{i}"}, "arguments": [[f"q{i}", " A"]],
            "resps": [[[-1.0, bool(v)]]], "filtered_resps": [[-1.0, bool(v)]], "acc": v}) + "\n"
            for i, v in enumerate(values)))
        data = json.loads((vdir / "evaluate.result.json").read_text())
        data["samples_files"] = {TASK: samples.relative_to(run_dir).as_posix()}  # as the run writes it
        (vdir / "evaluate.result.json").write_text(json.dumps(data))


def archive(run_dir: Path) -> None:
    """What the studies' collect step does to a run folder (studies/2026-12-05-verdicts/scripts/collect.py): each
    evaluate folder's samples file becomes items.jsonl.gz beside it (each row's task, doc_id, filter, filtered_resps
    and score) and goes."""
    for samples in run_dir.glob("variants/*/evaluate/samples_*.jsonl"):
        with gzip.open(samples.parent / "items.jsonl.gz", "wt", encoding="utf-8") as out:
            for line in samples.read_text().splitlines():
                row = json.loads(line)
                out.write(json.dumps({k: row[k] for k in ("task", "doc_id", "filter", "filtered_resps", "acc")}) + "\n")
        samples.unlink()


def test_an_archived_folder_is_compared_item_by_item_from_its_items_files(tmp_path, demo_recipe_copy, monkeypatch,
                                                                          capsys):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    with_samples(run_dir, {"bf16": [1.0] * 20 + [0.0] * 20,
                           "fp8-kv": [1.0] * 17 + [0.0] * 3 + [1.0] + [0.0] * 19})  # 3 items lost, 1 gained
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    assert ARCHIVED not in capsys.readouterr().out
    full = load_summary(run_dir)
    (paired,) = next(v for v in full.variants if v.name == "fp8-kv").paired
    assert (paired["n"], paired["gained"], paired["lost"]) == (40, 1, 3)

    archive(run_dir)
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    said = capsys.readouterr().out.splitlines()
    assert said[1] == (f"{ARCHIVED} 2 items.jsonl.gz file(s) in place of lm-eval's samples files, which are not in "
                       "the folder (the same per-item scores): variants/bf16/evaluate/items.jsonl.gz, "
                       "variants/fp8-kv/evaluate/items.jsonl.gz")
    after = load_summary(run_dir)
    assert metrics(after) == metrics(full)
    assert [v.paired for v in after.variants] == [v.paired for v in full.variants]
    assert after.warnings == [*full.warnings, said[1]]
    # the summary keeps the paths the stage recorded (the gate's per-item records are the stage's, not the archive's)
    assert [v.result(EvaluateResult).samples_files for v in after.variants] == [v.result(EvaluateResult).samples_files for v in full.variants]
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK  # summarized again: said once
    assert load_summary(run_dir).warnings == after.warnings

    (run_dir / "variants" / "fp8-kv" / "evaluate" / "items.jsonl.gz").unlink()  # nothing stands in for it: refused
    with pytest.raises(SuiteError) as refused:
        summarize(run_dir)
    assert f"fp8-kv/evaluate/samples_{TASK}.jsonl" in str(refused.value)


def test_a_real_archived_study_folder_gives_the_paired_comparison_its_run_recorded(tmp_path):
    """The verdicts study's served run, as studies/2026-12-05-verdicts/scripts/collect.py kept it (items.jsonl.gz in
    place of lm-eval's samples files; the run's own summary.json beside), summarized in a copy."""
    study = ROOT / "studies/2026-12-05-verdicts/results/runs-a-served/20261205-120418-verdicts-a-served"
    run_dir = tmp_path / study.name
    shutil.copytree(study, run_dir)
    recorded = json.loads((study / "summary.json").read_text())
    summary = summarize(run_dir)
    interval = ("ci_low", "ci_high", "ci_method")  # the run recorded a bootstrap interval; 0/1 scores now get Tango's
    assert [[{k: x for k, x in p.items() if k not in interval} for p in v.paired] for v in summary.variants] == \
        [[{k: x for k, x in p.items() if k not in interval} for p in v["paired"]] for v in recorded["variants"]]
    (paired,) = summary.variants[1].paired
    assert paired["ci_method"] == "tango" and paired["ci_low"] < paired["delta"] < paired["ci_high"]
    assert (paired["n"], paired["gained"], paired["lost"]) == (1319, 55, 69)
    assert [w for w in summary.warnings if w.startswith(ARCHIVED)] == [
        f"{ARCHIVED} 2 items.jsonl.gz file(s) in place of lm-eval's samples files, which are not in the folder (the "
        "same per-item scores): variants/bf16-served/evaluate/items.jsonl.gz, variants/fp8kv-served/evaluate/items.jsonl.gz"]


def test_a_planted_items_file_moves_no_gate_and_the_summary_says_which_files_it_read(tmp_path, demo_recipe_copy,
                                                                                       monkeypatch, capsys):
    """An archived folder's items file rewritten to say the FP8 variant lost nothing: summarize reads it (and says so
    in its warning), but `suite gate` judges the stage's own per-item records, which are gone: no verdict (exit 2)."""
    from suite.runtime.errors import EXIT_BAD_INPUT

    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    with_samples(run_dir, {"bf16": [1.0] * 20 + [0.0] * 20, "fp8-kv": [1.0] * 17 + [0.0] * 23})
    archive(run_dir)
    with gzip.open(run_dir / "variants" / "fp8-kv" / "evaluate" / "items.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write("".join(json.dumps({"task": TASK, "doc_id": i, "filter": "none", "acc": 1.0}) + "\n"
                          for i in range(40)))
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    assert any(w.startswith(ARCHIVED) and "variants/fp8-kv/evaluate/items.jsonl.gz" in w
               for w in load_summary(run_dir).warnings)
    capsys.readouterr()
    assert cli.main(["gate", str(run_dir), "--no-record"]) == EXIT_BAD_INPUT
    said = capsys.readouterr()
    assert "NO VERDICT" in said.out + said.err and "samples_suite_mmlu.jsonl not found" in said.err


@pytest.mark.parametrize("bad", [b"not gzip at all", gzip.compress(b"{not json\n"), gzip.compress(b'{"acc": 1.0}\n'),
                                 gzip.compress(b"[1, 2]\n"), gzip.compress(b"\xff\xfe\n"),
                                 gzip.compress(b'{"task": "t", "doc_id": 0, "acc": 1.0}\n')[:-8]],
                         ids=["not-gzip", "not-json", "no-doc-id", "not-an-object", "not-utf8", "cut-short"])
def test_an_unreadable_items_file_is_one_error_line_naming_it(tmp_path, demo_recipe_copy, monkeypatch, capsys, bad):
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    with_samples(run_dir, {"bf16": [1.0] * 20 + [0.0] * 20, "fp8-kv": [1.0] * 17 + [0.0] * 23})
    archive(run_dir)
    items = run_dir / "variants" / "fp8-kv" / "evaluate" / "items.jsonl.gz"
    items.write_bytes(bad)
    capsys.readouterr()
    from suite.runtime.errors import EXIT_BAD_INPUT

    assert cli.main(["summarize", str(run_dir)]) == EXIT_BAD_INPUT  # not a traceback
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {items}: an archived items file that cannot be read, standing in for the gone "
                           f"samples_{TASK}.jsonl")


def test_a_copied_run_folder_gives_the_same_answers_with_its_output_folder_gone(tmp_path, demo_recipe_copy,
                                                                                 monkeypatch, capsys):
    """Issue 46 item 1: everything a verdict reads is in the run folder under names relative to it, so `suite gate`,
    `suite summarize`, `suite report` and `suite.load_run` answer the same on a copy at another path, once the
    output folder it was made in (its evaluation cache too) is deleted."""
    run_dir = a_run(tmp_path, demo_recipe_copy, monkeypatch)
    with_samples(run_dir, {"bf16": [1.0] * 20 + [0.0] * 20, "fp8-kv": [1.0] * 17 + [0.0] * 3 + [1.0] + [0.0] * 19})
    assert cli.main(["summarize", str(run_dir)]) == EXIT_OK
    before, gated = load_summary(run_dir), cli.main(["gate", str(run_dir), "--no-record"])
    verdict = suite.load_run(run_dir).gate().outcome
    stored = json.loads((run_dir / "summary.json").read_text())
    for record in ("plan.json", "jobs.json", "run-options.json", "variants/bf16/evaluate.config.json",
                   "variants/bf16/evaluate.result.json", "variants/bf16/benchmark.result.json"):
        assert json.loads((run_dir / record).read_text())["schema_version"] == 2, record
    assert stored["schema_version"] == 2
    assert stored["variants"][0]["stages"]["evaluate"]["samples_files"] == {TASK: f"variants/bf16/evaluate/samples_{TASK}.jsonl"}

    copy = tmp_path / "another-machine" / "artifacts" / run_dir.name
    shutil.copytree(run_dir, copy)
    shutil.rmtree(tmp_path / "runs")  # the output folder: the run folder, the evaluation cache, the checkpoints
    capsys.readouterr()
    assert cli.main(["gate", str(copy), "--no-record"]) == gated
    assert suite.load_run(copy).gate().outcome == verdict
    assert cli.main(["summarize", str(copy)]) == EXIT_OK
    after = load_summary(copy)
    assert metrics(after) == metrics(before) and after.run_dir == str(copy)
    assert cli.main(["gate", str(copy), "--no-record"]) == gated
    assert cli.main(["report", str(copy)]) == EXIT_OK
    assert f"report: {copy / 'report.html'}" in capsys.readouterr().out
    assert str(run_dir) not in (copy / "summary.json").read_text()
