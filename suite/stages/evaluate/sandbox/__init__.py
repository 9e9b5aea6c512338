"""Runs model-written programs (HumanEval) so that a pass is proven and the program is contained.

Nothing runs unless the recipe opted in (``eval.allow_code_execution: true``, which the evaluate
stage passes as ``SUITE_ALLOW_CODE_EXECUTION=1``; ``suite score-code`` needs
``--allow-code-execution``). Two modes, chosen by ``eval.code_sandbox`` (``SUITE_CODE_SANDBOX`` in
the evaluate process) and recorded as ``EvaluateResult.code_sandbox``:

``namespaces`` (default). Each program gets, per run:
  - fresh PID (own ``/proc``), network (only a downed loopback), mount, IPC and UTS namespaces
    (unshare(2), by a pre-imported zygote process: zygote.py);
  - a new root file system: a read-only tmpfs holding read-only, nosuid binds of ``/usr``, ``/etc``,
    the ``/bin``-style links and the Python installation and environment the harness runs; a scratch
    tmpfs at ``/tmp`` (its working folder and ``$HOME``) capped at ``Limits.scratch_bytes`` and one at
    ``/dev/shm`` capped at a quarter of that (both also count against the memory limit); the device
    nodes null/zero/full/random/urandom. Nothing else of the host is visible: not the home
    folder, not the suite's folders, not ``/run`` or the host's ``/tmp``; so no file is written
    outside the scratch, and no unix socket of the host can be reached;
  - uid/gid 65534 with no supplementary groups, no capabilities, ``no_new_privs``, a fresh session
    keyring, and an environment of only ``PATH``, ``HOME`` and ``TMPDIR`` (the harness's environment,
    credentials included, is neither inherited nor readable: the harness is outside the PID namespace
    and the init's ``/proc/1/environ`` belongs to root);
  - a seccomp filter refusing AF_UNIX sockets, new (user) namespaces, io_uring and kernel keyrings;
  - one memory cgroup (``memory.limit_in_bytes`` and, where swap is accounted, ``memsw``) and one
    pids cgroup (``pids.max``) for its whole process tree, removed afterwards; RLIMIT_CPU per process;
  - an init (pid 1 of the namespace, root, not signalable or traceable by the program) that reaps
    orphans and ends when the program's first process ends or the time limit passes; the kernel
    then kills every process left in the namespace, and the harness kills anything still in the
    cgroups before removing them. No process of a program outlives its check.
  Where the kernel or the privileges do not allow this, the sandbox refuses to run code
  (``SandboxError`` with the reason) instead of falling back silently.

``process`` (only when asked for). The program runs in its own session and temporary folder with
rlimits (CPU, address space, file size, process count) and the same small environment; its process group
is killed afterwards. It does not isolate the network, the file system, other processes or the
harness, and root ignores the process-count limit: use it only where namespaces are unavailable and
the code is trusted.

Two processes per check (both modes; design and threat model in docs/guide-notes/sandbox.md). The
model-written program runs in an *untrusted* process (uid 65534 in ``namespaces`` mode) and the
benchmark's tests (the trusted prompt's helpers, ``check``, ``check(entry_point)``) in a *trusted*
one (uid 65533, not dumpable) where the entry point is a proxy: each call goes over a pipe as plain
data (None, bool, int, float, str, bytes, list, tuple, set, dict: anything else fails the item) and
the answer comes back the same way (sandbox/_calls.py). Only the trusted process holds the per-run
token and the verdict pipe; it reads the token after the program's process was forked. A program
passes only if ``OK <token>`` arrives and the trusted process exited with status 0. So an early exit
never passes (the tests' side sees the pipe close), and neither a frame walk, a memory scan of the
program's own process, a fake line on any fd it holds nor an always-equal object (it cannot cross
the pipe) forges one. lm-eval's code_eval stays the reference for what a pass is: the whole program
under one timeout, any exception a failure.

Why a split and its cost, and the zygote. Method: the 164 canonical HumanEval solutions through
run_programs (2 workers) on the 2-core development host shared with other jobs, 3 interleaved runs of
each build, the 1-minute load average noted; CPU per program from RUSAGE_CHILDREN. One process per
program (before the split): 16.4-31.9 programs/s, 29-31 ms CPU a program; the split as first built
(util-linux ``unshare`` and a fresh interpreter per check, two processes, a pipe round trip per call):
17.6-22.7/s, 34-39 ms CPU, i.e. the split costs ~5-8 ms CPU (~20 %) a program; the split with the
zygote (zygote.py: one pre-imported root process per harness forks each check's namespaces and init,
so no exec and no imports per check): 36.1-45.7/s. Load 7.9-9.7 throughout. The profile (strace -f,
-X importtime) had put ~100 ms of a check's wall time under load into the exec and start of the
interpreter, against ~5 ms to build the root and the children's own run.

Not defended against: kernel exploits (the program shares the host kernel; the seccomp filter is a
short deny list, there is no VM); reading world-readable files under the bound system and Python
folders; CPU contention with the harness. ``process`` mode: none of the containment above (the
program runs as the harness's user, sees its files, network and processes, and a program run as root
can ptrace the tests' process); only the two-process split, the rlimits and the group kill.
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from suite.runtime import procs
from suite.stages.evaluate.sandbox import _calls
from suite.stages.evaluate.sandbox import zygote
from suite.stages.evaluate.sandbox._pipes import _read_available, _read_until_eof, _source_fds, _wait
from suite.stages.evaluate.sandbox._types import Limits, Outcome, SandboxError
from suite.stages.evaluate.sandbox.cgroups import _cgroup_dir, _Cgroups

__all__ = ["ALLOW_ENV", "MODE_ENV", "MODES", "Limits", "Outcome", "SandboxError", "check_allowed", "current_mode",
           "ensure_available", "run_program", "run_programs", "unavailable_reason", "used_modes"]

ALLOW_ENV = "SUITE_ALLOW_CODE_EXECUTION"
MODE_ENV = "SUITE_CODE_SANDBOX"
MODES = ("namespaces", "process")
DEFAULT_MODE = "namespaces"
NOBODY = 65534
_BOOT = str(Path(__file__).resolve().parent / "_boot.py")
_SYSTEM_BINDS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc")
_PROGRAM_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
_MAX_PROGRAM_BYTES = 4 << 20
_PROBE = ("def f():\n    return (1, 2.5)\n", "def check(c):\n    assert c() == (1, 2.5)\n\ncheck(f)\n")


# ------------------------------------------------------------------ consent and mode


def check_allowed() -> None:
    if os.environ.get(ALLOW_ENV) != "1":
        raise PermissionError(
            "model-written code execution is off; set eval.allow_code_execution: true in the recipe"
        )


def current_mode() -> str:
    mode = os.environ.get(MODE_ENV) or DEFAULT_MODE
    if mode not in MODES:
        raise SandboxError(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


_used: set[str] = set()


def used_modes() -> list[str]:
    """The modes programs actually ran under in this process (for EvaluateResult.code_sandbox)."""
    return sorted(_used)


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


def unavailable_reason() -> str | None:
    """Why the namespaces sandbox cannot run here (None: it can). Checked once per process, by
    running a trivial program through it."""
    with _probe_lock:
        if "namespaces" not in _probe_result:
            _probe_result["namespaces"] = _probe()
        return _probe_result["namespaces"]


def ensure_available(mode: str) -> None:
    if mode not in MODES:
        raise SandboxError(f"code sandbox {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "namespaces" and (why := unavailable_reason()):
        raise SandboxError(
            f"the namespaces code sandbox cannot run here: {why}; run as root on Linux with "
            "the cgroup v1 memory and pids controllers mounted read-write, or set "
            "eval.code_sandbox: process (weaker: no network, file-system or process isolation)"
        )


def _probe() -> str | None:
    if sys.platform != "linux":
        return f"the platform is {sys.platform}, not Linux"
    if os.geteuid() != 0:
        return "not running as root (needed to create namespaces and cgroups and to switch to uid 65534)"
    for controller in ("memory", "pids"):
        if _cgroup_dir(controller) is None:
            return f"no cgroup v1 {controller} controller mounted (cgroup v2-only hosts are not supported)"
    try:
        out = _run_namespaces(_PROBE[0], _PROBE[1], Limits(timeout_s=20), secrets.token_hex(16).encode())
    except SandboxError as e:
        return str(e)
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return None if out.passed else f"a program that does nothing did not pass ({out.reason})"


# ------------------------------------------------------------------ running one program


@functools.lru_cache(maxsize=1)
def _site_paths() -> list[str]:
    import site

    paths = site.getsitepackages() if hasattr(site, "getsitepackages") else []
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]


@functools.lru_cache(maxsize=1)
def _binds() -> list[str]:
    """System folders plus the Python installation and environment, without nested duplicates."""
    python = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix,
                                            os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))]
    python += [os.path.realpath(p) for p in _site_paths()]
    binds = [p for p in _SYSTEM_BINDS if os.path.lexists(p)]
    covered = [os.path.realpath(p) for p in binds if not os.path.islink(p)]
    for p in python:
        if os.path.isdir(p) and not any(p == c or p.startswith(c.rstrip("/") + "/") for c in covered):
            binds.append(p)
            covered.append(p)
    return binds


def _config(limits: Limits, fds: dict, **extra) -> str:
    """The bootstrap's configuration, as a Python dict literal (it reads it without importing json)."""
    return repr({
        **fds, "timeout_s": float(limits.timeout_s), "cpu_s": int(math.ceil(limits.timeout_s)) + 1,
        "memory_bytes": int(limits.memory_bytes), "scratch_bytes": int(limits.scratch_bytes),
        "file_bytes": int(limits.file_bytes), "processes": int(limits.processes),
        "uid": NOBODY, "gid": NOBODY, "env": dict(_PROGRAM_ENV), "paths": _site_paths(), **extra,
    })


