"""The harness's side of a check's pipes: feeding the sources, waiting for the sandbox, reading what it wrote."""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait for proc to exit (True) or the timeout to pass (False), without Popen.wait's polling."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
    finally:
        os.close(fd)
    if not ready:
        return False
    proc.wait()
    return True


def _read_until_eof(fd: int, timeout: float, limit: int = 1 << 16) -> tuple[bytes, bool]:
    """What arrives on fd until its writers are gone (True) or the timeout passed (False); closes fd."""
    deadline = time.monotonic() + timeout
    chunks, size = [], 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return b"".join(chunks), False
            b = os.read(fd, limit)
            if not b:
                return b"".join(chunks), True
            if size < limit:
                chunks.append(b)
                size += len(b)
    finally:
        os.close(fd)


def _read_available(fd: int, limit: int = 1 << 16) -> bytes:
    os.set_blocking(fd, False)
    chunks, size = [], 0
    try:
        while size < limit:
            b = os.read(fd, limit)
            if not b:
                break
            chunks.append(b)
            size += len(b)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def _pipe_with(data: bytes) -> int:
    """A pipe that delivers data and then EOF; returns the read end. Small data is written at once;
    larger data (beyond a pipe's 64 KiB) by a thread, as the reader drains it."""
    r, w = os.pipe()
    if len(data) <= 60000:
        try:
            os.write(w, data)
        finally:
            os.close(w)
        return r

    def feed():
        try:
            with open(w, "wb", closefd=True) as fh:
                fh.write(data)
        except OSError:  # the reader died early; its verdict says why
            pass

    threading.Thread(target=feed, daemon=True, name="suite-sandbox-feed").start()
    return r


def _source_fds(source: str, tests: str, token: bytes) -> dict[str, int]:
    fds: dict[str, int] = {}
    try:
        fds["prog_fd"] = _pipe_with(source.encode("utf-8", "surrogatepass"))
        fds["test_fd"] = _pipe_with(tests.encode("utf-8", "surrogatepass"))
        fds["tok_fd"] = _pipe_with(token)
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    return fds
