"""The one place that starts, watches and stops process trees (stages, servers, clients); ``lock`` has the run lock.

Guarantees (Linux):
- ``spawn`` starts a process in a process group of its own (``group=True``) with ``PR_SET_PDEATHSIG``
  = SIGKILL: when the process that started it dies, even by ``kill -9``, the kernel kills it. (The
  signal follows the death of the *thread* that called fork: spawn from a thread that outlives the
  child, in practice the main thread.)
- ``supervised`` starts a command under ``python -m suite.runtime.supervisor``: a small process that is a
  child subreaper (``PR_SET_CHILD_SUBREAPER``: every orphan of the tree, double-forked daemons and
  ``setsid`` escapees included, is reparented to it), gets SIGTERM when its parent dies, and then —
  or when the command ends — kills every process left in the tree before it exits with the
  command's status. vLLM's engine cores and API servers are grandchildren of ``suite run``: this is
  what takes them down with it.
- ``stop`` terminates a process and all its descendants (psutil ``children(recursive=True)`` plus its
  process group): SIGTERM, wait up to ``grace_s`` for each to end (a zombie whose threads all ended has ended), SIGKILL what is left.
- ``RunLock`` (in ``suite.runtime.lock``): ``<run folder>/run.lock`` holds the PID (and its start time), host name, boot id and a
  random token of the ``suite run`` that owns the folder, plus the stage process it is running. A
  second ``suite run --resume`` refuses while either is alive on this machine; a lock of a dead
  process, of another boot or of another host (a lost machine) is taken over. A stage writes its
  result only while the lock still holds its run's token (``result_allowed``), so a stage orphaned
  by a lost run can never overwrite a result that the run which took the folder over accepted.

Only the standard library at import: the stage entry point (``suite.stages``) imports this module in
every environment; psutil is imported where it is used.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from suite.runtime import safeio

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_libc = None


def _prctl(option: int, value: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _preexec(group: bool, parent_pid: int, deathsig: int | None):
    global _libc
    if deathsig and _libc is None:  # dlopen here, in the parent: not in the child between fork and exec
        _libc = ctypes.CDLL(None, use_errno=True)

    def apply():  # runs in the child between fork and exec: no locks, no allocation-heavy work
        if group:
            os.setpgid(0, 0)
        if deathsig:
            _prctl(PR_SET_PDEATHSIG, deathsig)
            if os.getppid() != parent_pid:  # the parent died before prctl: nobody will signal us
                os._exit(137)

    return apply


def spawn(cmd: list[str], *, stdout=None, env: dict[str, str] | None = None, cwd=None, group: bool = True,
          die_with_parent: bool = True, stdin=subprocess.DEVNULL, stderr=None) -> subprocess.Popen:
    """Start ``cmd`` in its own process group, dying with us: stdin closed (or ``stdin``, e.g. a pipe to a worker),
    stderr into ``stderr``, else into stdout when that is given."""
    if stderr is None and stdout is not None:
        stderr = subprocess.STDOUT
    return subprocess.Popen(cmd, stdout=stdout, stderr=stderr, stdin=stdin, env=env, cwd=cwd,
                            preexec_fn=_preexec(group, os.getpid(), signal.SIGKILL if die_with_parent else None))


def supervised(cmd: list[str], *, stdout=None, env: dict[str, str] | None = None, cwd=None) -> subprocess.Popen:
    """Start ``cmd`` under a supervisor that kills its whole tree when it ends or when we die."""
    python = sys.executable  # ours has psutil; the command may run under another interpreter
    sup_env = dict(env if env is not None else os.environ)
    repo = str(Path(__file__).resolve().parents[2])
    sup_env["PYTHONPATH"] = repo + (os.pathsep + sup_env["PYTHONPATH"] if sup_env.get("PYTHONPATH") else "")
    return subprocess.Popen([python, "-m", "suite.runtime.supervisor", "--", *cmd], stdout=stdout,
                            stderr=subprocess.STDOUT if stdout is not None else None, stdin=subprocess.DEVNULL,
                            env=sup_env, cwd=cwd, preexec_fn=_preexec(True, os.getpid(), signal.SIGTERM))


def tree(pid: int) -> list:
    """The process and all its descendants (psutil.Process objects; those already gone are left out)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _group_members(pgid: int) -> list:
    import psutil

    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def stop(proc: subprocess.Popen | int, grace_s: float = 30.0, group: bool = True) -> list[str]:
    """SIGTERM a process, its descendants and (``group``) its process group; SIGKILL what is left after
    ``grace_s``; reap it. Safe to call on a process that already ended. Returns what outlived the grace
    ('PID NAME' each; empty when everything ended on SIGTERM), so that a caller can say who made it wait."""
    pid = proc.pid if isinstance(proc, subprocess.Popen) else proc
    popen = proc if isinstance(proc, subprocess.Popen) else None
    live = _members(pid, popen, group)
    if live and grace_s > 0:
        _signal_all(live, signal.SIGTERM)
        _wait_ended(live, popen, grace_s)
    outlived = _kill_left(pid, popen, group)
    if popen is not None:
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return outlived


def _members(pid: int, popen: subprocess.Popen | None, group: bool) -> list:
    """What ``stop`` ends, still alive: the process and its descendants, plus (``group``) its process group; never
    this process."""
    # a reaped process's pid may already be someone else's: then only its group is ours to signal
    # (the kernel does not hand out a process-group id as a pid while the group has members)
    reaped = popen is not None and popen.returncode is not None
    found = {} if reaped else {p.pid: p for p in tree(pid)}
    if group:
        found.update({p.pid: p for p in _group_members(pid)})
    found.pop(os.getpid(), None)
    return [p for p in found.values() if _alive(p)]