def _interpreter() -> list[str]:
    return [sys.executable, "-s", "-S", "-B", "-P", _BOOT]


def _verdict(res: bytes, token: bytes, status: dict) -> Outcome:
    lines = res.splitlines()
    ok = b"OK " + token in lines
    err = next((ln[4:].decode("utf-8", "replace") for ln in lines if ln.startswith(b"ERR ")), None)
    if status.get("timeout"):
        return Outcome(False, "timed out")
    code, sig = status.get("exit"), status.get("signal")
    if ok and code == 0 and err is None:  # an ERR line means the tests raised, whatever followed it
        return Outcome(True, "passed")
    if ok and err is None:
        return Outcome(False, f"failed: the tests returned but the process then "
                              f"{f'exited with status {code}' if sig is None else f'was killed by {_signame(sig)}'}")
    if err is not None:
        if err.startswith(("SystemExit", "KeyboardInterrupt", "GeneratorExit")):
            return Outcome(False, f"failed: exited before the tests finished ({err})")
        return Outcome(False, f"failed: {err}")
    if sig is not None:
        return Outcome(False, f"failed: killed by {_signame(sig)} before the tests finished")
    return Outcome(False, f"failed: exited with status {code} before the tests finished (no completion token)")


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _run_namespaces(source: str, tests: str, limits: Limits, token: bytes) -> Outcome:
    cg = _Cgroups(limits)
    fds: dict[str, int] = {}
    try:
        fds = _source_fds(source, tests, token)
        res_r, fds["res_fd"] = os.pipe()
        status_r, fds["status_fd"] = os.pipe()
        cfg = _config(limits, fds, entry=_calls.entry_point(tests), cgroups=[str(d) for d in cg.dirs], binds=list(_binds()))
        zygote.start_check([*_interpreter(), "zygote"], cfg, fds)  # forks the check's namespaces and init
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        cg.remove()
        raise
    for fd in fds.values():
        os.close(fd)
    try:
        # the init inside enforces timeout_s itself; its end closes the status pipe
        raw_status, finished = _read_until_eof(status_r, limits.timeout_s + 5)
        if not finished:
            cg.kill()  # the init too (it joined the groups): the kernel then ends the whole namespace
        res = _read_available(res_r)
        oom = cg.oom_kills()
    finally:
        cg.remove()
    status = _parse_status(raw_status)
    if status is None:
        if not finished:
            return Outcome(False, "timed out")
        if oom:
            return Outcome(False, f"failed: killed at the memory limit ({limits.memory_bytes >> 20} MiB)")
        raise SandboxError("the sandbox ended without a verdict (its init ended without a report)")
    if "error" in status:
        raise SandboxError(status["error"])
    out = _verdict(res, token, status)
    # the OOM killer ends the program's process: the tests see its pipe close (or die themselves)
    if not out.passed and oom and (status.get("signal") == signal.SIGKILL or "process ended" in out.reason):
        return Outcome(False, f"failed: killed at the memory limit ({limits.memory_bytes >> 20} MiB)")
    return out


