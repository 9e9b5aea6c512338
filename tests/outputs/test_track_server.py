"""Logging over HTTP to a real `mlflow server` (SQLite backend, artifacts served by the server, a free
loopback port): a run made while the server is down stays in its folder (summary.json says why),
`suite sync` logs it once the server is up, and a second sync logs nothing twice."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import make_summary, run_cli, run_folder
from suite.outputs.mlflow import track_summary
from suite.analysis.assemble import with_metrics
from suite.analysis.summary import delta_metrics

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(root: Path, port: int, auth: bool = False) -> subprocess.Popen:
    import os

    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{root / 'server.db'}", "--artifacts-destination", str(root / "art"),
           "--workers", "1"]
    env = dict(os.environ)
    if auth:  # MLflow's basic-auth app; the admin password comes from the environment, not from a file
        ini = root / "auth.ini"
        ini.write_text(f"[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{root / 'auth.db'}\n"
                       "admin_username = admin\n"
                       "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
        cmd += ["--app-name", "basic-auth"]
        env.update(MLFLOW_AUTH_CONFIG_PATH=str(ini), MLFLOW_AUTH_ADMIN_PASSWORD="s3cret-Pass-123",
                   MLFLOW_FLASK_SERVER_SECRET_KEY="test-only-csrf-key")
    proc = subprocess.Popen(cmd, stdout=open(root / "server.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)
    deadline = time.time() + 240
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                stop_server(proc)  # its workers may outlive it
                raise RuntimeError((root / "server.log").read_text()[-2000:])
            time.sleep(0.5)
    # a server that did not start in time is still starting: its uvicorn, job runner and huey consumers (~8
    # processes, ~1 GB) would run on through every later test
    stop_server(proc)
    raise RuntimeError("mlflow server did not start:\n" + (root / "server.log").read_text()[-2000:])


def stop_server(proc: subprocess.Popen) -> None:
    """The server, its workers and its process group (suite.runtime.procs: SIGTERM, SIGKILL after 10 s)."""
    from suite.runtime import procs

    procs.stop(proc, grace_s=10)


class PlainServer:
    """One plain `mlflow server` (its folder, port and store) for the tests below that stop, start and kill it:
    each leaves it running for the next, so that a start (~30 s on 2 busy cores) is not paid again where the
    next test needs a server anyway. Each test sets the state it needs first, so the order does not matter."""

    def __init__(self, root: Path):
        self.root, self.port, self.proc = root, free_port(), None
        self.uri = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = start_mlflow_server(self.root, self.port)

    def ensure_started(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def stop(self) -> None:
        if self.proc is not None:
            stop_server(self.proc)
            self.proc = None


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory):
    server = PlainServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()


def test_offline_run_then_sync_to_a_real_server(tmp_path, plain_server):

    from mlflow.tracking import MlflowClient

    plain_server.stop()  # down while the run is made (a no-op unless another test left it running)
    uri = plain_server.uri
    out_root = tmp_path / "runs"
    run_dir = out_root / "20261130-000000-demo-cpu"
    run_dir.mkdir(parents=True)
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.mean": 0.5, "tput.output_tok_s": 100.0},
                      "fp8": {"acc.suite_gsm8k": 0.45, "acc.mean": 0.45, "tput.output_tok_s": 140.0}},
                     run_dir=str(run_dir))
    s.recipe["tracking"] = {"uri": uri, "experiment": "sync-test"}
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    run_folder(run_dir, s)  # the records `suite sync` logs the summary of (what they give: the ratio 1.4)

    start = time.monotonic()
    error = track_summary(s, run_dir / "summary.json", out_root)  # nobody listens on the port yet
    assert error and "unreachable" in error and time.monotonic() - start < 15
    saved = json.loads((run_dir / "tracking.json").read_text())
    assert saved["tracking"] is None and "unreachable" in saved["tracking_pending"]
    res = run_cli("sync", str(run_dir), "--uri", uri)
    assert res.returncode == 2 and "unreachable" in res.stderr

    plain_server.start()
    res = run_cli("sync", str(run_dir), "--uri", uri)
    assert res.returncode == 0, res.stdout + res.stderr
    saved = json.loads((run_dir / "tracking.json").read_text())
    assert saved["tracking_pending"] is None and saved["tracking"]["uri"] == uri
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("sync-test")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 3  # parent + 2 variants
    fp8 = next(r for r in runs if r.data.tags.get("suite.variant") == "fp8")
    assert abs(fp8.data.metrics["tput.output_tok_s.ratio"] - 1.4) < 1e-9
    parent_id = saved["tracking"]["parent_run_id"]
    assert "summary.json" in [a.path for a in client.list_artifacts(parent_id)]  # over HTTP, from the server

    assert run_cli("sync", str(run_dir), "--uri", uri).returncode == 0  # already logged: nothing new
    again = track_summary(s.model_copy(update={"tracking": None}), run_dir / "summary.json", out_root)
    assert again is None and len(client.search_runs([exp.experiment_id])) == 3  # found, not duplicated


def test_basic_auth_server_refuses_a_wrong_password_and_logs_nothing(tmp_path, monkeypatch):

    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    out_root = tmp_path / "runs"
    run_dir = out_root / "20261130-000000-demo-cpu"
    run_dir.mkdir(parents=True)
    s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(run_dir))
    s.recipe["tracking"] = {"uri": uri, "experiment": "auth-test"}
    server = start_mlflow_server(tmp_path, port, auth=True)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong")
        error = track_summary(s, run_dir / "summary.json", out_root)
        assert error and "refused the credentials" in error and "wrong" not in error
        assert json.loads((run_dir / "tracking.json").read_text())["tracking"] is None

        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret-Pass-123")
        from mlflow.tracking import MlflowClient

        assert MlflowClient(uri).get_experiment_by_name("auth-test") is None  # nothing was logged anonymously
        assert track_summary(s, run_dir / "summary.json", out_root) is None
        exp = MlflowClient(uri).get_experiment_by_name("auth-test")
        assert len(MlflowClient(uri).search_runs([exp.experiment_id])) == 3
        assert "s3cret" not in (run_dir / "summary.json").read_text() + (run_dir / "tracking.json").read_text()
    finally:
        stop_server(server)


def test_server_killed_mid_sync_fails_fast_and_the_next_sync_keeps_one_parent(tmp_path, plain_server):
    """The tracking server is SIGKILLed while `suite sync` uploads the parent's artifacts: the sync fails
    within 30 s (exit 2), and once the server is back the next sync resumes the same parent (left
    RUNNING) instead of making a second one."""
    import os
    import signal

    from mlflow.tracking import MlflowClient

    from conftest import ROOT

    plain_server.ensure_started()
    uri = plain_server.uri
    run_dir = tmp_path / "runs" / "20261130-000000-demo-cpu"
    run_dir.mkdir(parents=True)
    s = make_summary({"bf16": {"acc.mean": 0.5}, "fp8": {"acc.mean": 0.45}}, run_dir=str(run_dir))
    s.recipe["tracking"] = {"uri": uri, "experiment": "killed"}
    big = tmp_path / "report.html"
    with open(big, "wb") as f:
        f.truncate(200 << 20)  # an upload that takes a while
    s.artifacts["report_html"] = str(big)
    s.write(run_dir / "summary.json")
    # the server's store may hold other tests' runs: this sync's summary.json is the one not there yet
    logged = lambda: set((plain_server.root / "art").glob("*/*/artifacts/summary.json"))  # noqa: E731
    before = logged()
    sync = subprocess.Popen([sys.executable, "-m", "suite", "sync", str(run_dir), "--uri", uri], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not logged() - before:
        assert sync.poll() is None, sync.communicate()
        time.sleep(0.02)
    os.killpg(plain_server.proc.pid, signal.SIGKILL)  # the parent's artifacts are going up
    plain_server.proc.wait()
    killed_at = time.monotonic()
    _, err = sync.communicate(timeout=90)
    assert sync.returncode == 2 and "failed" in err, err
    assert time.monotonic() - killed_at < 30
    plain_server.start()
    res = run_cli("sync", str(run_dir), "--uri", uri)
    assert res.returncode == 0, res.stdout + res.stderr
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("killed").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.status for p in parents] == ["FINISHED"] and len(runs) == 3
    assert json.loads((run_dir / "tracking.json").read_text())["tracking"]["parent_run_id"] == parents[0].info.run_id
