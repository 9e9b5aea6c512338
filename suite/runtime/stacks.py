"""Where a stage process's main thread spent its wall time: a sampling profile written beside the result.

A GPU evaluation can spend minutes that no progress bar and no timestamped log line explains, in phases that take
seconds on a CPU machine. GPU time is scarce, so a run has to say where the time went by itself: every stage
process (``python -m suite.stages``) samples its
main thread's Python stack every ``interval_s`` and writes ``{stage}.stacks.json`` beside ``{stage}.result.json``
(every 30 s, so that a stage killed on the way leaves one, and at its end); its log ends with
a timeline of what the main thread was doing, in wall-clock time, to line up with vLLM's timestamped lines
(``python -m suite.runtime.stacks FILE`` prints it again, for any span and at any resolution). What it cannot see:
other threads (but for the stage's close() thread, followed while the main thread waits for it) and other
processes: time in vLLM's engine-core process shows as the main thread waiting for it (a poll), and that process's
own log lines carry their timestamps.

Why not a profiler from PyPI: py-spy reads the process from outside (ptrace / process_vm_readv, which the GPU
machines' gVisor sandbox may not allow) and is one more binary to carry there; cProfile and pyinstrument hook every
call the stage makes. This is one daemon thread that reads ``sys._current_frames()`` ten times a second: ~10 us a
sample of a 40-frame stack on this 2-core machine, ~0.01% of a core.

Each sample is weighted by the wall time since the previous one, so the weights add up to the time sampled even
when the sampler is late: a C call that holds the interpreter lock delays the next sample, and that sample still
shows the Python function that made the call.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from suite.runtime import atomic, safeio

INTERVAL_S = 0.1
ENV = "SUITE_STACK_SAMPLING"  # "0": no sampling (the stage runs exactly as before)
# frames that only time or wrap a call (suite.stages.evaluate.timing's timers): the frame they wrap says more
TRANSPARENT = ("suite/stages/evaluate/timing.py:_timer.<locals>.call",
               "suite/stages/evaluate/timing.py:call")  # (profiles written before qualified names)
_STDLIB = os.path.dirname(os.__file__)


_SUITE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the suite package's folder


def _where(path: str) -> str:
    """A frame's file, short: ``suite/...`` for the suite's, ``<stdlib>/...`` for the standard library's, from the
    package folder for an installed package (under site-packages, or under a ``sys.path`` folder such as the GPU
    bundle's ``PYTHONPATH``), else as it is."""
    if path.startswith(_SUITE + os.sep):
        return "suite/" + os.path.relpath(path, _SUITE).replace(os.sep, "/")
    if path.startswith(_STDLIB + os.sep) and "-packages" not in path:
        return "<stdlib>/" + os.path.relpath(path, _STDLIB)
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    roots = [r for r in sys.path if r and os.path.isabs(r) and path.startswith(r.rstrip(os.sep) + os.sep)]
    if roots:
        return os.path.relpath(path, max(roots, key=len)).replace(os.sep, "/")
    return path


def label(code) -> str:
    """How a profile names a frame: its file (``_where``) and its function's qualified name."""
    return f"{_where(code.co_filename)}:{getattr(code, 'co_qualname', code.co_name)}"


class StackSampler:
    """Samples one thread's Python stack (the main thread unless told to follow another) every ``interval_s`` on a
    daemon thread. With ``path`` it also writes the profile there every ``checkpoint_s`` (atomically, and only
    while ``may_write()`` says so), so that a stage killed before its end still leaves where its time went."""

    def __init__(self, interval_s: float = INTERVAL_S, thread_id: int | None = None, path: Path | None = None,
                 checkpoint_s: float = 30.0, may_write=None):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s}")
        self.interval_s = interval_s
        self.thread_id = thread_id if thread_id is not None else threading.main_thread().ident
        self.path, self.checkpoint_s, self.may_write = path, checkpoint_s, may_write
        self.frames: list[str] = []  # "file:function" labels
        self._frame_ids: dict[object, int] = {}  # code object -> index in frames
        self.stacks: list[tuple[int, ...]] = []  # outermost first
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self.samples: list[tuple[float, int]] = []  # (seconds since start, stack index)
        self.error: str | None = None  # why sampling stopped early, if it did
        self.started_unix = time.time()
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "StackSampler":
        self._thread = threading.Thread(target=self._loop, name="suite-stack-sampler", daemon=True)
        self._thread.start()
        return self

    def follow(self, thread_id: int | None) -> None:
        """Sample another thread from now on (the stage's close() thread while the main thread waits for it)."""
        if thread_id is not None:
            self.thread_id = thread_id

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2 * self.interval_s + 1.0)

    def _loop(self) -> None:
        last_write = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
                if self.path is not None and time.monotonic() - last_write >= self.checkpoint_s:
                    last_write = time.monotonic()
                    if self.may_write is None or self.may_write():
                        self.write(self.path)
            except Exception as exc:  # noqa: BLE001 -- a profile is never worth the stage: stop sampling, say why
                self.error = f"{type(exc).__name__}: {exc}"
                return

    def sample(self) -> None:
        frame = sys._current_frames().get(self.thread_id)
        if frame is None:
            return
        ids = []
        while frame is not None:
            code = frame.f_code
            idx = self._frame_ids.get(code)
            if idx is None:
                idx = self._frame_ids[code] = len(self.frames)
                self.frames.append(label(code))
            ids.append(idx)
            frame = frame.f_back
        stack = tuple(reversed(ids))
        sid = self._stack_ids.get(stack)
        if sid is None:
            sid = self._stack_ids[stack] = len(self.stacks)
            self.stacks.append(stack)
        self.samples.append((round(time.perf_counter() - self._t0, 3), sid))

    def to_json(self) -> dict:
        n = len(self.samples)  # the sampling thread may append while this runs (a checkpoint from elsewhere)
        return {"interval_s": self.interval_s, "started_unix": self.started_unix, "pid": os.getpid(),
                "error": self.error, "frames": list(self.frames), "stacks": [list(s) for s in self.stacks],
                "samples": [list(s) for s in self.samples[:n]]}

    def write(self, path: Path) -> dict:
        """Atomically (a temporary file renamed over it): a pack of a run still going reads a whole profile. Returns
        the profile written."""
        data = self.to_json()
        atomic.write(path, json.dumps(data, separators=(",", ":")))
        return data


