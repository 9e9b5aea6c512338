"""MLflow logging of a run summary, read back through the MLflow client (SQLite store, no server)."""

from __future__ import annotations

import pytest

from conftest import make_summary
from suite.outputs import mlflow as track
from suite.outputs import mlflow_files, mlflow_http
from suite.analysis.assemble import with_metrics
from suite.analysis.summary import delta_metrics
from suite.stages.registry import QUANTIZE


def test_parent_and_nested_runs(tmp_path):
    from mlflow.tracking import MlflowClient

    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.mean": 0.5, "tput.output_tok_s": 100.0},
                      "fp8": {"acc.suite_gsm8k": 0.45, "acc.mean": 0.45, "tput.output_tok_s": 140.0}},
                     run_dir=str(tmp_path / "run"))
    s.variants[1].scheme = "FP8_DYNAMIC"
    s.variants[1].engine_args = {"enforce_eager": True}
    s.versions = {"mlflow": "3.17.2"}
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    fp8_dir = tmp_path / "variants" / "fp8"  # each stage's log and stack profile, as a stage leaves them, beside
    (fp8_dir / "benchmark").mkdir(parents=True)  # summary.json (run_dir names the folder where the run was made)
    for name in ("evaluate.log", "evaluate.stacks.json", "evaluate.result.json", "benchmark/evaluate.log",
                 "benchmark/evaluate.stacks.json", "benchmark/server.log"):
        (fp8_dir / name).write_text("{}")
    (fp8_dir / "quantize.log").write_bytes(b"x" * (mlflow_files.MAX_STAGE_FILE_BYTES + 1))  # a runaway log stays here
    uri = track.default_uri(tmp_path)
    with pytest.warns(UserWarning, match="quantize.log: 64 MiB, not logged to MLflow"):
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
    fp8_run = by_variant["fp8"].info.run_id
    assert [a.path for a in client.list_artifacts(fp8_run, "stages")] == ["stages/evaluate.log",
                                                                           "stages/evaluate.stacks.json",
                                                                           "stages/served"]
    assert [a.path for a in client.list_artifacts(fp8_run, "stages/served")] == ["stages/served/evaluate.log",
                                                                                  "stages/served/evaluate.stacks.json"]
    assert not client.list_artifacts(by_variant["bf16"].info.run_id, "stages")  # no folder, nothing logged
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id)]
    assert "summary.json" in artifacts
    assert (tmp_path / "tracking.json").read_text().count(res.info.parent_run_id) >= 1


def test_gate_verdict_tags_runs_and_registers_the_candidate(tmp_path):
    """`suite gate` on a logged run: tags on pass and fail; on pass the FP8 checkpoint becomes a version of
    a registered model with the alias 'candidate' and the gate results as tags."""
    import json

    from mlflow.tracking import MlflowClient

    from conftest import add_serving_intervals, plan_run, run_cli, write_run_recipe
    from suite.records.quantize import QuantizeResult
    from suite.records.summary import RunSummary

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
        s.variants[1].stages[QUANTIZE] = QuantizeResult(checkpoint=str(ckpt), key=f"key-{name}", cache_hit=False, wall_s=1.0)
        s.variants = with_metrics(s.variants, delta_metrics(s.variants))
        add_serving_intervals(s)  # a throughput ratio without its interval over repetitions is inconclusive
        s.recipe_sha256 = write_run_recipe(run_dir, {"recipe": s.recipe})["recipe_sha256"]  # the gate's trusted copy
        s = RunSummary.model_validate(plan_run(run_dir, s.model_dump(mode="json")))  # plan.json, stage results
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
    s = json.loads((ok_dir / "tracking.json").read_text())
    assert client.get_run(s["tracking"]["variant_run_ids"]["fp8"]).data.tags["gate.result"] == "pass"

    bad_dir, _ = logged("bad", 0.45)
    res = run_cli("gate", str(bad_dir))
    assert res.returncode == 1
    s = json.loads((bad_dir / "tracking.json").read_text())
    tags = client.get_run(s["tracking"]["variant_run_ids"]["fp8"]).data.tags
    assert tags["gate.result"] == "fail" and "max drop suite_gsm8k" in tags["gate.failed"]
    assert client.get_run(s["tracking"]["parent_run_id"]).data.tags["gate.result"] == "fail"
    assert client.get_model_version_by_alias("demo-cpu-fp8", "candidate").version == mv.version  # unchanged


