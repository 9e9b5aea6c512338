"""Found by the adversarial review: `suite gate RUN` (recording is its default) records the verdict on the MLflow server
that the run folder's ``tracking.json`` names. tracking.json is unsigned (``manifest.EXCLUDED``; with ``--verify`` it
is copied into the verified folder unchecked) and its URI is not compared with the CI's own tracking settings, so
whoever wrote the run folder (the GPU job's artifact) chooses the server: the gate job's MLflow credentials
(``MLFLOW_TRACKING_TOKEN``, the way docs/07 says to give them) are sent to it in the first request, before
``check_identity`` can find that the run is not there."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from conftest import ROOT, build_gated_run, stamp_summary
from suite import cli
from suite.outputs import manifest
from suite.outputs.tracking_target import gate_uri
from suite.runtime.errors import SuiteError

T1 = "suite_gsm8k"
TOKEN = "ci-secret-token-7f3a9c"


class Heard(http.server.BaseHTTPRequestHandler):
    """An MLflow look-alike that only writes down the Authorization header of each request and answers 404."""

    heard: list[str] = []

    def _any(self):
        Heard.heard.append(str(self.headers.get("Authorization")))
        body = b'{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


@pytest.fixture
def listener():
    Heard.heard = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Heard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_pointing_at(tmp_path, uri: str, signed: bool = False):
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}})  # a run that passes: the gate records and registers
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(stamp_summary(run, s)))
    if signed:
        manifest.write(run, s["recipe_sha256"], "k" * 32)
    (run / "tracking.json").write_text(json.dumps({"tracking": {
        "uri": uri, "experiment": "e", "experiment_id": "1", "parent_run_id": "p", "variant_run_ids": {"fp8": "r"}}}))
    return run


@pytest.mark.parametrize("verify", [False, True])
def test_the_gate_sends_no_credentials_where_the_run_folder_says(tmp_path, capsys, monkeypatch, listener, verify):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    run = run_pointing_at(tmp_path, listener, signed=verify)
    code = cli.main(["gate", str(run), *(["--verify"] if verify else [])])
    out, err = capsys.readouterr()
    assert code == 0, out + err  # the verdict itself is right
    # expected: the verdict is recorded only on the tracking server the gate job is configured for (its
    # MLFLOW_TRACKING_URI / a --uri it was given), never on one a run folder file names
    assert not any(TOKEN in h for h in Heard.heard), Heard.heard


@pytest.fixture(autouse=True)
def no_env_uri(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")


# The rule as it is kept (outputs/tracking_target.gate_uri): the server the caller names (--uri, its --recipe's
# tracking.uri, MLFLOW_TRACKING_URI); tracking.json's URI only when it is a local store in a place run folders may go.


def test_a_named_server_wins_over_tracking_json(monkeypatch):
    assert gate_uri("http://folder:5000", "http://mine:5000") == ("http://mine:5000", "--uri")
    assert gate_uri("http://folder:5000", None, "http://team:5000") == ("http://team:5000", "--recipe's tracking.uri")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert gate_uri("http://folder:5000") == ("http://env:5000", "MLFLOW_TRACKING_URI")


def test_tracking_json_alone_is_used_only_for_a_local_store_in_an_allowed_place(tmp_path):
    local = f"sqlite:///{tmp_path}/mlflow.db"
    assert gate_uri(local) == (local, "tracking.json (a local store)")
    for folder_named in ("http://folder:5000", "https://x.example/mlflow", "databricks",
                         f"sqlite:///{ROOT}/suite/mlflow.db", "sqlite:////etc/mlflow.db", None):
        uri, why = gate_uri(folder_named)
        assert uri is None and "MLFLOW_TRACKING_URI" in why and "--uri" in why, (folder_named, why)


def test_a_named_uri_with_a_credential_or_in_the_checkout_is_refused():
    with pytest.raises(SuiteError, match="holds"):
        gate_uri(None, "http://me:hunter2@mlflow:5000")
    with pytest.raises(SuiteError, match="inside the project's checkout"):
        gate_uri(None, f"sqlite:///{ROOT}/suite/x.db")


def test_the_credentials_go_to_the_server_the_caller_names(tmp_path, capsys, monkeypatch, listener):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    run = run_pointing_at(tmp_path, "http://127.0.0.1:9/elsewhere")  # tracking.json names another server
    assert cli.main(["gate", str(run), "--uri", listener]) == 0
    err = capsys.readouterr().err
    assert Heard.heard and all(TOKEN in h for h in Heard.heard), Heard.heard  # asked the named one, nothing else
    assert "not recorded in MLflow" in err and "cannot be read" in err, err  # the listener holds no such run


def test_a_folder_named_server_is_not_asked_and_the_gate_says_how_to_name_it(tmp_path, capsys, monkeypatch, listener):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    run = run_pointing_at(tmp_path, listener)
    assert cli.main(["gate", str(run), "--json", str(tmp_path / "gate.json")]) == 0
    err = capsys.readouterr().err
    assert Heard.heard == [] and "which this job was not given" in err and "MLFLOW_TRACKING_URI" in err, err
    said = json.loads((tmp_path / "gate.json").read_text())["registration"]
    assert len(said) == 1 and said[0].startswith("gate verdict not recorded in MLflow: tracking.json names"), said


def test_a_bad_uri_is_bad_input_before_anything_is_judged(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"max_drop": {"suite_gsm8k": 0.02}})
    (tmp_path / "run" / "summary.json").write_text(json.dumps(stamp_summary(tmp_path / "run", s)))
    db = ROOT / "suite" / f"probe-{tmp_path.name}.db"
    try:
        assert cli.main(["gate", str(tmp_path / "run"), "--uri", f"sqlite:///{db}"]) == 2
        err = capsys.readouterr().err
        assert "--uri" in err and "where run folders may not go" in err and not db.exists(), err
    finally:
        db.unlink(missing_ok=True)
