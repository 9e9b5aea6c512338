"""Where a stage process's main thread spent its wall time: a sampling profile written beside the result.

The H200 evaluations left ~130-145 s a variant that no progress bar and no timestamped log line explains, and on 2
CPU cores here the same phases take seconds (docs/results/h200-eval1-20261204/). A GPU session is 30 minutes, so the
next one has to say where the time went by itself: every stage process (``python -m suite.stages``) samples its
main thread's Python stack every ``interval_s`` and writes ``stacks.json`` beside ``result.json``; its log ends with
a timeline of what the main thread was doing, in wall-clock time, to line up with vLLM's timestamped lines
(``python -m suite.stages.stacks FILE`` prints it again, for any span).

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

INTERVAL_S = 0.1
ENV = "SUITE_STACK_SAMPLING"  # "0": no sampling (the stage runs exactly as before)
# frames that only time or wrap a call (suite.stages.evaluate.timing's timers): the frame they wrap says more
TRANSPARENT = ("suite/stages/evaluate/timing.py:call",)
_STDLIB = os.path.dirname(os.__file__)


_SUITE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the suite package's folder


def _where(path: str) -> str:
    """A frame's file, short: ``suite/...`` for the suite's, from the package folder for an installed package,
    ``<stdlib>/...`` for the standard library's, else as it is."""
    if path.startswith(_SUITE + os.sep):
        return "suite/" + os.path.relpath(path, _SUITE).replace(os.sep, "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    if path.startswith(_STDLIB + os.sep):
        return "<stdlib>/" + os.path.relpath(path, _STDLIB)
    return path


class StackSampler:
    """Samples one thread's Python stack (the main thread by default) every ``interval_s`` on a daemon thread."""

    def __init__(self, interval_s: float = INTERVAL_S, thread_id: int | None = None):
        self.interval_s = interval_s
        self.thread_id = thread_id if thread_id is not None else threading.main_thread().ident
        self.frames: list[str] = []  # "file:function" labels
        self._frame_ids: dict[object, int] = {}  # code object -> index in frames
        self.stacks: list[tuple[int, ...]] = []  # outermost first
        self._stack_ids: dict[tuple[int, ...], int] = {}
        self.samples: list[tuple[float, int]] = []  # (seconds since start, stack index)
        self.started_unix = time.time()
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "StackSampler":
        self._thread = threading.Thread(target=self._loop, name="suite-stack-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2 * self.interval_s + 1.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

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
                self.frames.append(f"{_where(code.co_filename)}:{code.co_name}")
            ids.append(idx)
            frame = frame.f_back
        stack = tuple(reversed(ids))
        sid = self._stack_ids.get(stack)
        if sid is None:
            sid = self._stack_ids[stack] = len(self.stacks)
            self.stacks.append(stack)
        self.samples.append((round(time.perf_counter() - self._t0, 3), sid))

    def to_json(self) -> dict:
        return {"interval_s": self.interval_s, "started_unix": self.started_unix, "pid": os.getpid(),
                "frames": self.frames, "stacks": [list(s) for s in self.stacks],
                "samples": [list(s) for s in self.samples]}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), separators=(",", ":")))


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


def _short(data: dict, path: list[int]) -> str:
    """A call path, short: its innermost frame of the suite's (a timer skipped), its innermost frame of any other
    package's, and its innermost frame, each once."""
    labels = [f for f in (data["frames"][i] for i in path) if f not in TRANSPARENT]
    suite = [f for f in labels if f.startswith("suite/")]
    other = [f for f in labels if _is_code(f) and not f.startswith("suite/")]
    picked = [f for f in (suite[-1] if suite else None, other[-1] if other else None, labels[-1] if labels else None)
              if f]
    return " > ".join(dict.fromkeys(picked)) or "?"


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


def top(data: dict, n: int = 12) -> list[tuple[str, float]]:
    """The ``n`` call paths (``_short`` of whole stacks) that took the most wall time, with their seconds."""
    totals: Counter = Counter()
    for a, b, sid in weighted(data):
        totals[sid] += b - a
    named: Counter = Counter()
    for sid, sec in totals.items():
        named[_short(data, data["stacks"][sid])] += sec
    return named.most_common(n)


def report(data: dict, window_s: float | None = None, n: int = 12) -> str:
    """The text a stage's log ends with: the timeline and the call paths that took the most time."""
    samples = data["samples"]
    total = samples[-1][0] if samples else 0.0
    clock = lambda s: time.strftime("%H:%M:%S", time.localtime(data["started_unix"] + s))  # noqa: E731
    lines = [f"where the stage's main thread was (pid {data['pid']}; {len(samples)} samples, one every "
             f"{data['interval_s']} s, over {total:.1f} s; each row: from, seconds in, for how long, what it did "
             "for most of that time and that share):"]
    for w in timeline(data, window_s):
        lines.append(f"  {clock(w.start_s)} {w.start_s:7.1f} {w.seconds:7.1f} s  {w.path}  ({w.share:.0%})")
    lines.append("the call paths that took the most time (innermost frame of the suite > of a package > of all):")
    lines += [f"  {sec:7.1f} s  {path}" for path, sec in top(data, n)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m suite.stages.stacks",
                                 description="Print where a stage process's main thread spent its time, from the "
                                 "stacks.json beside its result.json.")
    ap.add_argument("file", type=Path)
    ap.add_argument("--window", type=float, default=None,
                    help="seconds a row covers (default: about 40 rows over the whole)")
    ap.add_argument("--top", type=int, default=20, help="rows of the most-time table (default 20)")
    args = ap.parse_args(argv)
    try:
        data = json.loads(args.file.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return 2
    print(report(data, window_s=args.window, n=args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