def _parse_status(raw: bytes) -> dict | None:
    """The init's report: one line 'exit N', 'signal N', 'timeout True' or 'error MESSAGE'."""
    line = raw.decode("utf-8", "replace").strip().split("\n")[0]
    if not line:
        return None
    key, _, value = line.partition(" ")
    if key in ("exit", "signal"):
        return {key: int(value)}
    return {key: value}


def _run_process(source: str, tests: str, limits: Limits, token: bytes) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="suite-sandbox-") as work:
        fds: dict[str, int] = {}
        try:
            fds = _source_fds(source, tests, token)
            res_r, fds["res_fd"] = os.pipe()
            cfg = _config(limits, fds, entry=_calls.entry_point(tests))
            env = {"PATH": _PROGRAM_ENV["PATH"], "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0"}
            proc = subprocess.Popen([*_interpreter(), "process", cfg], cwd=work, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, pass_fds=tuple(fds.values()), close_fds=True,
                                    start_new_session=True)
        finally:
            for fd in fds.values():
                os.close(fd)
        try:
            finished = _wait(proc, limits.timeout_s)
        finally:
            procs.kill_group(proc)
        res = _read_available(res_r)
    if not finished:
        return Outcome(False, "timed out")
    rc = proc.returncode
    return _verdict(res, token, {"exit": rc} if rc >= 0 else {"signal": -rc})


