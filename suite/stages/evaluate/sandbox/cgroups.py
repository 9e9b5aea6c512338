"""The per-program cgroup v1 groups of the namespaces sandbox (memory and pids): made, read, emptied and removed."""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
import time
from pathlib import Path

from suite.runtime import safeio
from suite.stages.evaluate.sandbox._types import Limits, SandboxError



@functools.lru_cache(maxsize=None)
def _cgroup_dir(controller: str) -> Path | None:
    """Our own cgroup folder of a v1 controller (the per-program groups are made inside it)."""
    try:
        own = next(line.split(":", 2)[2] for line in safeio.read_text("/proc/self/cgroup", "system").splitlines()
                   if controller in line.split(":", 2)[1].split(","))
        for line in safeio.read_text("/proc/self/mountinfo", "system").splitlines():
            left, right = line.split(" - ", 1)
            fields, (fstype, _src, options) = left.split(), right.split()[:3]
            if fstype == "cgroup" and controller in options.split(","):
                root, mountpoint = fields[3], fields[4]
                rel = own[len(root):] if root != "/" and own.startswith(root) else own
                path = Path(mountpoint + rel)
                return path if os.access(path, os.W_OK) else None
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return None


_counter = iter(range(1 << 62))
_swept = False


def _sweep_stale(parents: list[Path]) -> None:
    """Remove groups left by a harness that died (named suite-sandbox-<pid>-...; that pid is gone)."""
    global _swept
    if _swept:
        return
    _swept = True
    for parent in parents:
        for d in parent.glob("suite-sandbox-*"):
            m = re.match(r"suite-sandbox-(\d+)-", d.name)
            if m and not Path(f"/proc/{m.group(1)}").exists():
                try:  # only an empty one: never kill processes we did not start
                    d.rmdir()
                except OSError:
                    pass


class _Cgroups:
    def __init__(self, limits: Limits):
        self.dirs: list[Path] = []
        parents = {c: _cgroup_dir(c) for c in ("memory", "pids")}
        if None in parents.values():
            raise SandboxError("the cgroup v1 memory and pids controllers are not writable")
        _sweep_stale(list(parents.values()))
        name = f"suite-sandbox-{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}"  # not from the token's source
        try:
            self.memory = parents["memory"] / name
            self.memory.mkdir()
            self.dirs.append(self.memory)
            (self.memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            memsw = self.memory / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(limits.memory_bytes))
            self.pids = parents["pids"] / name
            self.pids.mkdir()
            self.dirs.append(self.pids)
            (self.pids / "pids.max").write_text(str(limits.processes + 1))  # + the namespace's init
        except OSError as e:
            self.remove()
            raise SandboxError(f"cannot set up a cgroup for the program: {e}") from e

    def oom_kills(self) -> int:
        try:
            text = safeio.read_text(self.memory / "memory.oom_control", "system")
            m = re.search(r"^oom_kill (\d+)", text, re.M)
            if m:
                return int(m.group(1))
            return int(safeio.read_text(self.memory / "memory.failcnt", "system")) and 1
        except (OSError, ValueError):
            return 0

    def kill(self) -> None:
        """SIGKILL every process in the groups (they stay; remove() waits for them to empty)."""
        for d in self.dirs:
            try:
                pids = [int(p) for p in safeio.read_text(d / "cgroup.procs", "system").split()]
            except (OSError, ValueError):
                continue
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def remove(self) -> None:
        for d in self.dirs:
            _remove_cgroup(d)


def _remove_cgroup(d: Path) -> None:
    """Kill whatever is still in the group, then remove it."""
    for _ in range(200):
        try:
            pids = [int(p) for p in safeio.read_text(d / "cgroup.procs", "system").split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                return
        time.sleep(0.005)
