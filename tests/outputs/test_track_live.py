"""The team's MLflow, live: a run of the demo's plan (stand-in stages that sleep: no vLLM) against a real `mlflow
server` named only by MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME. Its runs exist and are RUNNING while a stage
works, carry the stages' own start and end times, its tasks' data as datasets, and close FINISHED; a second
`suite gate` registers no new version of the same checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from test_track_server import free_port, start_mlflow_server, stop_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "orchestrate"))  # the stand-in stages live there
from test_executor_local import timed_stages  # noqa: E402
from suite.records.quantize import QuantizeResult
from suite.records.evaluate import EvaluateResult

pytestmark = pytest.mark.integration

SLEEP_S = 2.0
# what the stand-in evaluate stage of bf16 sees on the server while it runs (MLflow's REST API, no client library)
PEEK = """
if stage == "evaluate" and variant == "bf16":
    import urllib.request, urllib.parse
    uri = os.environ["PEEK_URI"]
    def call(path, body=None):
        req = urllib.request.Request(uri + path, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req, timeout=20))
    exp = call("/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + urllib.parse.quote("team-exp"))
    runs = call("/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]]})
    seen = [{"name": r["info"]["run_name"], "status": r["info"]["status"]} for r in runs.get("runs", [])]
    open(os.environ["PEEK_OUT"], "w").write(json.dumps(seen))
"""


@pytest.fixture
def server(tmp_path):
    port, root = free_port(), tmp_path / "srv"
    root.mkdir()
    proc = start_mlflow_server(root, port)
    yield f"http://127.0.0.1:{port}"
    stop_server(proc)


def test_runs_are_live_in_the_environments_mlflow_and_a_second_gate_adds_no_version(
        server, demo_recipe_copy, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from suite import cli
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-exp")
    monkeypatch.setenv("PEEK_URI", server)
    monkeypatch.setenv("PEEK_OUT", str(tmp_path / "during.json"))
    calls = timed_stages(tmp_path, monkeypatch, seconds=SLEEP_S, before=PEEK)
    tasks = [{"name": "suite_mmlu", "limit": 1, "num_fewshot": 0}]  # what the stand-in evaluate stage scores
    summary = execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, eval__tasks=tasks)),
                      track=True)

    assert summary.tracking is not None and summary.tracking.uri == server and not summary.tracking_pending
    assert not [w for w in summary.warnings if "MLflow" in w], summary.warnings  # live logging never stopped
    during = json.loads((tmp_path / "during.json").read_text())
    assert sorted(r["name"] for r in during) == sorted([Path(summary.run_dir).name, "bf16", "fp8-kv"])
    assert {r["status"] for r in during} == {"RUNNING"}

    client = MlflowClient(server)
    exp = client.get_experiment_by_name("team-exp")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert len(runs) == 3 and {r.info.status for r in runs.values()} == {"FINISHED"}
    stages = [json.loads(line) for line in calls.read_text().splitlines()]  # [stage, variant, gpu, t0, t1]
    parent = runs[Path(summary.run_dir).name]
    assert parent.info.start_time <= min(s[3] for s in stages) * 1000  # created before the first stage began
    for name in ("bf16", "fp8-kv"):
        mine = [s for s in stages if s[1] == name]
        run = runs[name]
        assert run.info.start_time <= min(s[3] for s in mine) * 1000
        last_end = max(s[4] for s in mine) * 1000
        assert last_end <= run.info.end_time <= last_end + 5000  # the last stage's end, not the publish step's
        assert run.info.end_time - run.info.start_time >= len(mine) * SLEEP_S * 1000
        assert "stage.evaluate.started" in run.data.tags and run.data.tags["stage.evaluate.status"] == "ok"
        # first logged as the evaluate stage ended (the end of the run logs every metric again)
        acc = min(client.get_metric_history(run.info.run_id, "acc.suite_mmlu"), key=lambda m: m.timestamp)
        evaluate_end = next(s[4] for s in mine if s[0] == "evaluate") * 1000
        assert evaluate_end <= acc.timestamp <= evaluate_end + 5000
        names = {d.dataset.name: d.dataset.digest for d in run.inputs.dataset_inputs}
        assert set(names) == {"suite_mmlu"} and len(names["suite_mmlu"]) == 32
    assert runs["fp8-kv"].data.params["quantization.calibration"] == "chat-demo"
    assert parent.data.params["eval.suite_mmlu.num_fewshot"] == "0" and parent.data.params["eval.suite_mmlu.limit"] == "1"

    ckpt = Path(summary.variants[1].result(QuantizeResult).checkpoint)  # the stand-in quantize stage wrote no folder: one here
    ckpt.mkdir(exist_ok=True)
    (ckpt / "model.safetensors").write_bytes(b"\0" * 4096)
    assert cli.main(["gate", summary.run_dir]) == 0
    assert cli.main(["gate", summary.run_dir]) == 0
    versions = client.search_model_versions("name='demo-cpu-fp8-kv'")
    assert len(versions) == 1 and versions[0].tags["checkpoint_key"] == summary.variants[1].result(QuantizeResult).key
    assert versions[0].tags["weights"] == "artifact"  # the version's source holds the weights, not only the config
    logged = [f.path for f in client.list_artifacts(runs["fp8-kv"].info.run_id, "checkpoint")]
    assert "checkpoint/model.safetensors" in logged
    assert client.get_model_version_by_alias("demo-cpu-fp8-kv", "candidate").version == versions[0].version


def test_a_server_that_is_down_at_the_start_leaves_the_run_to_suite_sync(demo_recipe_copy, tmp_path, monkeypatch):
    """Offline first with the live hook: nothing answers at MLFLOW_TRACKING_URI, the run completes and keeps its
    results for `suite sync` (summary.json says why), with no error from the live logging."""
    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    timed_stages(tmp_path, monkeypatch, seconds=0.1)
    tasks = [{"name": "suite_mmlu", "limit": 1, "num_fewshot": 0}]
    summary = execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, eval__tasks=tasks)),
                      track=True)
    assert summary.tracking is None and "unreachable" in summary.tracking_pending
    assert all(v.result(EvaluateResult) is not None for v in summary.variants)
    assert not [w for w in summary.warnings if "MLflow live logging" in w]
