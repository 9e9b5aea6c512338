"""Replay the sequential evaluation on recorded per-item scores: would stopping early give the full data's verdict,
and how many items would it save?

    PYTHONPATH=$PWD .venv/bin/python tools/replay_sequential.py [--orders 200] [--looks 4] [--margins 0.01,0.02]
        [--json OUT.json] [SOURCE ...]

A SOURCE is an items.csv.gz (columns task, subtask, doc_id, then one score column per variant, the first the
baseline: studies/2026-11-30-h200-first-sessions/results/*/items.csv.gz) or a folder of run folders whose variants
keep ``evaluate/items.jsonl.gz`` (studies/2026-12-05-verdicts/results: each run's FP8 variants against the baseline its
recipe names). Default: both of the project's. For each FP8 variant x task x margin: the full-data verdict of the
fixed-size gate (suite.analysis.paired.compare: pass when the 95% interval's low >= -m, fail when its high < -m),
then for ``--orders`` seeded random item orders the verdict and items used of suite.runtime.sequential.run.
A source that cannot be read is one line `SOURCE: what is wrong (fix: ...)` and exit 2.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from suite.analysis.paired import compare, item_scores
from suite.runtime import sequential as seq

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "studies/2026-11-30-h200-first-sessions/results/h200-qwen2.5-coder-0.5b/items.csv.gz",
           ROOT / "studies/2026-12-05-verdicts/results")
GSM8K_METRIC = "exact_match,strict-match"  # the verdicts study scored GSM8K only, on this metric
MAX_ROWS = 2_000_000
MAX_FIELD = 1 << 16
MAX_RECIPE_BYTES = 1 << 20


class BadSource(Exception):
    pass


@dataclass
class Pair:
    source: str  # the run or file the two variants come from
    variant: str
    baseline: str
    task: str
    scores: dict  # {item key: (variant score, baseline score)}


@dataclass
class Replay:
    source: str
    variant: str
    task: str
    margin: float
    n: int
    delta: float
    ci_low: float
    ci_high: float
    full: str  # the fixed-size gate's verdict on all items
    orders: int
    stopped: dict  # verdict -> how many orders gave it
    agree: int  # orders whose stopped verdict is the full one
    used_mean: float  # share of the items used, mean over the orders
    used_min: float
    used_max: float


def csv_pairs(path: Path) -> list[Pair]:
    """One Pair per (variant column after the first, task) of an items.csv.gz."""
    csv.field_size_limit(MAX_FIELD)
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            rows = csv.reader(fh)
            head = next(rows)
            if head[:3] != ["task", "subtask", "doc_id"] or len(head) < 5:
                raise BadSource("the header is not task, subtask, doc_id, baseline, variant...")
            table: dict[str, dict] = {}
            for i, row in enumerate(rows):
                if i >= MAX_ROWS:
                    raise BadSource(f"more than {MAX_ROWS:,} rows")
                table.setdefault(row[0], {})[(row[1], int(row[2]))] = [float(x) for x in row[3:]]
    except (OSError, EOFError, ValueError, IndexError, StopIteration, csv.Error) as e:
        raise BadSource(f"not an items table ({type(e).__name__}: {e})") from e
    base = head[3]
    return [Pair(path.parent.name, v, base, task, {k: (s[j], s[0]) for k, s in items.items()})
            for j, v in enumerate(head[4:], start=1) for task, items in sorted(table.items())]


def recipe_baseline(run: Path) -> str:
    text = (run / "recipe.yaml").read_bytes()[:MAX_RECIPE_BYTES]
    name = (yaml.safe_load(text) or {}).get("baseline", {}).get("name")
    if not isinstance(name, str):
        raise BadSource(f"{run / 'recipe.yaml'}: baseline.name missing")
    return name


def run_pairs(results: Path) -> list[Pair]:
    """Each run folder's FP8 variants (names starting fp8) against its recipe's baseline, on GSM8K."""
    pairs = []
    for run in sorted(p for p in results.glob("runs-*/2*") if (p / "recipe.yaml").is_file()):
        base = recipe_baseline(run)
        items = {v.name: v / "evaluate" / "items.jsonl.gz" for v in sorted((run / "variants").iterdir())}
        if not items.get(base, Path()).is_file():
            continue  # a serving-only run: no per-item records
        b = item_scores(items[base], GSM8K_METRIC)
        for v, f in items.items():
            if v.startswith("fp8") and f.is_file():
                s = item_scores(f, GSM8K_METRIC)
                tasks = sorted({k[0] for k in s})
                for task in tasks:
                    both = {k: (s[k], b[k]) for k in s.keys() & b.keys() if k[0] == task}
                    pairs.append(Pair(run.name, v, base, task, both))
    return pairs


def fixed_verdict(pair: Pair, margins) -> tuple:
    """The paired comparison on all items and the fixed-size gate's verdict at each margin."""
    var = {k: a for k, (a, _) in pair.scores.items()}
    base = {k: b for k, (_, b) in pair.scores.items()}
    c = compare(pair.task, "score", base, var)
    return c, {m: seq.PASS if c.ci_low >= -m else seq.FAIL if c.ci_high < -m else seq.INCONCLUSIVE for m in margins}


