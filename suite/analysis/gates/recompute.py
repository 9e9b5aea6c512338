"""The gate recomputes what it judges: every accuracy, paired delta, interval, McNemar count (gained/lost) and
perplexity figure is derived again from the per-item records the evaluate stage wrote (``samples_<task>.jsonl``),
after checking each file's sha256 against the one its evaluate result recorded (``samples_sha256``). A figure of the
summary that disagrees with the recomputation is bad input naming the variant, task, field, recorded and recomputed
values. What it cannot see: records and summary edited together (hash included) by someone who can write the run
folder; the HMAC manifest (``suite gate --verify``) covers that."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from suite.analysis import paired as pairing
from suite.analysis import perplexity
from suite.analysis.gates.base import FIX_SUMMARY

FIX_FILES = "rerun the evaluation (`suite run --resume --force`); per-item records are written by the evaluate stage"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _close(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-6,
                                                                                         abs_tol=1e-9)


def _files_ok(v, bad) -> bool:
    ok = True
    for task, f in v.evaluate.samples_files.items():
        where = f"{v.name}: evaluate.samples_files.{task}"
        if not Path(f).is_file():
            bad(where, f"per-item records {f} not found: the gate cannot recompute {task}", FIX_FILES)
            ok = False
            continue
        want = v.evaluate.samples_sha256.get(task)
        if want is not None and (got := sha256_file(f)) != want:
            bad(where, f"{f} was changed after the evaluation: sha256 {got} but the evaluate result recorded {want}",
                FIX_FILES)
            ok = False
    return ok


def _scores(v, base, seed: int, bad) -> None:
    items = {}
    for who in (base, v):
        for sc in who.evaluate.scores:
            f = who.evaluate.samples_files.get(sc.task)
            if not f or pairing.is_perplexity_metric(sc.metric):
                continue
            got = pairing.item_scores(f, sc.metric)
            items[(who.name, sc.task)] = got
            mean = sum(got.values()) / len(got) if got else math.nan
            for fld, rec, new in (("value", sc.value, mean), ("n", sc.n, len(got))):
                if rec is not None and not _close(rec, new):
                    bad(f"{who.name}: evaluate.scores.{sc.task}.{fld}", f"recorded {rec}, recomputed {new} from "
                        f"its per-item records {f}", FIX_SUMMARY)
            if (m := who.metrics.get(f"acc.{sc.task}")) is not None and not _close(m, mean):
                bad(f"{who.name}: acc.{sc.task}", f"recorded {m}, recomputed {mean} from its per-item records {f}",
                    FIX_SUMMARY)
    if v is base:
        return
    for rec in v.paired:
        task = rec.get("task") if isinstance(rec, dict) else None
        b, w = items.get((base.name, task)), items.get((v.name, task))
        if b is None or w is None:
            continue
        c = pairing.compare(task, rec.get("metric", ""), b, w, seed=seed)
        if seed and not _close(rec.get("ci_low"), c.ci_low):  # a summary made with the functions' default seed 0
            c = pairing.compare(task, rec.get("metric", ""), b, w, seed=0)
        for fld in ("n", "delta", "ci_low", "ci_high", "gained", "lost"):
            if not _close(rec.get(fld), getattr(c, fld)):
                bad(f"{v.name}: paired.{task}.{fld}", f"recorded {rec.get(fld)}, recomputed {getattr(c, fld)} from "
                    "the per-item records", FIX_SUMMARY)
        for key, fld in (("delta_ci_low", "ci_low"), ("delta_ci_high", "ci_high"), ("items_gained", "gained"),
                         ("items_lost", "lost"), ("items_paired", "n")):
            m = v.metrics.get(f"acc.{task}.{key}")
            if m is not None and not _close(m, getattr(c, fld)):
                bad(f"{v.name}: acc.{task}.{key}", f"recorded {m}, recomputed {getattr(c, fld)} from the per-item "
                    "records", FIX_SUMMARY)


def _perplexity(s, v, base, ppl_tasks, seed: int, bad) -> None:
    if not ppl_tasks or v is base or not v.perplexity:
        return
    if not any(base.evaluate.samples_files.get(t) and v.evaluate.samples_files.get(t) for t in ppl_tasks):
        return  # no per-item records on one side: nothing to recompute from (as for accuracy, ``_scores``)
    count = perplexity.token_counter(base.model_path)
    if count is None:
        bad(f"{base.name}: model_path", f"no tokenizer.json at {base.model_path} to recompute the perplexity delta",
            "keep the baseline's model where the run read it")
        return
    found = {c.task: c for c in perplexity.compare_variant(base.evaluate, v.evaluate, count, seed=seed)}
    if seed and any(isinstance(r, dict) and r.get("task") in found and not _close(r.get("ci_low"), found[r["task"]].ci_low)
                    for r in v.perplexity):  # a summary made with the functions' default seed 0
        found = {c.task: c for c in perplexity.compare_variant(base.evaluate, v.evaluate, count, seed=0)}
    for rec in v.perplexity:
        c = found.get(rec.get("task")) if isinstance(rec, dict) else None
        if c is None:
            continue
        for fld in ("n", "delta", "ci_low", "ci_high", "ppl", "baseline_ppl"):
            if not _close(rec.get(fld), getattr(c, fld)):
                bad(f"{v.name}: perplexity.{c.task}.{fld}", f"recorded {rec.get(fld)}, recomputed {getattr(c, fld)} "
                    "from the per-item records", FIX_SUMMARY)


def verify(s, base, ppl_tasks: list[str], bad) -> None:
    """Check every variant's per-item records (hash) and the figures derived from them (see the module docstring)."""
    seed = int(((s.recipe or {}).get("eval") or {}).get("seed", 0) or 0)
    if base.evaluate is None or not _files_ok(base, bad):
        return
    for v in s.variants:
        if v.evaluate is None or (v is not base and not _files_ok(v, bad)):
            continue
        _scores(v, base, seed, bad)
        _perplexity(s, v, base, ppl_tasks, seed, bad)
