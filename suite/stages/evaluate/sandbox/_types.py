"""The sandbox's public value types and its error (shared by its modules without an import circle)."""

from __future__ import annotations

from dataclasses import dataclass


class SandboxError(RuntimeError):
    """The sandbox itself cannot run (not a verdict on a program)."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # wall clock, whole program
    memory_bytes: int = 1 << 30  # the whole process tree (cgroup); process mode: per process (RLIMIT_AS)
    scratch_bytes: int = 64 << 20  # the writable /tmp (tmpfs)
    file_bytes: int = 64 << 20  # largest file (RLIMIT_FSIZE)
    processes: int = 64  # processes and threads of the tree (pids cgroup); process mode: RLIMIT_NPROC


@dataclass(frozen=True)
class Outcome:
    passed: bool
    reason: str  # "passed", "timed out", "failed: ..."
