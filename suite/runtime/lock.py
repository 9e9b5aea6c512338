"""The run lock: ``<run folder>/run.lock`` names the live ``suite run`` that owns a folder (see suite.runtime.procs).

Light at import (the standard library, safeio, procs, errors): every stage process imports this module
(``result_allowed``).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from suite.runtime import atomic, safeio
from suite.runtime.errors import Problem, SuiteError
from suite.runtime.procs import alive, create_time, describe

RUN_TOKEN_ENV = "SUITE_RUN_TOKEN"
RUN_LOCK_ENV = "SUITE_RUN_LOCK"
LOCK_NAME = "run.lock"


def boot_id() -> str:
    try:
        return safeio.read_text("/proc/sys/kernel/random/boot_id", "system").strip()
    except OSError:
        return ""


class RunLockedError(RuntimeError):
    pass


class RunLock:
    """``<run_dir>/run.lock`` for the lifetime of one ``suite run`` (new or resumed)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.token = os.urandom(16).hex()
        self.taken_over: dict | None = None  # the stale holder this lock replaced, if any

    def _record(self, **stage) -> dict:
        return {"pid": os.getpid(), "create_time": create_time(os.getpid()), "host": socket.gethostname(),
                "boot_id": boot_id(), "token": self.token, "started": time.time(), **stage}

    @staticmethod
    def read(path: Path) -> dict | None:
        """The lock's record, or None when it is missing or not a lock record this module wrote (a
        number where a PID belongs, a list, text: a tampered or corrupt lock names no live holder)."""
        try:
            held = safeio.read_json(path, "state")
        except (OSError, ValueError):
            return None
        if not isinstance(held, dict):
            return None
        for key in ("pid", "stage_pid"):
            if held.get(key) is not None and (isinstance(held[key], bool) or not isinstance(held[key], int)
                                              or held[key] <= 0):
                return None
        for key in ("create_time", "stage_create_time"):
            if held.get(key) is not None and (isinstance(held[key], bool) or not isinstance(held[key], (int, float))):
                return None
        stages = held.get("stages", {})
        if not isinstance(stages, dict) or not all(
                isinstance(s, dict) and isinstance(s.get("pid"), int) and not isinstance(s["pid"], bool) and s["pid"] > 0
                and (s.get("create_time") is None or isinstance(s["create_time"], (int, float)))
                and isinstance(s.get("host", ""), str) for s in stages.values()):
            return None
        if not all(isinstance(held.get(k), str) for k in ("host", "boot_id", "token")):
            return None
        return held

    @staticmethod
    def holder_alive(h: dict) -> str | None:
        """What of a lock's holder still runs on this machine (None: nothing, or it is another machine's)."""
        if h.get("host") != socket.gethostname() or h.get("boot_id") != boot_id():
            return None  # another host or another boot: that process cannot be running here
        if alive(h.get("pid"), h.get("create_time")):
            return f"`suite run` pid {h['pid']} ({describe(h['pid'])})"
        if alive(h.get("stage_pid"), h.get("stage_create_time")):
            return (f"its {h.get('stage', 'stage')} process pid {h['stage_pid']} (the run that started it, pid "
                    f"{h.get('pid')}, is gone)")
        for job, s in (h.get("stages") or {}).items():  # jobs run at once (suite.orchestrate.executors)
            if s.get("host", h.get("host")) == socket.gethostname() and alive(s["pid"], s.get("create_time")):
                return (f"its {job} process pid {s['pid']} (the run that started it, pid {h.get('pid')}, is gone)")
        return None

    def acquire(self) -> "RunLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(LOCK_NAME + ".guard"), "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)  # judging and taking over a lock is one step
            held = self.read(self.path) if self.path.exists() else None
            if self.path.exists() and held is None and time.time() - self.path.stat().st_mtime < 10:
                raise RunLockedError(f"{self.path} is being written by another `suite run`")
            if held is not None:
                if who := self.holder_alive(held):
                    raise RunLockedError(f"{self.path.parent} is in use by {who} on {held.get('host')}")
                self.taken_over = held
            elif self.path.exists():  # older than 10 s and not a lock record: corrupt or tampered
                self.taken_over = {"pid": "(unreadable lock)", "host": "?"}
            self._write(self._record())
        return self

    def _write(self, record: dict) -> None:
        atomic.write(self.path, json.dumps(record))

    def _ours(self) -> dict | None:
        """The lock's record while this lock holds it (its token), else None."""
        held = self.read(self.path)
        return held if held and held.get("token") == self.token else None

    def owned(self) -> bool:
        return self._ours() is not None

    def set_stage(self, stage: str, variant: str, pid: int | None) -> None:
        """Record a stage process now running (``pid``), or that it ended (None), so that a resume can see
        it is alive. Several jobs run at once (threads here, Ray workers elsewhere): each update is a
        read-modify-write of the lock under its guard file."""
        import fcntl

        job = f"{stage} {variant}"
        with open(self.path.with_name(LOCK_NAME + ".guard"), "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            held = self._ours()  # read once: whether it is ours, and what of it to keep
            if held is None:
                return
            stages = dict(held.get("stages") or {})
            if pid:
                stages[job] = {"pid": pid, "create_time": create_time(pid), "host": socket.gethostname()}
            else:
                stages.pop(job, None)
            self._write({**held, "stages": stages})

    def release(self) -> None:
        if self.owned():
            self.path.unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        return {RUN_LOCK_ENV: str(self.path), RUN_TOKEN_ENV: self.token}


def result_allowed() -> str | None:
    """In a stage process: why it must not write its result (None: it may). A stage started by a run
    whose lock has since been taken over (or released) belongs to no live run."""
    path, token = os.environ.get(RUN_LOCK_ENV), os.environ.get(RUN_TOKEN_ENV)
    if not path or not token:
        return None  # not started by `suite run` (tests, a stage run by hand)
    held = RunLock.read(Path(path))
    if held is None:
        return f"the run lock {path} is gone: the run that started this stage has ended"
    if held.get("token") != token:
        return (f"the run folder was taken over by `suite run` pid {held.get('pid')} on {held.get('host')}: "
                "this stage's result belongs to no live run")
    return None


def refuse_live(run_dir: Path, what: str) -> None:
    """Bad input (SuiteError, exit 2) when a live ``suite run`` holds ``run_dir``'s lock: ``what`` (a summary, a
    report, a load) would read a run still being written, and a write would overwrite the live run's own files. A
    lock of a run that has ended (or of another machine, where it cannot be checked: as ``acquire`` judges it) is
    no refusal."""
    path = Path(run_dir) / LOCK_NAME
    held = RunLock.read(path) if path.is_file() else None
    who = RunLock.holder_alive(held) if held else None
    if who:
        raise SuiteError(Problem(str(path), "", f"in progress, PID {held['pid']} ({who} on {held.get('host')}): "
                                 f"{what} reads only a run that is not running, and leaves this one's files alone",
                                 f"wait until that `suite run` ends (or stop it with Ctrl-C), then {what} again"))
