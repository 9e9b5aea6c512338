"""Containment of the namespaces sandbox, observed from outside: a listener the test opened gets no
connection, no file appears outside the scratch, the secret is not readable, the harness survives,
no process is left, and memory, processes and disk are bounded for the whole process tree.

Each probe program returns True only after it tried its escapes and saw them fail; it is checked
by a HumanEval-style check(), so a pass is also proof that the probe really ran to the end."""

from __future__ import annotations

import json
import os
import secrets
import select
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from suite.stages.evaluate import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the namespaces sandbox needs root")


@pytest.fixture(autouse=True)
def allow(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    yield
    for controller in ("memory", "pids"):  # every per-program cgroup of this process is gone
        parent = sandbox._cgroup_dir(controller)
        assert parent is not None and not list(parent.glob(f"suite-sandbox-{os.getpid()}-*"))


def probe(body: str, limits: sandbox.Limits = sandbox.Limits()) -> sandbox.Outcome:
    """Run `def probe():` + body (indented) as a HumanEval program whose check asserts probe() is True."""
    src = "def probe():\n" + "".join(f"    {ln}\n" for ln in body.strip("\n").splitlines())
    return sandbox.run_program(src, "def check(candidate):\n    assert candidate() is True\n\ncheck(probe)\n",
                               limits)


def processes_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def no_connection(listener: socket.socket, wait_s: float = 0.3) -> bool:
    ready, _, _ = select.select([listener], [], [], wait_s)
    return not ready


def test_tcp_listener_on_loopback_gets_no_connection():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        out = probe(f"""
import importlib, socket, subprocess
failures = []
def attempt(fn):
    try:
        fn()
    except OSError as e:
        failures.append(type(e).__name__)
attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=1))
import _socket
attempt(lambda: _socket.socket().connect(("127.0.0.1", {port})))
socket = importlib.reload(socket)
attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", {port})))
attempt(lambda: socket.create_connection(("localhost", {port}), timeout=1))
bash = subprocess.run(["bash", "-c", "echo hi > /dev/tcp/127.0.0.1/{port}"], capture_output=True)
return len(failures) == 4 and bash.returncode != 0
""")
        assert out == sandbox.Outcome(True, "passed"), out
        assert no_connection(listener)
    finally:
        listener.close()


def test_unix_sockets_get_nothing(tmp_path):
    """A socket in a host folder the sandbox does not see, one in a folder it sees read-only (the Python
    environment, bound into the sandbox), and an abstract one: all world-writable, none reachable."""
    listeners, paths = [], [tmp_path / "harness.sock", Path(sys.prefix) / f".suite-test-{secrets.token_hex(4)}.sock"]
    abstract = f"\0suite-test-{secrets.token_hex(4)}"
    try:
        for p in paths:
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(p))
            os.chmod(p, 0o777)
            s.listen(8)
            listeners.append(s)
        s = socket.socket(socket.AF_UNIX)
        s.bind(abstract)
        s.listen(8)
        listeners.append(s)
        out = probe(f"""
import socket
refused = 0
for address in {[str(p) for p in paths]!r} + [{abstract!r}]:
    try:
        socket.socket(socket.AF_UNIX).connect(address)
    except OSError:
        refused += 1
return refused == 3
""")
        assert out == sandbox.Outcome(True, "passed"), out
        assert all(no_connection(s, 0.1) for s in listeners)
    finally:
        for s in listeners:
            s.close()
        paths[1].unlink(missing_ok=True)


