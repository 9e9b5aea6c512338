"""`suite data`: task data checks and preparation (tools.data)."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK


def cmd_data(args) -> int:
    from tools import data

    root = Path(args.dir)
    res = data.prepare(root) if args.action == "prepare" else data.check(root)
    for name, n in res.rows.items():
        print(f"{name:<16} {n:>6} rows")
    if res.checksums_verified:
        print(f"{res.checksums_verified} files match SHA256SUMS")
    for p in res.problems:
        print(f"error: {p}", file=sys.stderr)
    print(f"{root}: " + ("ok" if res.ok else f"{len(res.problems)} problem(s)"))
    return EXIT_OK if res.ok else EXIT_BAD_INPUT
