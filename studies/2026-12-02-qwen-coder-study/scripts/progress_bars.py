"""Where a stage log's time went, by tqdm progress bar: the seconds each kind of bar ran, summed over its instances.

    python3 studies/2026-12-02-qwen-coder-study/scripts/progress_bars.py variants/bf16/evaluate.log [more.log ...]

A bar instance ends where the next bar starts (or its count goes back); its time is the elapsed time of its last
line ([mm:ss<...]). Bars without a description are lm-eval's request building ("Building contexts" per task; lm-eval
0.4.13 prints no description there). Only what drew a bar is counted: imports, engine start, scoring and file writes
are not. Used for docs/results/h200-eval1-20261204/README.md.
"""

from __future__ import annotations

import collections
import re
import sys

BAR = re.compile(r"^(.*?)(\d+)%\|.*?\| *(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<")


def bars(text: str) -> dict[str, list]:
    """{description: [instances, seconds, items]} from a log's text (carriage returns read as line ends)."""
    sums: dict[str, list] = collections.defaultdict(lambda: [0, 0, 0])
    prev = None  # ((description, total), done, seconds) of the bar line before

    def close(p):
        (desc, total), _, sec = p
        sums[desc][0] += 1
        sums[desc][1] += sec
        sums[desc][2] += total

    for line in text.replace("\r", "\n").split("\n"):
        m = BAR.match(line)
        if not m:
            continue
        key = (m.group(1).strip().rstrip(":"), int(m.group(4)))
        done = int(m.group(3))
        sec = int(m.group(5) or 0) * 3600 + int(m.group(6)) * 60 + int(m.group(7))
        if prev and (prev[0] != key or done < prev[1]):
            close(prev)
        prev = (key, done, sec)
    if prev:
        close(prev)
    return sums


def main(paths: list[str]) -> None:
    for path in paths:
        print(f"== {path}")
        with open(path, errors="replace") as fh:
            for desc, (n, sec, items) in sorted(bars(fh.read()).items(), key=lambda kv: -kv[1][1]):
                print(f"{sec:7d} s  {n:4d} bars {items:7d} items  {desc[:70] or '(no description)'}")


if __name__ == "__main__":
    main(sys.argv[1:])