def test_no_file_is_written_outside_the_scratch(tmp_path):
    name = f"suite-escape-{secrets.token_hex(4)}"
    outside = [Path.home() / name, Path("/tmp") / name, tmp_path / name, ROOT / name, Path(sys.prefix) / name,
               Path("/etc") / name, Path("/") / name, Path("/dev/shm") / name]
    # inside the sandbox /tmp and /dev/shm are its own scratch, so a path of the host below them (the
    # checkout itself, when it was cloned under /tmp) is writable there without reaching the host: the
    # containment is the host-side check below; the others must be refused inside too
    must_block = sum(not str(p).startswith(("/tmp/", "/dev/shm/"))
                     for p in outside)
    try:
        out = probe(f"""
import os
blocked = 0
for path in {[str(p) for p in outside]!r}:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("escaped")
    except OSError:
        blocked += 1
with open("scratch.txt", "w") as fh:  # the working folder is the writable scratch
    fh.write("ok")
return open("/tmp/scratch.txt").read() == "ok" and os.getcwd() == "/tmp" and blocked >= {must_block}
""")
        assert out == sandbox.Outcome(True, "passed"), out
        assert [p for p in outside if p.exists()] == []
    finally:
        for p in outside:
            if p.is_file():
                p.unlink()


def test_the_harness_environment_is_not_readable(monkeypatch):
    secret = secrets.token_hex(16)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", secret)
    monkeypatch.setenv("SUITE_TEST_SECRET", secret)
    out = probe(f"""
import os
secret = {secret[::-1]!r}[::-1]
seen = []
for pid in [str(os.getppid()), "1", *[p for p in os.listdir("/proc") if p.isdigit()]]:
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{{pid}}/{{part}}", "rb") as fh:
                seen.append(fh.read())
        except OSError:
            pass
status = open("/proc/self/status").read()
return (all(secret.encode() not in s for s in seen) and secret not in str(os.environ)
        and sorted(os.environ) == ["HOME", "PATH", "TMPDIR"]
        and sorted(p for p in os.listdir("/proc") if p.isdigit()) == ["1", "2", "3"]  # the init, us, the tests
        and os.getuid() == 65534 and os.getgid() == 65534 and os.getgroups() == []
        and "CapEff:\\t0000000000000000" in status and "NoNewPrivs:\\t1" in status)
""")
    assert out == sandbox.Outcome(True, "passed"), out


def test_killing_the_parent_does_not_reach_the_harness():
    harness = os.getpid()
    out = probe(f"""
import os, signal
denied = 0
for pid in (os.getppid(), 1, {harness}):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        denied += 1
return denied == 3 and os.getppid() == 1
""")
    assert out == sandbox.Outcome(True, "passed"), out


def test_a_setsid_double_fork_daemon_is_gone_after_the_check():
    marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    out = probe(f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{marker}"])
    os._exit(0)
time.sleep(0.3)
return any("{marker}" in open(f"/proc/{{p}}/cmdline").read() for p in os.listdir("/proc") if p.isdigit())
""")
    assert out == sandbox.Outcome(True, "passed"), out  # the daemon was running inside ...
    assert processes_with(marker) == []  # ... and is gone as soon as run_program returned


def test_a_setsid_fork_bomb_is_bounded_and_leaves_nothing():
    marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    out = probe(f"""
import os, time
root = os.getpid()
deadline = time.monotonic() + 1.5
while time.monotonic() < deadline:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        if os.getpid() != root:
            os.execv("/bin/sleep", ["sleep", "{marker}"])
        time.sleep(0.01)
if os.getpid() != root:
    os._exit(0)
count = len([p for p in os.listdir("/proc") if p.isdigit()])
return 10 <= count <= 33
""", sandbox.Limits(timeout_s=10, processes=32))
    assert out == sandbox.Outcome(True, "passed"), out
    assert processes_with(marker) == []


def test_memory_is_bounded_across_forked_children():
    out = probe("""
import os, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (100 << 20)  # touched, not just reserved
        time.sleep(30)
        os._exit(0)
    children.append(pid)
time.sleep(2.5)
alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in children)
return 1 <= alive <= 2
""", sandbox.Limits(timeout_s=10, memory_bytes=256 << 20))
    assert out == sandbox.Outcome(True, "passed"), out
    hog = probe("block = b'x' * (600 << 20)\nreturn True", sandbox.Limits(memory_bytes=256 << 20))
    assert hog == sandbox.Outcome(False, "failed: killed at the memory limit (256 MiB)")


def test_disk_writes_are_bounded_by_the_scratch():
    out = probe("""
import errno
written = 0
try:
    with open("/tmp/big", "wb") as fh:
        while True:
            fh.write(b"x" * (1 << 20))
            fh.flush()
            written += 1 << 20