def _signal_all(live: list, sig: int) -> None:
    import psutil

    for p in live:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def _wait_ended(live: list, popen: subprocess.Popen | None, timeout: float) -> None:
    """Wait up to ``timeout`` for every process of ``live`` to end (``popen``'s own child is reaped by it)."""
    others = [p for p in live if popen is None or p.pid != popen.pid]  # Popen reaps its own child
    deadline = time.monotonic() + timeout
    if popen is not None and any(p.pid == popen.pid for p in live):
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    # Not psutil.wait_procs: for a process that is not our child it polls until the pid is gone, and an
    # orphan that ended stays a zombie until its new parent reaps it -- under the stage's supervisor (a
    # child subreaper that reaps only when its command ends) that was never within the grace, so every
    # server stop waited the whole of it, whatever the grace was. Ended
    # is ended: a zombie counts as gone (``_alive``).
    while (others := [p for p in others if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)


def _kill_left(pid: int, popen: subprocess.Popen | None, group: bool) -> list[str]:
    """SIGKILL what is still alive until nothing is; 'PID NAME' of each process the first SIGKILL found."""
    outlived: list[str] = []
    for _ in range(50):  # a forking tree can add members while we kill
        live = _members(pid, popen, group)
        if not live:
            break
        if not outlived:
            outlived = [f"{p.pid} {_name(p)}" for p in live]
        _signal_all(live, signal.SIGKILL)
        _wait_ended(live, popen, 2.0)
    return outlived


def _name(p) -> str:
    import psutil

    try:
        return " ".join(p.cmdline())[:120] or p.name()
    except psutil.Error:
        return "?"


def kill_group(proc: subprocess.Popen, attempts: int = 200) -> None:
    """SIGKILL a process group (the sandbox's programs) until no member runs (a forking program can add members
    while we kill); the leader is reaped first so that its zombie does not keep the group alive. Members left as
    zombies end the wait: they are someone else's to reap (an orphan's is the nearest subreaper's, which for a stage
    is its supervisor, or init's), and a signal reaches a zombie without effect, so waiting for the group to empty
    would spin through every attempt (10 ms each) on every check, for nothing."""
    for i in range(attempts):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if i == 0:
            proc.wait()
        elif not any(_alive(p) for p in _group_members(proc.pid)):
            return
        else:
            time.sleep(0.01)


def _alive(p) -> bool:
    try:
        return p.is_running() and not _ended_zombie(p)
    except Exception:  # psutil.Error: gone
        return False


def _ended_zombie(p) -> bool:
    """A zombie whose every thread has ended. A process whose main thread exited while other threads run also
    reads ``Z`` (the thread-group leader is a zombie), yet it runs and may hold GPU memory: it has not ended."""
    import psutil

    if p.status() != psutil.STATUS_ZOMBIE:
        return False
    try:
        return len(os.listdir(f"/proc/{p.pid}/task")) <= 1
    except OSError:
        return True


def alive(pid: int | None, create_time: float | None = None) -> bool:
    """Whether process ``pid`` runs (and, given its start time, is that same process, not a reused pid)."""
    import psutil

    if not pid:
        return False
    try:
        p = psutil.Process(pid)
        if _ended_zombie(p):
            return False
        return create_time is None or abs(p.create_time() - create_time) < 1.0
    except psutil.Error:
        return False


def create_time(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def describe(pid: int) -> str:
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline())[:200] or "?"
    except psutil.Error:
        return "?"


def signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


# ------------------------------------------------------------------ what a log says went wrong

_EXCEPTION_LINE = re.compile(r"^\W*(?:\[rank\d+\]:\s*)?(?:\([\w ]+pid=\d+\)\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*)")
_ERROR_LINE = re.compile(r"(?:\berror: |\bERROR\b|\[Errno \d+\])(.*)")
_NOISE = ("nanobind:", "leaked", "See https://nanobind")


def error_line(text: str) -> str | None:
    """The line that says what went wrong: the last 'SomeError: message' line (the exception that ended
    it), else the last line with 'error:' / 'ERROR' / '[Errno N]' (argparse, uvicorn, vLLM's logger);
    None when there is none."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(_NOISE)]
    found = [m.group(1) for ln in lines if (m := _EXCEPTION_LINE.match(ln))]
    if found:
        last = found[-1]
        if "root cause above" in last:  # vLLM's wrapper ("Engine core initialization failed. See root cause
            # above"): the cause is the engine core's own exception, printed before it
            cause = next((f for f in reversed(found[:-1]) if "root cause above" not in f), None)
            if cause:
                return f"{cause[:300]} ({last[:100]})"
        return last[:400]
    for ln in reversed(lines):
        if _ERROR_LINE.search(ln) and "Traceback" not in ln:
            return ln[:400]
    return None


def failure_line(path: Path) -> str:
    """``error_line`` of a log file, else its last line."""
    try:
        text = safeio.read_text(path, "log", errors="replace")
    except FileNotFoundError:
        return "(no log)"
    if found := error_line(text):
        return found
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:400] if lines else "(empty log)"


# ------------------------------------------------------------------ ports


def listeners(port: int) -> list[int]:
    """PIDs of the processes that listen on TCP ``port`` (any address)."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    return sorted({c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   and c.pid})
