"""Outputs are sinks in a registry (suite.outputs.sinks): publish runs every registered sink, so a new output
is one module plus one register() call. The toy sink below is registered from this test module, with no edit
of suite/, and publish writes it."""

from __future__ import annotations

import json

import pytest

from conftest import make_summary
from suite.outputs import sinks
from suite.outputs.publish import publish


@pytest.fixture
def toy_sink():
    seen = {}

    def write(summary, run_dir, ctx):
        out = run_dir / "toy.txt"
        out.write_text(f"{summary.recipe_name} {len(summary.variants)}\n")
        summary.artifacts["toy_txt"] = str(out)
        seen["ctx"] = ctx

    sink = sinks.register(sinks.Sink("toy", write))
    yield seen
    sinks.unregister("toy")


def test_builtin_sinks_in_publish_order():
    assert [s.name for s in sinks.SINKS][:4] == ["timeline", "frontier", "report", "mlflow"]
    mlflow_sink = next(s for s in sinks.SINKS if s.name == "mlflow")
    assert mlflow_sink.after_summary and mlflow_sink.tracking


def test_a_toy_output_registered_from_a_test_is_written_by_publish(tmp_path, toy_sink):
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5},
                            "fp8": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    events = []
    publish(summary, tmp_path, tmp_path, track=False, resumed=False, report=lambda *e: events.append(e))
    assert (tmp_path / "toy.txt").read_text().split()[-1] == "2"
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["artifacts"]["toy_txt"] == str(tmp_path / "toy.txt")
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
        summary.tracking_pending = "server down"
        return "server down"

    monkeypatch.setattr(mlflow, "track_summary", fake_track)
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path))
    events = []
    publish(summary, tmp_path, tmp_path / "out", track=True, resumed=True, report=lambda *e: events.append(e))
    assert calls == [(True, tmp_path / "out", True, None)]  # summary.json was there when MLflow was asked
    assert events == [("track", "mlflow", "start"), ("track", "mlflow", "failed")]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert "track" in written["stage_wall_s"] and written["tracking_pending"] == "server down"
