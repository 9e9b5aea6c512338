"""Tamper detection on the records a verdict is derived from: every per-item records file (``samples_<task>.jsonl``)
must have the sha256 its evaluate result recorded (``samples_sha256``), and each evaluate result's score (value and
item count) must be what its per-item records give. The summary the gate judges is derived from these same records
(``suite.analysis.derive.summarize``), so its figures are not compared with them again.

Where no per-item records exist for a judged accuracy task (an older run, a stand-in stage), the rule is:
- a run that recorded per-item hashes (``samples_sha256`` in any variant's evaluate result): every accuracy check on
  that task is **inconclusive** ("no per-item records: the figures cannot be recomputed"), a fail stays a fail;
- a run made before the field existed (no ``samples_sha256`` anywhere): judged on its aggregates, as before.

What it cannot see: records and stage results edited together (hash included) by someone who can write the run
folder; the HMAC manifest (``suite gate --verify``, ``suite.outputs.manifest``) covers that."""

from __future__ import annotations

import math
from pathlib import Path

from suite.runtime import safeio
from suite.analysis import paired as pairing
from suite.records import bench_argv
from suite.records.evaluate import EvaluateResult

FIX_FILES = "rerun the evaluation (`suite run --resume --force`); per-item records are written by the evaluate stage"
NO_RECORDS = "no per-item records: the figures cannot be recomputed"


def sha256_file(path: str | Path) -> str:
    return safeio.sha256(path, "samples")


def _close(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-6,
                                                                                         abs_tol=1e-9)


def _files_ok(v, bad, served_check: bool = False) -> bool:
    """The per-item records of ``v``'s evaluation (its evaluate result, or its served check's) are there with the
    sha256 recorded."""
    ok, ev = True, v.check_result(EvaluateResult) if served_check else v.result(EvaluateResult)
    for task, f in ev.samples_files.items():
        where = (f"{v.name}: served_check.samples_files.{task}" if served_check else
                 f"{v.name}: evaluate.samples_files.{task}")
        if not Path(f).is_file():
            bad(where, f"per-item records {f} not found: the gate cannot recompute {task}", FIX_FILES)
            ok = False
            continue
        want = ev.samples_sha256.get(task)
        if want is not None and (got := sha256_file(f)) != want:
            bad(where, f"{f} was changed after the evaluation: sha256 {got} but the evaluate result recorded {want}",
                FIX_FILES)
            ok = False
    return ok


def _scores(v, bad) -> None:
    """Each score of ``v``'s evaluate result against what its per-item records give (its mean and item count)."""
    ev = v.result(EvaluateResult)
    for sc in ev.scores:
        f = ev.samples_files.get(sc.task)
        if not f or pairing.is_perplexity_metric(sc.metric):
            continue
        got = pairing.item_scores(f, sc.metric)
        mean = sum(got.values()) / len(got) if got else math.nan
        for fld, rec, new in (("value", sc.value, mean), ("n", sc.n, len(got))):
            if rec is not None and not _close(rec, new):
                bad(f"{v.name}: evaluate.scores.{sc.task}.{fld}", f"recorded {rec}, recomputed {new} from its per-item "
                    f"records {f}", FIX_FILES)


def _evaluate_config(folder: Path, name: str) -> dict | None:
    """Variant ``name``'s evaluate stage config as the run wrote it, without where it writes (None: not there)."""
    try:
        data = safeio.read_json(folder / "variants" / name / "evaluate.config.json", "record")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    data.pop("output_dir", None)
    return data


def records(s, folder: Path, bad) -> bool:
    """The run's records before any figure is read: each load point ran the command its config asks for
    (``bench_argv``); True when any evaluate result has ``samples_sha256`` (a run made since the field existed).
    Such a run must have a hash for every samples file, and no two variants may share a samples file (the same path,
    or the same sha256) unless their evaluate stage configs (variants/<v>/evaluate.config.json, but for where each
    writes) are the same: two variants whose evaluations are configured alike are one evaluation, reused by content
    from the evaluation cache (a BF16 rerun beside the baseline), and so share its records honestly."""
    bench_argv.check_run_folder(folder, s.variants, bad)
    new = any(ev is not None and ev.samples_sha256 for ev in (v.result(EvaluateResult) for v in s.variants))
    seen: dict[str, tuple[str, dict | None]] = {}  # path or sha256 -> (who named it first, its evaluate config)
    for v in s.variants if new else ():
        ev = v.result(EvaluateResult)
        for task, f in sorted((ev.samples_files if ev is not None else {}).items()):
            sha = ev.samples_sha256.get(task)
            if not sha:
                bad(f"{v.name}: evaluate.samples_sha256.{task}", f"no sha256 recorded for its per-item records {f}, "
                    "though the run records them: the file cannot be checked", FIX_FILES)
            mine = _evaluate_config(folder, v.name)
            for key, what in ((str(Path(f).resolve()) if f else f, "the same file"), (sha, "the same sha256")):
                if not key:
                    continue
                other, theirs = seen.setdefault(f"{what}:{key}", (v.name, mine))
                if other != v.name and not (mine is not None and theirs == mine):
                    bad(f"{v.name}: evaluate.samples_files.{task}", f"{what} as {other}'s per-item records ({f}): "
                        "each variant is scored on its own records", FIX_FILES)
    return new


def unrecomputable(v, base, tasks: list[str]) -> set[str]:
    """The tasks among ``tasks`` that ``v`` or the baseline has no per-item records for."""
    return {t for t in tasks for w in (v, base)
            if (ev := w.result(EvaluateResult)) is None or not ev.samples_files.get(t)}


def verify(s, base, bad) -> None:
    """Every variant's per-item records (hash) and its evaluate scores against them (see the module docstring)."""
    if base.result(EvaluateResult) is None or not _files_ok(base, bad):
        return
    for v in s.variants:
        if v.check_result(EvaluateResult) is not None:  # what the served check compared, its records as written
            _files_ok(v, bad, served_check=True)
        if v.result(EvaluateResult) is None or (v is not base and not _files_ok(v, bad)):
            continue
        _scores(v, bad)
