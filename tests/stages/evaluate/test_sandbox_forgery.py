"""Forged passes against the two-process check (issue 40): the model-written program runs apart from
the tests, so walking its own frames, scanning its own memory, returning objects that compare equal
to anything, printing fake result lines, reading or tracing the tests' process and killing its parent
all end as failures; and the probes that report what they reached show that they reached nothing."""

from __future__ import annotations

import os

import pytest

from suite.stages.evaluate import sandbox

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the namespaces sandbox needs root")
MODES = [pytest.param("namespaces", marks=needs_root), "process"]

# HumanEval-shaped: a trusted prompt with a helper, tests that use it, the check line
PROMPT = 'def double(x):\n    return 2 * x\n\n\ndef f(x):\n    """Return x doubled, then plus one."""\n'
TESTS = PROMPT + "\n\ndef check(candidate):\n    assert candidate(1) == double(1) + 1\n    assert candidate(5) == 11\n\ncheck(f)\n"
WRONG = "    return 0\n"

FRAME_WALK = WRONG + '''
import os, sys
found = set()
frame = sys._getframe()
while frame is not None:  # the harness's frames: their locals and the bootstrap's globals
    for scope in (frame.f_locals, frame.f_globals):
        for value in list(scope.values()):
            if isinstance(value, bytes) and len(value) == 32:
                found.add(value)
    frame = frame.f_back
import gc
for obj in gc.get_objects():
    if isinstance(obj, dict):
        for value in list(obj.values()):
            if isinstance(value, bytes) and len(value) == 32:
                found.add(value)
for fd in range(3, 256):
    for token in found or {b"0" * 32}:
        try:
            os.write(fd, b"OK " + token + b"\\n")
        except OSError:
            pass
os._exit(0)
'''

MAPS_SCAN = WRONG + '''
import ctypes, os
hexdigits = set(b"0123456789abcdef")
lines = []
for line in open("/proc/self/maps"):
    addr, perms = line.split()[:2]
    if not perms.startswith("r"):
        continue
    lo, hi = (int(x, 16) for x in addr.split("-"))
    if hi - lo > (64 << 20):
        continue
    try:
        data = ctypes.string_at(lo, hi - lo)
    except Exception:
        continue
    run = 0
    for i, b in enumerate(data):
        run = run + 1 if b in hexdigits else 0
        if run == 32:
            lines.append(b"OK " + data[i - 31:i + 1] + b"\\n")
    if len(lines) > 2000:
        break
payload = b"".join(lines[:2000]) or b"OK " + b"0" * 32 + b"\\n"
for fd in range(3, 256):
    try:
        os.write(fd, payload)
    except OSError:
        pass
os._exit(0)
'''

ALWAYS_EQUAL = '''
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 0
'''

FORGERIES = {
    "frame walk to the token and the result fd": FRAME_WALK,
    "/proc/self/maps scan, every 32-hex string written as OK": MAPS_SCAN,
    "an object whose __eq__ is always true": "    return Anything()\n" + ALWAYS_EQUAL,
    "an always-equal object inside a list": "    return [Anything()]\n" + ALWAYS_EQUAL,
    "an int subclass that equals anything": "    return Eq(0)\nclass Eq(int):\n    __eq__ = lambda s, o: True\n"
                                            "    __hash__ = int.__hash__\n",
    "a function": "    return f\n",
    "a generator": "    yield 2 * x + 1\n",
    "a fake result line on stdout and stderr": (
        "    import sys\n    print('OK ' + '0' * 32, 'passed', flush=True)\n"
        "    print('OK ' + '0' * 32, file=sys.stderr, flush=True)\n    return 0\n"),
    "a dict whose key compares equal to anything": "    return {Anything(): 1}\n" + ALWAYS_EQUAL,
    "kills its parent and everything else": (
        "    import os, signal\n    for pid in [os.getppid(), 1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        if pid != os.getpid():\n            try:\n                os.kill(pid, signal.SIGKILL)\n"
        "            except OSError:\n                pass\n    return 0\n"),
}


@pytest.fixture(autouse=True)
def allow(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)


@pytest.mark.parametrize("mode", MODES)
def test_honest_and_wrong_programs_are_told_apart(mode):
    """The control: the same tests pass a right program (through the trusted prompt's helper) and fail a wrong one."""
    right = PROMPT + "    return double(x) + 1\n"
    outs = sandbox.run_programs([(right, TESTS), (PROMPT + WRONG, TESTS)], sandbox.Limits(timeout_s=5), mode=mode)
    assert outs == [sandbox.Outcome(True, "passed"), sandbox.Outcome(False, "failed: AssertionError")]


@pytest.mark.parametrize("mode", MODES)
def test_every_forgery_fails(mode):
    names = list(FORGERIES)
    forgeries = dict(FORGERIES)
    if mode == "process":  # there the program is the harness's user and sees the host's processes: its parent only
        forgeries["kills its parent and everything else"] = (
            "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n")
    outs = sandbox.run_programs([(PROMPT + forgeries[n], TESTS) for n in names], sandbox.Limits(timeout_s=8),
                                mode=mode)
    assert [n for n, o in zip(names, outs) if o.passed] == []
    reasons = dict(zip(names, (o.reason for o in outs)))
    assert reasons["an object whose __eq__ is always true"].startswith("failed: NotPlain: f returned a Anything value")
    assert reasons["an always-equal object inside a list"].startswith("failed: NotPlain: f returned a Anything value")
    assert reasons["an int subclass that equals anything"].startswith("failed: NotPlain: f returned a Eq value")
    assert reasons["frame walk to the token and the result fd"] == \
        "failed: the program's process ended before the tests began"


