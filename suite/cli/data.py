"""`suite data`: task data checks and preparation (tools.data)."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK


def _tools_data():
    """The checkout's tools.data: tools/ is not in the wheel (nor in an editable install's import map), so a
    checkout's root goes on sys.path for it; an installed wheel has no tools at all."""
    try:
        from tools import data
    except ImportError:
        root = Path(__file__).resolve().parents[2]
        if not (root / "tools" / "data.py").is_file():
            return None
        sys.path.insert(0, str(root))
        from tools import data
    return data


def cmd_data(args) -> int:
    data = _tools_data()
    if data is None:
        print("error: `suite data` needs a checkout of the suite (tools/ is not part of the installed package)",
              file=sys.stderr)
        return EXIT_BAD_INPUT

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
