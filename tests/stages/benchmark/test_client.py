"""The warm benchmark client's parent side with a stand-in worker (the protocol, not vLLM): answers come back per
job, a job's output lands in its own log, a job past its timeout stops the worker and the next job gets a fresh
one, a worker that dies mid-job is a failed point with its start-up output named. The real worker runs vLLM's
`vllm bench serve` in tests/stages/benchmark/test_benchmark_cpu.py."""

from __future__ import annotations

import sys

import psutil

from suite.stages.benchmark import client

STAND_IN = r"""
import json, os, sys, time
print("stand-in worker up", file=sys.stderr, flush=True)
for line in sys.stdin:
    job = json.loads(line)
    with open(job["log"], "w") as fh:
        fh.write(f"pid {os.getpid()} key {os.environ.get('OPENAI_API_KEY')} argv {job['argv']}\n")
    os.environ.update(job["env"])
    what = job["argv"][0]
    if what == "sleep":  # a point that hangs, with a child of its own (vLLM's client may start processes too)
        import subprocess
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(job["log"], "a") as fh:
            fh.write(f"child {kid.pid}\n")
        time.sleep(60)
    if what == "die":
        print("Traceback: worker lost its mind", file=sys.stderr, flush=True)
        os._exit(3)
    print(json.dumps({"rc": 0 if what == "ok" else 7}), flush=True)
"""


def test_jobs_timeouts_and_a_dying_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(client, "WORKER", [sys.executable, "-c", STAND_IN])
    c = client.WarmClient(tmp_path / "worker.log")
    try:
        pid = c.pid
        assert c.run(["ok"], tmp_path / "a.log", {"OPENAI_API_KEY": "k1"}, 10) == 0
        assert c.run(["fail"], tmp_path / "b.log", {}, 10) == 7
        assert c.pid == pid and c.starts == 1  # one worker for both points
        assert (tmp_path / "b.log").read_text().startswith(f"pid {pid} key k1 argv ['fail']")
        assert c.run(["sleep"], tmp_path / "c.log", {}, 1.5) is None  # past its timeout: the worker is stopped
        assert c.proc is None
        kid = int((tmp_path / "c.log").read_text().split("child ")[1])
        for gone in (pid, kid):  # the whole tree, not only the worker
            assert not psutil.pid_exists(gone) or psutil.Process(gone).status() == psutil.STATUS_ZOMBIE, gone
        assert c.run(["ok"], tmp_path / "d.log", {}, 10) == 0 and c.starts == 2 and c.pid != pid
        assert c.run(["die"], tmp_path / "e.log", {}, 10) == 3
        said = (tmp_path / "e.log").read_text()
        assert "worker exited (exit 3) without finishing the point" in said and "worker lost its mind" in said
    finally:
        c.close()
    assert c.proc is None
