"""Zombies in a killed process group (procs.kill_group) and orphans under the supervisor (runtime.supervisor).

A code check's program is an orphan once its tests' process exits; under a stage's supervisor (a child subreaper)
it is the supervisor's to reap. kill_group used to wait for the group to empty, so a zombie member held it for all
its attempts (2 s a check, 164 of them in a HumanEval evaluation). These tests build the real situation
with real processes: a subreaper that does not reap, and the supervisor that now does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_kill_group_ends_when_only_zombies_are_left():
    # This process is a subreaper that does not reap: the leader's child, a zombie, stays in the group after the
    # leader is killed. With 100,000 attempts of 10 ms, waiting for the group to empty would take 1,000 s.
    out = _python("""
        import ctypes, os, subprocess, sys, time
        from suite.runtime import procs
        assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        leader = subprocess.Popen([sys.executable, "-c",
            "import os, sys, time\\npid = os.fork()\\nif pid == 0:\\n    os._exit(0)\\nprint(pid, flush=True)\\ntime.sleep(600)"],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        child = int(leader.stdout.readline())
        def state(pid):
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        deadline = time.monotonic() + 30
        while state(child) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state(child) == "Z", state(child)
        t = time.monotonic()
        procs.kill_group(leader, attempts=100_000)
        took = time.monotonic() - t
        assert leader.returncode is not None               # the leader was killed and reaped
        assert state(child) == "Z"                         # the zombie is still there: ours (the subreaper's) to reap
        assert os.getpgid(child) == leader.pid
        os.waitpid(child, 0)
        print(f"ok {took:.3f}")
        """, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok "), out.stdout


def test_the_supervisor_reaps_orphans_while_its_command_runs():
    # The command starts a process (in its own session) that forks a grandchild and exits: the grandchild is
    # orphaned to the supervisor, ends after 0.2 s, and must be gone (reaped), not a zombie, while the command still runs.
    out = _python("""
        import subprocess, sys
        command = '''
        import os, subprocess, sys, time
        mid = subprocess.run([sys.executable, "-c",
            "import os, time\\\\npid = os.fork()\\\\nif pid == 0:\\\\n    time.sleep(0.2)\\\\n    os._exit(0)\\\\nprint(pid)"],
            capture_output=True, text=True, start_new_session=True)
        orphan = int(mid.stdout)
        deadline = time.monotonic() + 20
        while os.path.exists(f"/proc/{orphan}") and time.monotonic() < deadline:
            time.sleep(0.1)
        print("reaped" if not os.path.exists(f"/proc/{orphan}") else "still there")
        '''
        from suite.runtime import procs
        p = procs.supervised([sys.executable, "-c", command], stdout=subprocess.PIPE)
        print(p.communicate(timeout=60)[0].decode().strip(), p.returncode)
        """, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["reaped", "0"], out.stdout
