"""Found by the adversarial review: `suite sync RUN_DIR` without --uri logged to the tracking.uri of the run folder's
own recipe copy, so a folder from elsewhere (a CI artifact of an untrusted job) could name a server of its choosing
and MLflow would send the syncing job's credentials (MLFLOW_TRACKING_TOKEN) there. Now a server only the folder
names is used only when the folder is signed (SUITE_MANIFEST_KEY); otherwise the caller names it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import make_summary, run_folder
from suite import cli
from suite.outputs import manifest


class Listener(BaseHTTPRequestHandler):
    """Records every request (with its Authorization header) and answers 503: nothing is logged."""

    seen: list = []

    def do_GET(self):
        Listener.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(503)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Listener.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Listener)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def folder_naming(tmp_path, uri):
    run_dir = tmp_path / "runs" / "20261207-000000-demo-cpu"
    s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(run_dir))
    s.recipe["tracking"] = {"uri": uri, "experiment": "elsewhere"}
    return run_folder(run_dir, s)


def test_an_unsigned_folder_cannot_send_the_token_to_its_own_server(tmp_path, server, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "ci-secret")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///" + str(tmp_path / "mine.db"))  # the recipe's comes first
    monkeypatch.delenv(manifest.KEY_ENV, raising=False)
    run_dir = folder_naming(tmp_path, server)
    code = cli.main(["sync", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "tracking.uri" in err and "--uri" in err and "not signed" in err, err
    assert Listener.seen == []  # not one request: the token never left
    assert "ci-secret" not in err


def test_the_caller_names_the_server(tmp_path, server, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_dir = folder_naming(tmp_path, "http://127.0.0.1:9")  # the folder names another; --uri wins
    code = cli.main(["sync", str(run_dir), "--uri", server])
    assert code == 2 and Listener.seen, capsys.readouterr()  # it went where the caller said (and got 503)
    assert "http://127.0.0.1:9" not in json.loads((run_dir / "tracking.json").read_text()).get("tracking_pending", "")


def test_a_signed_folder_may_name_its_own_server(tmp_path, server, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv(manifest.KEY_ENV, "the-ci-secret")
    run_dir = folder_naming(tmp_path, server)
    recipe_sha256 = json.loads((run_dir / "run.json").read_text())["recipe_sha256"]
    manifest.write(run_dir, recipe_sha256, "the-ci-secret")
    code = cli.main(["sync", str(run_dir)])
    assert code == 2 and Listener.seen, capsys.readouterr()  # allowed: it asked that server (which said 503)
