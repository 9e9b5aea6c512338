"""`suite compare A B`: two runs, variant by variant."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from suite import api
from suite.analysis import compare
from suite.cli.render import _wide_console
from suite.runtime.errors import EXIT_OK


def cmd_compare(args) -> int:
    from rich.table import Table

    a, b = (api.load_run(r, who="`suite compare`").summary for r in (args.run_a, args.run_b))
    if a.recipe_name != b.recipe_name:
        print(f"note: different recipes ({a.recipe_name} vs {b.recipe_name}); comparing variants by name",
              file=sys.stderr)
    res = compare.run(compare.CompareConfig(a, b, min_tput_change=args.min_tput_change))
    if args.json:
        print(json.dumps(res.as_dict(), indent=2))
        return EXIT_OK
    table = Table(title=f"{Path(a.run_dir).name} → {Path(b.run_dir).name}")
    for col in ("variant", "what", "A", "B", "change", "95% CI", "moved", "how"):
        table.add_column(col, justify="right" if col in ("A", "B", "change", "95% CI") else "left")
    for c in res.changes:
        ci = f"[{c.low:+.4f}, {c.high:+.4f}]" if c.low is not None else "-"
        change = f"{c.delta:+.4f}" if c.what.startswith("acc") else f"{c.delta:+.1%}"
        table.add_row(c.variant, c.what, f"{c.a:.4f}" if c.what.startswith("acc") else f"{c.a:,.1f}",
                      f"{c.b:.4f}" if c.what.startswith("acc") else f"{c.b:,.1f}", change, ci,
                      "[bold red]yes[/]" if c.moved else "no", c.how)
    _wide_console().print(table)
    for k, (va, vb) in res.versions.items():
        print(f"version {k}: {va} → {vb}")
    for name in res.only_in_a + res.only_in_b:
        print(f"variant {name} is in only one of the runs")
    print(f"{len(res.moved)} of {len(res.changes)} figures moved beyond noise")
    return EXIT_OK
