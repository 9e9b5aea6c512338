"""The parent's side of stage progress: a thread that reads the stages' progress files and reports new counts.

Stages write ``variants/<name>/<stage>.progress.json`` (``suite.runtime.progress``); while a run's jobs run,
``watching`` polls those files (twice a second) and calls ``report(stage, variant, "progress", StageProgress)``
for each record that changed since it last looked. Files already there when it starts (a resumed run's
finished stages) are not reported until they change.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from suite.runtime import progress

POLL_S = 0.5
SUFFIX = ".progress.json"


class StageProgress(NamedTuple):
    """One count of a running stage: ``done`` of ``total`` (None: not known) units of ``what``."""

    what: str
    done: int
    total: int | None

    def __str__(self) -> str:
        return f"{self.what} {self.done}/{self.total}" if self.total is not None else f"{self.what} {self.done}"


def _scan(run_dir: Path) -> dict[Path, float]:
    out: dict[Path, float] = {}
    for path in (run_dir / "variants").glob(f"*/*{SUFFIX}"):
        try:
            out[path] = path.stat().st_mtime_ns
        except OSError:
            continue
    return out


def poll(run_dir: Path, seen: dict[Path, float], report: Callable[..., None]) -> None:
    """Report every progress file of ``run_dir`` whose modification time differs from ``seen`` (updated)."""
    for path, mtime in _scan(run_dir).items():
        if seen.get(path) == mtime:
            continue
        seen[path] = mtime
        record = progress.read(path)
        if record is None:
            continue
        stage = path.name[:-len(SUFFIX)]
        report(stage, path.parent.name, "progress",
               StageProgress(str(record["what"]), int(record["done"]), record.get("total")))


@contextmanager
def watching(run_dir: Path, report: Callable[..., None], interval_s: float = POLL_S) -> Iterator[None]:
    """While the block runs, a daemon thread reports the stages' new progress records (``poll``)."""
    seen = _scan(run_dir)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            try:
                poll(run_dir, seen, report)
            except Exception:  # noqa: BLE001 -- progress is a courtesy: it never stops the run
                continue

    thread = threading.Thread(target=loop, daemon=True, name="stage progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
