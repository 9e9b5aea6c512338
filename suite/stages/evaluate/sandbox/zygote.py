"""The harness's end of the namespaces sandbox's zygote: one pre-imported root process that starts every check.

Started once per harness process (again if it died) as ``python -s -S -B -P _boot.py zygote``; each check
is one message on a SOCK_SEQPACKET unix socket: its config (a dict literal) with its pipe fds attached
(SCM_RIGHTS). The zygote forks a child that unshares the namespaces and forks their init (_boot.py).
What a check saves: an ``unshare`` exec and a fresh interpreter with its imports (see the package
docstring for the figures). The zygote never sees a program, the tests or a token, only their pipes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading

from suite.stages.evaluate.sandbox._types import SandboxError

_lock = threading.Lock()
_state: dict = {"proc": None, "sock": None}


def _start(argv: list[str]) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(argv, stdin=theirs.fileno(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}, cwd="/", close_fds=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    _state.update(proc=proc, sock=ours)


def start_check(argv: list[str], cfg: str, fds: dict[str, int]) -> None:
    """Hand one check (its config, a dict literal, and its pipe fds) to the zygote; starts the zygote first
    where needed."""
    keys = list(fds)
    message = repr(keys).encode() + b"\n" + cfg.encode()
    with _lock:
        for _ in range(2):
            proc = _state["proc"]
            if proc is None or proc.poll() is not None:
                _start(argv)
            try:
                socket.send_fds(_state["sock"], [message], [fds[k] for k in keys])
                return
            except OSError:
                _state["sock"].close()
                _state["proc"] = None
    raise SandboxError("the sandbox's zygote process cannot be reached")
