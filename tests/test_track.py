"""MLflow logging of a run summary, read back through the MLflow client (SQLite store, no server)."""

from __future__ import annotations

from conftest import make_summary
from suite import track
from suite.summary import add_deltas


def test_parent_and_nested_runs(tmp_path):
    from mlflow.tracking import MlflowClient

    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.mean": 0.5, "tput.output_tok_s": 100.0},
                      "fp8": {"acc.suite_gsm8k": 0.45, "acc.mean": 0.45, "tput.output_tok_s": 140.0}},
                     run_dir=str(tmp_path / "run"))
    s.variants[1].scheme = "FP8_DYNAMIC"
    s.variants[1].engine_args = {"enforce_eager": True}
    s.versions = {"mlflow": "3.17.2"}
    add_deltas(s.variants)
    uri = track.default_uri(tmp_path)
    res = track.run(track.TrackConfig(s, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts"))

    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(res.info.parent_run_id)
    assert parent.data.tags["suite.recipe"] == "demo-cpu" and parent.info.status == "FINISHED"
    children = client.search_runs([res.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    by_variant = {r.data.tags["suite.variant"]: r for r in children}
    assert set(by_variant) == {"bf16", "fp8"}
    fp8 = by_variant["fp8"].data
    assert abs(fp8.metrics["acc.suite_gsm8k.delta"] + 0.05) < 1e-9
    assert abs(fp8.metrics["tput.output_tok_s.ratio"] - 1.4) < 1e-9
    assert fp8.params["scheme"] == "FP8_DYNAMIC" and fp8.params["engine.enforce_eager"] == "true"
    assert fp8.params["version.mlflow"] == "3.17.2"
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id)]
    assert "summary.json" in artifacts
    assert (tmp_path / "summary.json").read_text().count(res.info.parent_run_id) >= 1
