"""Outputs are sinks in a registry (suite.outputs.sinks): publish runs every registered sink, so a new output
is one module plus one register() call. The toy sink below is registered from this test module, with no edit
of suite/, and publish writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_summary
from suite.analysis.load import load_summary, write_tracking
from suite.outputs import sinks
from suite.outputs.publish import publish


@pytest.fixture
def toy_sink():
    seen = {}

    def write(summary, run_dir, ctx):
        out = run_dir / "toy.txt"
        out.write_text(f"{summary.recipe_name} {len(summary.variants)}\n")
        seen["ctx"] = ctx
        return {"toy_txt": str(out)}  # the artifacts it wrote: publish records them, the sink changes no summary

    sink = sinks.register(sinks.Sink("toy", write))
    yield seen
    sinks.unregister("toy")


def test_builtin_sinks_in_publish_order():
    assert list(sinks.SINKS)[:4] == ["timeline", "frontier", "report", "mlflow"]
    mlflow_sink = sinks.SINKS["mlflow"]
    assert mlflow_sink.after_summary and mlflow_sink.tracking


def test_a_toy_output_registered_from_a_test_is_written_by_publish(tmp_path, toy_sink):
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5},
                            "fp8": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    events = []
    before = summary.model_dump()
    published = publish(summary, tmp_path, tmp_path, track=False, resumed=False, report=lambda *e: events.append(e))
    assert summary.model_dump() == before  # nothing wrote back into the summary given
    assert published.artifacts["toy_txt"] == str(tmp_path / "toy.txt") and published.finished
    assert (tmp_path / "toy.txt").read_text().split()[-1] == "2"
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["artifacts"]["toy_txt"] == "toy.txt"  # named relative to the run folder (suite.records.paths)
    assert (tmp_path / "report.html").exists()  # the built-in sinks still ran
    assert not events  # not tracked: the MLflow sink did not run
    assert toy_sink["ctx"].track is False


def test_register_replaces_a_sink_of_the_same_name(toy_sink):
    n = len(sinks.SINKS)
    sinks.register(sinks.Sink("toy", lambda *a: None))
    assert len(sinks.SINKS) == n


def test_tracked_publish_runs_the_mlflow_sink_after_summary_json(tmp_path, monkeypatch):
    from suite.outputs import mlflow

    calls = []

    def fake_track(summary, summary_path, out_root, resumed=False, end_times=None):
        calls.append((summary_path.is_file(), out_root, resumed, end_times))
        write_tracking(summary.model_copy(update={"tracking_pending": "server down"}), summary_path.parent)
        return "server down"

    monkeypatch.setattr(mlflow, "track_summary", fake_track)
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    events = []
    publish(summary, tmp_path, tmp_path / "out", track=True, resumed=True, report=lambda *e: events.append(e))
    assert calls == [(True, tmp_path / "out", True, None)]  # summary.json was there when MLflow was asked
    assert events == [("track", "mlflow", "start"), ("track", "mlflow", "failed")]
    written = load_summary(tmp_path)  # summary.json with tracking.json laid over it, as every command reads it
    assert "track" in written.stage_wall_s and written.tracking_pending == "server down"
    tracked = json.loads((tmp_path / "tracking.json").read_text())  # the MLflow sink's state, in its own file
    assert "track" in tracked["stage_wall_s"] and tracked["tracking_pending"] == "server down"


def test_publish_writes_summary_json_once_and_tracking_beside_it(tmp_path, monkeypatch):
    from suite.outputs import mlflow
    from suite.records.summary import RunSummary

    def fake_track(summary, summary_path, out_root, resumed=False, end_times=None):
        write_tracking(summary.model_copy(update={"tracking_pending": "server down"}), summary_path.parent)
        return "server down"

    written = []
    real_write = RunSummary.write
    monkeypatch.setattr(RunSummary, "write", lambda self, path, root=None: written.append(Path(path).name) or real_write(self, path, root))
    monkeypatch.setattr(mlflow, "track_summary", fake_track)
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    publish(summary, tmp_path, tmp_path / "out", track=True, resumed=False, report=lambda *e: None)
    assert written == ["summary.json"]
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["tracking_pending"] is None and "track" not in on_disk["stage_wall_s"]
    assert load_summary(tmp_path).tracking_pending == "server down"


def test_a_new_publish_drops_the_earlier_tracking_state_and_summarize_keeps_it(tmp_path):
    (tmp_path / "tracking.json").write_text(json.dumps({"tracking": None, "tracking_pending": "earlier"}))
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    publish(summary, tmp_path, tmp_path, track=False, resumed=True, report=lambda *e: None, keep_tracking=True)
    assert load_summary(tmp_path).tracking_pending == "earlier"
    publish(summary, tmp_path, tmp_path, track=False, resumed=True, report=lambda *e: None)  # a resume, not tracked
    assert not (tmp_path / "tracking.json").exists() and load_summary(tmp_path).tracking_pending is None


def test_a_folder_from_before_tracking_json_reads_as_it_is_and_a_broken_one_is_named(tmp_path):
    from suite.runtime.errors import SuiteError

    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    summary.tracking_pending = "server down"
    summary.stage_wall_s["track"] = 1.5
    summary.write(tmp_path / "summary.json")  # as publish wrote it before tracking.json
    again = load_summary(tmp_path)
    assert again.tracking_pending == "server down" and again.stage_wall_s["track"] == 1.5
    (tmp_path / "tracking.json").write_text("{not json")
    with pytest.raises(SuiteError, match="tracking.json"):
        load_summary(tmp_path)