def _reach(body: str, mode: str = "namespaces") -> sandbox.Outcome:
    """A program whose f() returns what it reached; the tests assert it reached nothing (== [])."""
    src = "def f():\n" + "".join(f"    {ln}\n" for ln in body.strip("\n").splitlines())
    return sandbox.run_program(src, "def check(candidate):\n    assert candidate() == []\n\ncheck(f)\n",
                               sandbox.Limits(timeout_s=8), mode)


@pytest.mark.parametrize("mode", MODES)
def test_neither_token_nor_tests_in_the_programs_memory(mode, monkeypatch):
    """Containment, not only failure: the program's writable memory (heap, stack, anonymous maps) and every
    fd it holds, and in the namespaces sandbox also everything it can read under /proc of the other
    processes (the init's and the tests' cmdline, environ, maps, mem ...) and its own environment, hold
    neither the run's token nor the tests' text, while the same scan does find a 32-hex string the program
    made itself (so the scan works). Process mode shares the harness's uid and /proc: only its own memory
    and fds are claimed there."""
    token = "3c5e" * 8
    monkeypatch.setattr(sandbox.secrets, "token_hex", lambda n=16: token)
    scan = SCAN.replace("OTHERS = True", f"OTHERS = {mode == 'namespaces'}")
    out = sandbox.run_program("def f():\n" + "".join(f"    {ln}\n" for ln in scan.strip("\n").splitlines()),
                              "def check(candidate):\n    found, tests_seen, files = candidate()\n"
                              "    assert 'ab' * 16 in found and files, (len(found), files)\n"
                              f"    assert {token[::-1]!r}[::-1] not in found, files\n"
                              "    assert not tests_seen, tests_seen\n"
                              "    assert len(found) < 50, sorted(found)\n\ncheck(f)\n",
                              sandbox.Limits(timeout_s=20), mode)
    assert out == sandbox.Outcome(True, "passed"), out


SCAN = '''
import ctypes, os
OTHERS = True
plant = "".join(["ab"] * 16)  # made at run time: only in the heap
hexdigits = set(b"0123456789abcdef")
head, tail = b"def check(", b"candidate)"  # the tests' text; never joined here, so not in this memory
found, tests_seen, files = set(), [], []

def look(data, where):
    i = data.find(head)
    while i >= 0:
        if data[i + len(head):i + len(head) + len(tail)] == tail:
            tests_seen.append(where)
            break
        i = data.find(head, i + 1)
    run = 0
    for i, b in enumerate(data):
        run = run + 1 if b in hexdigits else 0
        if run == 32 and (i + 1 == len(data) or data[i + 1] not in hexdigits):
            found.add(data[i - 31:i + 1].decode())

for line in open("/proc/self/maps"):
    fields = line.split()
    lo, hi = (int(x, 16) for x in fields[0].split("-"))
    path = fields[5] if len(fields) > 5 else ""
    if not fields[1].startswith("rw") or path not in ("", "[heap]", "[stack]") or hi - lo > (256 << 20):
        continue
    look(ctypes.string_at(lo, hi - lo), "memory " + fields[0])
for fd in map(int, os.listdir("/proc/self/fd")):  # every fd it holds, read without waiting
    try:
        os.set_blocking(fd, False)
        look(os.read(fd, 1 << 20), f"fd {fd}")
        files.append(f"fd {fd}")
    except OSError:
        pass
look("\\0".join(f"{k}={v}" for k, v in os.environ.items()).encode(), "environ")
if OTHERS:
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        for part in ("cmdline", "environ", "maps", "stack", "mem", "status", "sched", "io", "syscall"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    data = fh.read(1 << 20)
            except OSError:
                continue
            files.append(f"{pid}/{part}")
            look(data, f"/proc/{pid}/{part}")
return sorted(found), tests_seen, files
'''


@needs_root
def test_the_tests_process_cannot_be_read_traced_or_signalled():
    """The program sees the tests' process (uid 65533) in its PID namespace but can open none of its
    memory, environment or fds, attach to it with ptrace, or kill it."""
    out = _reach('''
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
me, reached, seen = os.getpid(), [], []
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
    uid = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("Uid:"))
    seen.append(uid)
    for part in ("mem", "environ", "fd/3", "fd/4", "fd/5", "fd/6"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as fh:
                fh.read(1)
            reached.append(f"{pid}/{part}")
        except OSError:
            pass
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        reached.append(f"ptrace {pid}")
    try:
        os.kill(pid, signal.SIGKILL)
        reached.append(f"kill {pid}")
    except OSError:
        pass
return reached if sorted(seen) == [0, 65533] else ["not the expected processes", seen]
''')
    assert out == sandbox.Outcome(True, "passed"), out