# ------------------------------------------------------------------ reading a profile


@dataclass(frozen=True)
class Window:
    start_s: float
    end_s: float
    path: str  # what the main thread was doing for most of the window (``dominant``)
    share: float  # the share of the window's time spent under that path's last frame

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


def _is_code(label: str) -> bool:
    """A frame of the suite's or a package's code, not the standard library's or the import system's."""
    return not label.startswith(("<stdlib>/", "<frozen", "<string>"))


def _package(label: str) -> str:
    return label.rsplit("/", 1)[0] if label.startswith("/") else label.split("/", 1)[0]


def _short(data: dict, path: list[int]) -> str:
    """A call path, short, in call order: the suite's innermost frame (a timer skipped) and the frame of another
    package that called it, if one did; the innermost frame of the first package it called into and the innermost
    frame of any package's code below it; the innermost frame of all."""
    labels = [f for f in (data["frames"][i] for i in path) if f not in TRANSPARENT]
    if not labels:
        return "?"
    at = max((i for i, f in enumerate(labels) if f.startswith("suite/")), default=-1)
    code = [i for i, f in enumerate(labels) if _is_code(f) and not f.startswith("suite/")]
    above = [i for i in code if i < at]
    below = [i for i in code if i > at]
    picked = {len(labels) - 1}
    if at >= 0:
        picked.add(at)
    if above:
        picked.add(above[-1])
    if below:
        first = _package(labels[below[0]])
        picked.add(max(i for i in below if _package(labels[i]) == first))
        picked.add(below[-1])
    return " > ".join(labels[i] for i in sorted(picked))


def weighted(data: dict) -> list[tuple[float, float, int]]:
    """(start s, end s, stack index) for each sample: the span since the previous sample (the first from 0)."""
    out, last = [], 0.0
    for t, sid in data["samples"]:
        out.append((last, t, sid))
        last = t
    return out


def dominant(data: dict, parts: list[tuple[float, int]], share: float = 0.6) -> tuple[list[int], float]:
    """The longest call path (frame indexes, outermost first) under which at least ``share`` of the time of
    ``parts`` ((seconds, stack index) pairs) was spent, and the share under its last frame."""
    total = sum(sec for sec, _ in parts) or 1.0
    path: list[int] = []
    members = [(sec, data["stacks"][sid]) for sec, sid in parts]
    got = 1.0
    while True:
        depth = len(path)
        by_frame: Counter = Counter()
        for sec, stack in members:
            if len(stack) > depth:
                by_frame[stack[depth]] += sec
        if not by_frame:
            return path, got
        frame, sec = by_frame.most_common(1)[0]
        if sec / total < share:
            return path, got
        path.append(frame)
        got = sec / total
        members = [(s, st) for s, st in members if len(st) > depth and st[depth] == frame]