def test_a_sync_that_broke_half_way_is_resumed_into_the_same_parent(tmp_path, monkeypatch):
    """The tracking server 'dies' while the second variant's artifacts go up (every call fails from then
    on, so the parent is left RUNNING); the next sync resumes it: one parent, one run per variant."""
    from mlflow.tracking import MlflowClient

    s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(tmp_path / "run"))
    (tmp_path / "a.txt").write_text("artifact")
    s.artifacts["recipe"] = str(tmp_path / "a.txt")
    for v in s.variants:
        v.tokenizer = {"bos_token": "<s>"}
    uri = track.default_uri(tmp_path)
    cfg = track.TrackConfig(s, tmp_path / "summary.json", uri, "crash", tmp_path / "artifacts")
    real_log_artifact, real_terminate = MlflowClient.log_artifact, MlflowClient.set_terminated
    dead = {"now": False}

    def log_artifact(self, run_id, path, artifact_path=None):
        if dead["now"] or self.get_run(run_id).data.tags.get("suite.variant") == "fp8":
            dead["now"] = True
            raise ConnectionError("the tracking server went away")
        return real_log_artifact(self, run_id, path, artifact_path)

    def set_terminated(self, run_id, status=None, end_time=None):
        if dead["now"]:
            raise ConnectionError("the tracking server went away")
        return real_terminate(self, run_id, status, end_time)

    monkeypatch.setattr(track, "variant_artifacts", lambda v, vdir=None: [(str(tmp_path / "a.txt"), "x")])
    monkeypatch.setattr(MlflowClient, "log_artifact", log_artifact)
    monkeypatch.setattr(MlflowClient, "set_terminated", set_terminated)
    result, error = track.log_or_defer(cfg)
    assert result is None and "went away" in error
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("crash")
    (parent,) = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "RUNNING"  # what a crash leaves

    monkeypatch.setattr(MlflowClient, "log_artifact", real_log_artifact)  # the server is back
    monkeypatch.setattr(MlflowClient, "set_terminated", real_terminate)
    result, error = track.log_or_defer(cfg)
    assert error is None and result.info.parent_run_id == parent.info.run_id
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert sorted(r.data.tags["suite.variant"] for r in runs if r not in parents) == ["bf16", "fp8"]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert track.log_or_defer(cfg)[0].already_logged  # and a third sync adds nothing
    assert len(client.search_runs([exp.experiment_id])) == 3


def test_sync_against_a_server_that_died_fails_within_30_s(tmp_path):
    """/health answered, then the server is gone (connections refused): MLflow's own retries would take
    minutes per call; the suite bounds them."""
    import json
    import subprocess
    import sys
    import threading
    import time
    from http.server import BaseHTTPRequestHandler

    from conftest import ROOT

    class Dying(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/health"):
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")
                return
            # the server dies: this connection drops, later ones are refused. Stopped through shutdown(), not by
            # closing its socket here: serve_forever's poll() on a closed socket returns at once, forever, and
            # that thread then spun at a full core for the rest of the pytest session (half of CI's 2 cores:
            # the demo run that came 40 minutes later passed its 1,200 s)
            threading.Thread(target=lambda: (self.server.shutdown(), self.server.server_close()), daemon=True).start()
            self.close_connection = True

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = on_a_port_holding_403(Dying)  # the failure's text names the port: it must not read as a refusal
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(run_dir))
    s.recipe["tracking"] = {"uri": uri, "experiment": "dead"}
    s.write(run_dir / "summary.json")
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "suite", "sync", str(run_dir), "--uri", uri], cwd=ROOT, capture_output=True,
                         text=True, timeout=90)
    took = time.monotonic() - start
    assert res.returncode == 2 and f"logging to {uri} failed" in res.stderr, res.stderr[-2000:]
    assert took < 30, f"sync took {took:.0f} s against a dead server"
    assert "failed" in json.loads((run_dir / "tracking.json").read_text())["tracking_pending"]
    serving.join(timeout=10)
    assert not serving.is_alive()  # the server's thread ended (it once spun on a closed socket for the session)