except OSError as e:
    code = e.errno
return code in (errno.ENOSPC, errno.EFBIG) and (8 << 20) <= written <= (16 << 20)
""", sandbox.Limits(scratch_bytes=16 << 20))
    assert out == sandbox.Outcome(True, "passed"), out


def test_score_code_from_outside_survives_hostile_programs(tmp_path):
    """Through `suite score-code`: a program that kills every process it can (kill -1: only its own child
    dies) and one that kills its parent (refused) do not stop the command from giving its verdict."""
    problems = tmp_path / "problems.jsonl"
    tests = {"kill-all": "import os, signal, time\n    if os.fork() == 0:\n        time.sleep(30)\n"
                         "    os.kill(-1, signal.SIGKILL)\n    return os.wait()[1] == signal.SIGKILL",
             "kill-parent": "import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return True",
             "honest": "return True"}
    with open(problems, "w") as fh:
        for tid in tests:
            fh.write(json.dumps({"task_id": tid, "prompt": 'def probe():\n    """p"""\n', "entry_point": "probe",
                                 "test": "def check(candidate):\n    assert candidate() is True\n"}) + "\n")
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": t, "completion": "    " + body + "\n"}) + "\n"
                               for t, body in tests.items()))
    run = subprocess.run([sys.executable, "-m", "suite", "score-code", str(samples), "--problems", str(problems),
                          "--allow-code-execution"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    items = json.loads(run.stdout)["items"]
    assert [(i["task_id"], i["passed"]) for i in items] == [("kill-all", True), ("kill-parent", False),
                                                            ("honest", True)]
    assert items[1]["reason"] == "failed: PermissionError: [Errno 1] Operation not permitted"  # the init is root


def test_a_dead_zygote_is_started_again():
    """The pre-imported zygote that starts every check: if it dies (killed by anyone), the next check
    starts a new one instead of failing."""
    assert probe("return True") == sandbox.Outcome(True, "passed")
    old = sandbox.zygote._state["proc"]
    old.kill()
    old.wait()
    assert probe("return True") == sandbox.Outcome(True, "passed")
    assert sandbox.zygote._state["proc"].pid != old.pid and sandbox.zygote._state["proc"].poll() is None


def test_a_harness_that_dies_takes_its_zygote_and_checks_along():
    """A harness killed mid-check (SIGKILL: no cleanup runs) leaves no zygote and no process of the check."""
    marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    script = ("import os\nos.environ['SUITE_ALLOW_CODE_EXECUTION'] = '1'\n"
              "from suite.stages.evaluate import sandbox\n"
              "sandbox.run_program('def probe():\\n    import os, time\\n    if os.fork() == 0:\\n"
              f"        os.execv(\"/bin/sleep\", [\"sleep\", \"{marker}\"])\\n    time.sleep(60)\\n', "
              "'def check(c):\\n    assert c()\\n\\ncheck(probe)\\n', sandbox.Limits(timeout_s=60))\n")
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for _ in range(300):
            if processes_with(f"sleep {marker}"):
                break
            harness.poll()
            assert harness.returncode is None, "the harness ended before its check started"
            import time

            time.sleep(0.05)
        assert processes_with(f"sleep {marker}"), "the check never started"
        zygotes = [p for p in processes_with("_boot.py zygote") if str(harness.pid) in _ppid(p.split(":")[0])]
        assert zygotes, ("no zygote under the harness", harness.pid, processes_with("zygote"))
    finally:
        harness.kill()
        harness.wait()
    import time

    for _ in range(100):
        if not processes_with(f"sleep {marker}") and not any(_alive(p.split(":")[0]) for p in zygotes):
            break
        time.sleep(0.05)
    assert processes_with(f"sleep {marker}") == []
    assert [p for p in zygotes if _alive(p.split(":")[0])] == []


def _ppid(pid: str) -> str:
    try:
        return next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("PPid:"))
    except (OSError, StopIteration):
        return ""


def _alive(pid: str) -> bool:
    try:
        return next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("State:")) != "Z"
    except (OSError, StopIteration):
        return False