def timeline(data: dict, window_s: float | None = None, start_s: float = 0.0, end_s: float | None = None,
             share: float = 0.6) -> list[Window]:
    """The sampled time cut into windows of ``window_s`` (by default about 40 over the whole), each named by what
    the main thread did for most of it (``dominant``); windows in a row with the same name are joined."""
    parts = [(a, b, sid) for a, b, sid in weighted(data) if b > start_s and (end_s is None or a < end_s)]
    if not parts:
        return []
    first, last = max(parts[0][0], start_s), parts[-1][1] if end_s is None else min(parts[-1][1], end_s)
    if window_s is None:
        window_s = next((w for w in (1, 2, 5, 10, 15, 30, 60) if (last - first) / w <= 40), 120)
    if window_s <= 0 or (last - first) / window_s > 100_000:
        raise ValueError(f"window of {window_s} s: it must be > 0 and cut the {last - first:.1f} s into at most "
                         "100,000 windows")
    windows: list[Window] = []
    t, i = first, 0
    while t < last:
        hi = min(t + window_s, last)
        inside = []
        for a, b, sid in parts[i:]:
            if a >= hi:
                break
            overlap = min(b, hi) - max(a, t)
            if overlap > 0:
                inside.append((overlap, sid))
        while i < len(parts) and parts[i][1] <= hi:
            i += 1
        path, got = dominant(data, inside, share)
        name = _short(data, path)
        if windows and windows[-1].path == name:
            prev = windows.pop()
            got = (prev.share * prev.seconds + got * (hi - t)) / (hi - prev.start_s)
            t0 = prev.start_s
        else:
            t0 = t
        windows.append(Window(t0, hi, name, got))
        t = hi
    return windows


def top(data: dict, n: int = 12, start_s: float = 0.0, end_s: float | None = None) -> list[tuple[str, float]]:
    """The ``n`` call paths (``_short`` of whole stacks) that took the most wall time from ``start_s`` to ``end_s``,
    with their seconds."""
    totals: Counter = Counter()
    for a, b, sid in weighted(data):
        overlap = min(b, end_s if end_s is not None else b) - max(a, start_s)
        if overlap > 0:
            totals[sid] += overlap
    named: Counter = Counter()
    for sid, sec in totals.items():
        named[_short(data, data["stacks"][sid])] += sec
    return named.most_common(n)


def report(data: dict, window_s: float | None = None, n: int = 12, start_s: float = 0.0,
           end_s: float | None = None) -> str:
    """The text a stage's log ends with: the timeline and the call paths that took the most time (from ``start_s``
    to ``end_s``)."""
    samples = data["samples"]
    total = samples[-1][0] if samples else 0.0
    clock = lambda s: time.strftime("%H:%M:%S", time.localtime(data["started_unix"] + s))  # noqa: E731
    lines = [f"where the stage's main thread was (pid {data['pid']}; {len(samples)} samples, one every "
             f"{data['interval_s']} s, over {total:.1f} s; each row: from, seconds in, for how long, what it did "
             "for most of that time and that share):"]
    if data.get("error"):
        lines.append(f"  (sampling stopped early: {data['error']})")
    for w in timeline(data, window_s, start_s=start_s, end_s=end_s):
        lines.append(f"  {clock(w.start_s)} {w.start_s:7.1f} {w.seconds:7.1f} s  {w.path}  ({w.share:.0%})")
    lines.append("the call paths that took the most time (innermost frame of the suite > of a package > of all):")
    lines += [f"  {sec:7.1f} s  {path}" for path, sec in top(data, n, start_s, end_s)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m suite.runtime.stacks",
                                 description="Print where a stage process's main thread spent its time, from the "
                                 "stacks.json beside its result.json.")
    ap.add_argument("file", type=Path)
    ap.add_argument("--start", type=float, default=0.0, help="seconds into the stage to start from (default 0)")
    ap.add_argument("--end", type=float, default=None, help="seconds into the stage to stop at (default: its end)")
    ap.add_argument("--window", type=_positive, default=None,
                    help="seconds a row covers (default: about 40 rows over the whole)")
    ap.add_argument("--top", type=int, default=20, help="rows of the most-time table (default 20)")
    args = ap.parse_args(argv)
    try:
        data = safeio.read_json(args.file, "record")
        text = report(data, window_s=args.window, n=args.top, start_s=args.start, end_s=args.end)
    except (OSError, ValueError, KeyError, TypeError, IndexError, safeio.UnsafeRead) as exc:
        print(f"error: {args.file}: not a stage's stack profile ({type(exc).__name__}: {exc}); it is the "
              "{stage}.stacks.json beside a stage's result", file=sys.stderr)
        return 2
    print(text)
    return 0


def _positive(text: str) -> float:
    import argparse

    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
