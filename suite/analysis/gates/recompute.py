"""The gate recomputes what it judges: every accuracy, paired delta, interval, McNemar count (gained/lost) and
perplexity figure is derived again from the per-item records the evaluate stage wrote (``samples_<task>.jsonl``),
after checking each file's sha256 against the one its evaluate result recorded (``samples_sha256``). A figure of the
summary that disagrees with the recomputation is bad input naming the variant, task, field, recorded and recomputed
values.

The summary is not the only witness: each variant's own stage result in the run folder (``variants/<v>/evaluate.result.json``,
the file the evaluate stage wrote, or the ``evaluate`` of ``benchmark.result.json`` for a served evaluation) must name the
same samples files and ``samples_sha256`` as the summary. A summary that lacks or differs from them (``samples_files``
deleted from summary.json to skip the recompute) is bad input naming the variant and the file.

Where no per-item records exist for a judged accuracy task (an older run, a stand-in stage), the rule is:
- a run that recorded per-item hashes (``samples_sha256`` in any variant's evaluate result, in the summary or in the
  stage result files): every accuracy check on that task is **inconclusive** ("no per-item records: the figures cannot
  be recomputed"), a fail stays a fail;
- a run made before the field existed (no ``samples_sha256`` anywhere): judged on its aggregates, checked against each
  other, as before.

What it cannot see: records, stage results and summary edited together (hash included) by someone who can write the run
folder; the HMAC manifest (``suite gate --verify``, ``suite.outputs.manifest``) covers that."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from suite.analysis import paired as pairing
from suite.analysis import perplexity
from suite.analysis.gates.base import FIX_SUMMARY
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult

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


NO_RECORDS = "no per-item records: the figures cannot be recomputed"


def stage_result(folder: Path, name: str) -> tuple[Path | None, dict | None]:
    """The evaluate result variant ``name``'s stage wrote in run folder ``folder`` (path, parsed), or (None, None)."""
    vdir = folder / "variants" / name
    ev, bench = EvaluateResult.__name__.removesuffix("Result").lower(), BenchmarkResult.__name__.removesuffix("Result").lower()
    for path, key in ((vdir / f"{ev}.result.json", None), (vdir / f"{bench}.result.json", ev)):
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            return path, {"__unreadable__": f"{type(e).__name__}: {e}"}
        data = data.get(key) if key and isinstance(data, dict) else data
        if isinstance(data, dict):
            return path, data
    return None, None


def stage_records(s, folder: Path, bad) -> bool:
    """Each variant's summary evaluate must name the samples files and hashes its own stage result names; True when
    any record of the run (summary or stage result) has ``samples_sha256`` (a run made since the field existed)."""
    new = False
    for v in s.variants:
        path, res = stage_result(folder, v.name)
        if v.evaluate is not None and v.evaluate.samples_sha256:
            new = True
        if res is None:
            continue
        if "__unreadable__" in res:
            bad(f"{v.name}: {path}", f"the evaluate stage's result cannot be read ({res['__unreadable__']})", FIX_FILES)
            continue
        if res.get("samples_sha256"):
            new = True
        for fld in ("samples_files", "samples_sha256"):
            staged = res.get(fld) or {}
            have = getattr(v.evaluate, fld, None) or {} if v.evaluate is not None else {}
            for task in sorted(set(staged) | set(have)):
                if staged.get(task) != have.get(task):
                    said = "lacks it" if task not in have else f"says {have.get(task)}"
                    bad(f"{v.name}: evaluate.{fld}.{task}", f"the stage result {path} names {staged.get(task)} but the "
                        f"summary {said}: the per-item records the gate recomputes from must be the stage's",
                        FIX_FILES)
    return new


def unrecomputable(v, base, tasks: list[str]) -> set[str]:
    """The accuracy tasks among ``tasks`` that ``v`` or the baseline has no per-item records for."""
    return {t for t in tasks for w in (v, base)
            if w.evaluate is None or not w.evaluate.samples_files.get(t)}


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