def test_a_resumed_run_logs_the_variants_that_failed_before_into_the_same_parent(tmp_path):
    """`suite run --resume` after a failed stage: the parent logged by the first attempt is reused (one
    parent per run folder), the variant that failed gets a new run with its results, the old one is
    tagged superseded; a variant that had finished keeps its run. (Before, the finished parent was
    returned as it was and the resumed results never reached MLflow.)"""
    from mlflow.tracking import MlflowClient

    metrics = {"bf16": {"acc.suite_gsm8k": 0.5, "acc.mean": 0.5}, "fp8": {}}
    s = make_summary(metrics, tasks=("suite_gsm8k",), run_dir=str(tmp_path / "run"))
    s.variants[1].errors = ["evaluate failed (exit 1): RuntimeError: CUDA error [log: x]"]
    uri = track.default_uri(tmp_path)
    first = track.run(track.TrackConfig(s, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts"))
    client = MlflowClient(tracking_uri=uri)
    old_fp8 = first.info.variant_run_ids["fp8"]
    assert client.get_run(old_fp8).info.status == "FAILED"

    s2 = make_summary({**metrics, "fp8": {"acc.suite_gsm8k": 0.48, "acc.mean": 0.48}}, tasks=("suite_gsm8k",),
                      run_dir=str(tmp_path / "run"))
    again = track.run(track.TrackConfig(s2, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts",
                                        resumed=True))
    assert again.info.parent_run_id == first.info.parent_run_id and not again.already_logged
    assert again.info.variant_run_ids["bf16"] == first.info.variant_run_ids["bf16"]
    new_fp8 = again.info.variant_run_ids["fp8"]
    assert new_fp8 != old_fp8 and client.get_run(new_fp8).data.metrics["acc.suite_gsm8k"] == 0.48
    assert client.get_run(old_fp8).data.tags["suite.superseded"] == "true"
    assert client.get_run(first.info.parent_run_id).info.status == "FINISHED"
    parents = [r for r in client.search_runs([again.info.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    assert client.get_run(again.info.parent_run_id).data.tags["suite.summary_finished"] == s2.finished
    # resumed while the server was down, logged later by `suite sync` (no resume flag: the parent's
    # summary_finished tag tells it holds an older summary): fp8's delta, new now, reaches its run too
    s3 = make_summary({**metrics, "fp8": {"acc.suite_gsm8k": 0.48, "acc.mean": 0.48, "acc.suite_gsm8k.delta": -0.02}},
                      tasks=("suite_gsm8k",), run_dir=str(tmp_path / "run"))
    s3.finished = "later"
    synced = track.run(track.TrackConfig(s3, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts"))
    assert not synced.already_logged and synced.info.parent_run_id == first.info.parent_run_id
    assert client.get_run(new_fp8).data.metrics["acc.suite_gsm8k.delta"] == -0.02
    s2 = s3
    again = synced
    # resumed once more with nothing new: nothing is logged again
    third = track.run(track.TrackConfig(s2, tmp_path / "summary.json", uri, "unit", tmp_path / "artifacts",
                                        resumed=True))
    assert third.info.variant_run_ids == again.info.variant_run_ids


def on_a_port_holding_403(handler):
    """An HTTP server on a free port of 40300-40399, tried in random order (CI of aab47c4 failed on a dead server
    at port 40355: the connection error's text held "403", and the failure was reported as a permission refusal)."""
    import random
    from http.server import HTTPServer

    for port in random.sample(range(40300, 40400), 100):  # not the same port for two sessions on one host
        try:
            return HTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
    raise AssertionError("no free port in 40300-40399")


def test_a_refusal_is_named_by_its_status_not_by_digits_in_the_uri(tmp_path):
    """A server on port 403xx that fails every API call: HTTP 403 reads "denied write access", HTTP 404 reads
    "logging ... failed" (MLflow's error code decides, not the text)."""
    import threading
    from http.server import BaseHTTPRequestHandler

    status = {"code": 403, "body": b"Permission denied"}

    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self):
            code, body = (200, b"OK") if self.path.startswith("/health") else (status["code"], status["body"])
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = on_a_port_holding_403(Refusing)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(tmp_path / "run"))
        cfg = track.TrackConfig(s, tmp_path / "summary.json", uri, "refused", tmp_path / "artifacts")
        result, why = track.log_or_defer(cfg)
        assert result is None and why == f"the tracking server {uri} denied this user write access (HTTP 403)"
        status.update(code=404, body=b"Not Found")
        result, why = track.log_or_defer(cfg)
        assert result is None and why.startswith(f"logging to {uri} failed: "), why
        assert "denied" not in why and "credentials" not in why and "404" in why
    finally:
        server.shutdown()
        server.server_close()
        serving.join(timeout=10)


def test_refusal_status_reads_codes_and_responses_never_digits():
    """401/403 from MLflow's error codes, from a requests response (the HTTP artifact repository raises a plain
    HTTPError) and along the exception chain; a connection error naming port 40355 or 40101 is no refusal."""
    import requests
    from mlflow.exceptions import MlflowException, RestException
    from mlflow.protos.databricks_pb2 import CUSTOMER_UNAUTHORIZED

    def http_error(code):
        response = requests.Response()
        response.status_code = code
        return requests.HTTPError(f"{code} Client Error", response=response)

    assert mlflow_http.refusal_status(RestException({"error_code": "PERMISSION_DENIED", "message": "no"})) == 403
    assert mlflow_http.refusal_status(RestException({"error_code": "UNAUTHENTICATED", "message": "no"})) == 401
    assert mlflow_http.refusal_status(MlflowException("x", error_code=CUSTOMER_UNAUTHORIZED)) == 401
    assert mlflow_http.refusal_status(http_error(403)) == 403 and mlflow_http.refusal_status(http_error(401)) == 401
    assert mlflow_http.refusal_status(http_error(404)) is None
    try:
        try:
            raise http_error(403)
        except requests.HTTPError as inner:
            raise MlflowException("upload failed") from inner
    except MlflowException as outer:
        assert mlflow_http.refusal_status(outer) == 403
    for port in (40355, 40101):
        refused = requests.ConnectionError(f"HTTPConnectionPool(host='127.0.0.1', port={port}): Max retries "
                                           f"exceeded with url: /api/2.0/mlflow/runs/create (Caused by 403 401)")
        assert mlflow_http.refusal_status(refused) is None
    assert mlflow_http.refusal_status(MlflowException("API request failed with error code 500 != 200")) is None
