"""The supervisor process (``python -m suite.runtime.supervisor -- CMD``, started by ``procs.supervised``): a child
subreaper that runs one command, reaps the orphans its tree hands it while it runs, and kills what the tree left
when the command ends, when it is signalled, or when its parent dies (suite.runtime.procs, "Guarantees").

Only the standard library and psutil (imported where used): it runs under the interpreter of ``suite run``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from suite.runtime.procs import PR_SET_CHILD_SUBREAPER, _alive, _preexec, _prctl


def _reap_orphans(keep: int | None = None) -> None:
    """Reap the children that have ended (the orphans handed to the supervisor: a code check's program, a server's
    helper), not the command ``keep`` while it runs (Popen reaps that one): a zombie left here until the stage ends
    is a pid held and a process group that still answers signals."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == keep:
            return
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return


def supervise(cmd: list[str]) -> int:
    """Run ``cmd`` as a child subreaper's only child; kill whatever the tree left when it ends or we are told to stop."""
    import psutil

    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    me = psutil.Process()
    child: subprocess.Popen | None = None

    def kill_tree() -> None:
        for _ in range(50):
            kids = [p for p in me.children(recursive=True) if _alive(p)]
            if not kids:
                break
            for p in kids:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(kids, timeout=1.0)
        _reap_orphans()

    def on_signal(signum, _frame):
        kill_tree()
        os._exit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    if os.getppid() != parent:
        return 137
    child = subprocess.Popen(cmd, preexec_fn=_preexec(False, os.getpid(), signal.SIGKILL))
    while True:
        try:
            rc = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:  # belt and braces: PDEATHSIG should have told us already
                kill_tree()
                return 137
            _reap_orphans(child.pid)
    kill_tree()  # what the command left behind (an engine core, a server, a daemon) goes with it
    if rc < 0:  # end the way the command did, so the caller sees the same status (no core file)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            signal.signal(-rc, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), -rc)
        time.sleep(1)
        return 128 - rc
    return rc


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--":
        sys.exit(supervise(sys.argv[2:]))
    print("usage: python -m suite.runtime.supervisor -- CMD...", file=sys.stderr)
    sys.exit(2)
