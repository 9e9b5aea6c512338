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


def test_gate_verdict_tags_runs_and_registers_the_candidate(tmp_path):
    """`suite gate` on a logged run: tags on pass and fail; on pass the FP8 checkpoint becomes a version of
    a registered model with the alias 'candidate' and the gate results as tags."""
    import json

    from mlflow.tracking import MlflowClient

    from conftest import run_cli
    from suite.results import QuantizeResult

    def logged(name, fp8_gsm8k):
        run_dir = tmp_path / name
        run_dir.mkdir()
        s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.6, "tput.output_tok_s": 100.0},
                          "fp8": {"acc.suite_gsm8k": fp8_gsm8k, "acc.suite_mmlu": 0.6, "tput.output_tok_s": 140.0}},
                         gates={"default_max_drop": 0.02, "min_throughput_gain": 1.2}, run_dir=str(run_dir))
        ckpt = tmp_path / f"ckpt-{name}"
        ckpt.mkdir()
        (ckpt / "config.json").write_text("{}")
        (ckpt / "provenance.json").write_text("{}")
        s.variants[1].quantize = QuantizeResult(checkpoint=str(ckpt), key=f"key-{name}", cache_hit=False, wall_s=1.0)
        add_deltas(s.variants)
        uri = track.default_uri(tmp_path)
        track.run(track.TrackConfig(s, run_dir / "summary.json", uri, "gates", tmp_path / "artifacts"))
        return run_dir, uri

    ok_dir, uri = logged("ok", 0.49)
    res = run_cli("gate", str(ok_dir))
    assert res.returncode == 0 and "registered demo-cpu-fp8 version 1 as 'candidate'" in res.stdout, res.stdout + res.stderr
    client = MlflowClient(tracking_uri=uri)
    mv = client.get_model_version_by_alias("demo-cpu-fp8", "candidate")
    assert mv.tags["checkpoint_key"] == "key-ok" and "threshold 0.02" in mv.tags["gate.max drop suite_gsm8k"]
    assert mv.source.startswith("runs:/") and "config.json" in [a.path.split("/")[-1] for a in
                                                                 client.list_artifacts(mv.run_id, "checkpoint")]
    s = json.loads((ok_dir / "summary.json").read_text())
    assert client.get_run(s["tracking"]["variant_run_ids"]["fp8"]).data.tags["gate.result"] == "pass"

    bad_dir, _ = logged("bad", 0.45)
    res = run_cli("gate", str(bad_dir))
    assert res.returncode == 1
    s = json.loads((bad_dir / "summary.json").read_text())
    tags = client.get_run(s["tracking"]["variant_run_ids"]["fp8"]).data.tags
    assert tags["gate.result"] == "fail" and "max drop suite_gsm8k" in tags["gate.failed"]
    assert client.get_run(s["tracking"]["parent_run_id"]).data.tags["gate.result"] == "fail"
    assert client.get_model_version_by_alias("demo-cpu-fp8", "candidate").version == mv.version  # unchanged
