"""A passed gate registers every variant, brought checkpoints included (issue 48.2): a folder by the sha256 of its
files, a hub id at its commit; once per checkpoint (a second gate reuses the version); a variant that cannot be
registered is named with the reason. Read back through the MLflow client (SQLite store, no server)."""

from __future__ import annotations

from conftest import add_serving_intervals, make_summary, plan_run, run_cli, write_run_recipe
from suite.analysis.load import with_tracking
from suite.analysis.gates.base import GateCheck, GateResult
from suite.analysis.assemble import with_metrics
from suite.analysis.summary import delta_metrics
from suite.outputs import mlflow as track
from suite.outputs.mlflow_registry import record_gate
from suite.stages.registry import QUANTIZE

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def logged(tmp_path, model, revision=None, name="brought"):
    """A finished run whose variant 'fp8' is served from ``model`` (variants[].model), logged to MLflow."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "tput.output_tok_s": 100.0},
                      "fp8": {"acc.suite_gsm8k": 0.5, "tput.output_tok_s": 140.0}}, tasks=("suite_gsm8k",),
                     gates={"default_max_drop": 0.02, "min_throughput_gain": 1.2}, run_dir=str(run_dir))
    spec = s.recipe["variants"][0]
    spec.pop("quantization")
    spec.update(model={"id": model, "revision": revision}, kv_cache_dtype="auto")
    s.variants[1].model_path = model
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    add_serving_intervals(s)
    s.recipe_sha256 = write_run_recipe(run_dir, {"recipe": s.recipe})["recipe_sha256"]
    s = type(s).model_validate(plan_run(run_dir, s.model_dump(mode="json")))  # plan.json, results bound to their jobs
    uri = track.default_uri(tmp_path)
    track.run(track.TrackConfig(s, run_dir / "summary.json", uri, "gates", tmp_path / "artifacts"))
    return with_tracking(s, run_dir), run_dir, uri  # where it was logged: tracking.json, as a later reader sees it


def checkpoint(tmp_path, weights=b"w" * 64):
    folder = tmp_path / "my-fp8-checkpoint"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text('{"quantization_config": {"quant_method": "fp8"}}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def passed(s):
    return GateResult(checks=[GateCheck("fp8", "max drop suite_gsm8k", 0.0, 0.02, True, True, 100)])


def test_a_brought_folder_that_passes_is_registered_once_by_its_content(tmp_path):
    from mlflow.tracking import MlflowClient

    folder = checkpoint(tmp_path)
    s, run_dir, uri = logged(tmp_path, str(folder))
    res = run_cli("gate", str(run_dir))
    assert res.returncode == 0 and "registered demo-cpu-fp8 version 1 as 'candidate'" in res.stdout, \
        res.stdout + res.stderr
    client = MlflowClient(tracking_uri=uri)
    mv = client.get_model_version_by_alias("demo-cpu-fp8", "candidate")
    assert mv.tags["model_source"] == str(folder) and mv.tags["checkpoint_key"] == "folder:" + mv.tags["content_sha256"]
    assert len(mv.tags["content_sha256"]) == 64 and mv.tags["weights"] == "artifact"
    assert sorted(a.path.split("/")[-1] for a in client.list_artifacts(mv.run_id, "checkpoint")) == [
        "config.json", "model.safetensors"]

    again = run_cli("gate", str(run_dir))  # the same run gated twice: the same version
    assert again.returncode == 0 and "already registered demo-cpu-fp8 version 1" in again.stdout, again.stdout
    assert len(client.search_model_versions("name='demo-cpu-fp8'")) == 1

    checkpoint(tmp_path, weights=b"x" * 64)  # other weights in the same folder: another checkpoint, a new version
    rec = record_gate(s, passed(s))
    assert rec.registered == [("demo-cpu-fp8", "2")] and not rec.reused and not rec.not_registered


def test_a_hub_id_is_registered_at_its_commit_and_refused_at_a_branch(tmp_path):
    from mlflow.tracking import MlflowClient

    s, _, uri = logged(tmp_path, "org/fp8-model", revision=COMMIT)
    rec = record_gate(s, passed(s))
    assert rec.registered == [("demo-cpu-fp8", "1")] and rec.not_registered == []
    mv = MlflowClient(tracking_uri=uri).get_model_version("demo-cpu-fp8", "1")
    assert mv.tags["checkpoint_key"] == f"hub:org/fp8-model@{COMMIT}" and mv.tags["revision"] == COMMIT
    assert mv.tags["weights_uri"] == f"https://huggingface.co/org/fp8-model/tree/{COMMIT}"

    s, _, _ = logged(tmp_path, "org/fp8-model", revision="main", name="branch")
    rec = record_gate(s, passed(s))
    assert rec.registered == [] and len(rec.not_registered) == 1
    assert rec.not_registered[0].startswith("fp8: not registered: the hub id org/fp8-model at revision main names "
                                            "no fixed weights (fix: ")


def test_a_variant_that_cannot_be_registered_says_why(tmp_path, capsys):
    """A folder that is not on the gating machine cannot be hashed; a failed verdict registers nothing, and says so
    for each variant; a run not logged to MLflow says it registered nothing."""
    s, run_dir, _ = logged(tmp_path, str(tmp_path / "gone"))
    rec = record_gate(s, passed(s))
    assert rec.registered == [] and rec.not_registered == [
        f"fp8: not registered: its checkpoint folder {tmp_path / 'gone'} is not on this machine and the run recorded "
        "no sha256 of it, so its content is unknown (fix: run `suite gate` where the folder is)"]
    failed = GateResult(checks=[GateCheck("fp8", "max drop suite_gsm8k", 0.1, 0.02, False, True, 100)])
    assert record_gate(s, failed).not_registered == [
        "fp8: not registered: the gate's verdict is fail (only a pass registers)"]

    import json

    from conftest import build_gated_run
    from suite import cli

    (tmp_path / "untracked").mkdir()
    untracked = build_gated_run(tmp_path / "untracked", {"max_drop": {"suite_gsm8k": 0.05}})
    (tmp_path / "untracked" / "run" / "summary.json").write_text(json.dumps(untracked))
    capsys.readouterr()
    assert cli.main(["gate", str(tmp_path / "untracked" / "run")]) == 0
    assert "nothing registered: the run was not logged to MLflow" in capsys.readouterr().err


def test_a_folder_hashed_by_the_run_registers_where_it_is_not_and_refuses_when_it_changed(tmp_path):
    """The CI case: the GPU job served the folder and recorded its sha256 (summary: model_sha256), the CPU job gates
    without the folder and registers it by that hash; gated where the folder is, a changed folder is refused."""
    from suite.plan.keys import weights_fingerprint

    folder = checkpoint(tmp_path)
    s, _, _ = logged(tmp_path, str(folder))
    s.variants[1].model_sha256 = measured = weights_fingerprint(str(folder))
    (folder / "model.safetensors").write_bytes(b"changed")
    rec = record_gate(s, passed(s))
    assert rec.registered == [] and rec.not_registered[0].startswith(
        f"fp8: not registered: its checkpoint folder {folder} changed since the run measured it (sha256 "), rec
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    rec = record_gate(s, passed(s))
    assert rec.registered == [("demo-cpu-fp8", "1")] and rec.not_registered == []
    from mlflow.tracking import MlflowClient

    mv = MlflowClient(tracking_uri=track.default_uri(tmp_path)).get_model_version("demo-cpu-fp8", "1")
    assert mv.tags["checkpoint_key"] == f"folder:{measured}" and mv.tags["weights"] == "uri"
    assert mv.tags["weights_uri"] == folder.as_uri()


def test_the_run_records_the_sha256_of_a_brought_folder(tmp_path):
    """summary.start: a non-baseline variant served from a local folder as it is carries its sha256."""
    from types import SimpleNamespace

    from suite.analysis.summary import variant_summary
    from suite.plan.keys import brought_sha256, weights_fingerprint
    from suite.recipe.schema import VariantSpec

    folder = checkpoint(tmp_path)
    vp = SimpleNamespace(variant=VariantSpec(name="fp8", model=str(folder)), is_baseline=False,
                         model_path=str(folder), checkpoint={})
    assert variant_summary(vp, brought_sha256(vp)).model_sha256 == weights_fingerprint(str(folder))
    vp.is_baseline = True
    assert variant_summary(vp, brought_sha256(vp)).model_sha256 is None


def test_the_quantized_variant_keeps_its_content_key(tmp_path):
    """The quantize stage's checkpoint is still registered under its content key, its content sha256 tagged."""
    from suite.records.quantize import QuantizeResult

    folder = checkpoint(tmp_path)
    s, _, uri = logged(tmp_path, str(folder))
    s.variants[1].stages[QUANTIZE] = QuantizeResult(checkpoint=str(folder), key="k1", cache_hit=False, wall_s=1.0,
                                            content_sha256="c" * 64)
    rec = record_gate(s, passed(s))
    from mlflow.tracking import MlflowClient

    mv = MlflowClient(tracking_uri=uri).get_model_version(*rec.registered[0])
    assert mv.tags["checkpoint_key"] == "k1" and mv.tags["content_sha256"] == "c" * 64
    assert mv.tags["model_source"] == "quantize stage"