_slots = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def run_program(source: str, tests: str, limits: Limits = Limits(), mode: str | None = None) -> Outcome:
    """Run one model-written program against its tests (which end with ``check(ENTRY_POINT)``); passed
    means the tests, run in a process of their own, returned (positive proof) within the limits."""
    check_allowed()
    mode = mode or current_mode()
    ensure_available(mode)
    _calls.entry_point(tests)  # ValueError now, in the caller, for tests without their check line
    for what, text in (("program", source), ("tests", tests)):
        if len(text.encode("utf-8", "surrogatepass")) > _MAX_PROGRAM_BYTES:
            return Outcome(False, f"failed: the {what} is larger than {_MAX_PROGRAM_BYTES >> 20} MiB")
    token = secrets.token_hex(16).encode()
    with _slots:
        out = (_run_namespaces if mode == "namespaces" else _run_process)(source, tests, limits, token)
    _used.add(mode)
    return out


def run_programs(items: list[tuple[str, str]], limits: Limits = Limits(), mode: str | None = None,
                 workers: int | None = None) -> list[Outcome]:
    """Run many (program, tests) pairs on a pool of workers (one per CPU by default); outcomes in input order."""
    check_allowed()
    mode = mode or current_mode()
    ensure_available(mode)
    workers = max(1, min(len(items), workers or os.cpu_count() or 1))
    if workers == 1:
        return [run_program(p, t, limits, mode) for p, t in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda item: run_program(item[0], item[1], limits, mode), items))