def replay(pair: Pair, margins, orders: int, looks: int) -> list[Replay]:
    """Each margin's replay over ``orders`` seeded orders. A task not stopped before its last look is judged, as
    `suite gate` judges it, by the fixed-size interval on all its items."""
    c, full = fixed_verdict(pair, margins)
    keys = sorted(pair.scores)
    d = np.array([pair.scores[k][0] - pair.scores[k][1] for k in keys])
    n = len(keys)
    out = []
    for m in margins:
        stopped: dict[str, int] = {}
        used = []
        for seed in range(orders):
            r = seq.run(d[seq.order_index(n, seed)], m, looks)
            verdict = r.decision if r.items_used < n else full[m]
            stopped[verdict] = stopped.get(verdict, 0) + 1
            used.append(r.items_used / n)
        out.append(Replay(pair.source, pair.variant, pair.task, m, n, c.delta, c.ci_low, c.ci_high, full[m],
                          orders, stopped, stopped.get(full[m], 0), float(np.mean(used)), float(min(used)),
                          float(max(used))))
    return out


def table(rows: list[Replay]) -> str:
    out = ["| source | variant | task | margin | items | full-data delta [95% CI] | full verdict | stopped verdicts "
           "(orders) | agree | items used: mean (min-max) | items saved (mean) |", "|" + "---|" * 11]
    for r in rows:
        got = ", ".join(f"{k} {v}" for k, v in sorted(r.stopped.items()))
        out.append(f"| {r.source} | {r.variant} | {r.task} | {r.margin:g} | {r.n:,} | {r.delta:+.4f} "
                   f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] | {r.full} | {got} | {r.agree}/{r.orders} | "
                   f"{r.used_mean:.0%} ({r.used_min:.0%}-{r.used_max:.0%}) | "
                   f"{round((1 - r.used_mean) * r.n):,} |")
    return "\n".join(out)


def pairs_of(source: Path) -> list[Pair]:
    if source.is_dir():
        return run_pairs(source)
    if source.is_file():
        return csv_pairs(source)
    raise BadSource("no such file or folder")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", type=Path, default=list(SOURCES))
    ap.add_argument("--orders", type=int, default=200, help="random item orders per variant x task")
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--margins", default="0.01,0.02", help="comma-separated non-inferiority margins")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    a = ap.parse_args(argv)
    margins = [float(m) for m in a.margins.split(",")]
    rows = []
    for src in a.sources:
        try:
            pairs = pairs_of(src)
        except (BadSource, ValueError, OSError, yaml.YAMLError, AttributeError) as e:
            print(f"{src}: {e} (fix: give an items.csv.gz or a folder of run folders with items.jsonl.gz)",
                  file=sys.stderr)
            return 2
        rows += [r for p in pairs for r in replay(p, margins, a.orders, a.looks)]
    print(table(rows))
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
