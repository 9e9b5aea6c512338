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

import math
from pathlib import Path

from suite.runtime import safeio
from suite.analysis import paired as pairing
from suite.analysis import perplexity
from suite.analysis.gates import provenance
from suite.analysis.gates.base import FIX_SUMMARY
from suite.analysis.summary import metric_name
from suite.records import bench_argv, migrate
from suite.records.benchmark import BenchmarkResult
from suite.records.paths import recorded_run_dir, resolved_names
from suite.records.evaluate import EvaluateResult

FIX_FILES = "rerun the evaluation (`suite run --resume --force`); per-item records are written by the evaluate stage"


def sha256_file(path: str | Path) -> str:
    return safeio.sha256(path, "samples")


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
    recorded = {rec.get("task") for rec in v.paired if isinstance(rec, dict)}
    for sc in v.evaluate.scores:  # a paired record dropped from the summary is recomputed, not skipped
        b, w = items.get((base.name, sc.task)), items.get((v.name, sc.task))
        if sc.task in recorded or b is None or w is None:
            continue
        c = pairing.compare(sc.task, sc.metric, b, w, seed=seed)
        key = metric_name("acc", sc.task)
        v.metrics[f"{key}.items_paired"] = float(c.n)
        if c.n < 2:
            continue
        v.paired.append(c.as_dict())
        v.metrics.update({f"{key}.delta_ci_low": c.ci_low, f"{key}.delta_ci_high": c.ci_high,
                          f"{key}.items_gained": float(c.gained), f"{key}.items_lost": float(c.lost)})
        recorded.add(sc.task)
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
    count = provenance.counter(s, base, bad)  # the tokenizer the run kept, never one the summary points at
    if count is None:
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
            data = safeio.read_json(path, "record")
        except (OSError, ValueError) as e:
            return path, {"__unreadable__": f"{type(e).__name__}: {e}"}
        try:  # an older version upgraded, its file names resolved against the run folder (suite.records.paths)
            data = migrate.upgrade(data, recorded_run_dir(folder)) if isinstance(data, dict) else data
        except ValueError as e:
            return path, {"__unreadable__": f"{type(e).__name__}: {e}"}
        data = data.get(key) if key and isinstance(data, dict) else data
        if isinstance(data, dict):
            return path, resolved_names(data, folder)
    return None, None


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


def _same_records(staged: dict, evaluate, task: str) -> bool:
    """Whether the stage result and the summary record one sha256 for ``task``'s per-item file: the summary may name
    the evaluation cache's copy (eval-cache/<key>/) of the file the stage wrote in the run folder; the copy's content
    is then checked against that hash like any samples file."""
    sha = (staged.get("samples_sha256") or {}).get(task)
    return bool(sha) and sha == (evaluate.samples_sha256 or {}).get(task)


def stage_records(s, folder: Path, bad) -> bool:
    """Each variant's summary evaluate must name the samples files and hashes its own stage result names; True when
    any record of the run (summary or stage result) has ``samples_sha256`` (a run made since the field existed).
    Such a run must also have every evaluated variant's stage result and a hash for every samples file, and no two
    variants may share a samples file (the same path, or the same sha256) unless their evaluate stage configs
    (variants/<v>/evaluate.config.json, but for where each writes) are the same: two variants whose evaluations are
    configured alike are one evaluation, reused by content from the evaluation cache (a BF16 rerun beside the
    baseline), and so share its records honestly."""
    bench_argv.check_run_folder(folder, s.variants, bad)  # each load point ran the command its config asks for
    found = {v.name: stage_result(folder, v.name) for v in s.variants}
    new = any(v.evaluate is not None and v.evaluate.samples_sha256 for v in s.variants) or any(
        isinstance(res, dict) and res.get("samples_sha256") for _, res in found.values())
    seen_path: dict[str, tuple[str, dict | None]] = {}  # path or sha256 -> (who named it first, its evaluate config)
    seen_sha: dict[str, tuple[str, dict | None]] = {}
    for v in s.variants:
        path, res = found[v.name]
        if new and v.evaluate is not None:
            for task, f in sorted(v.evaluate.samples_files.items()):
                sha = v.evaluate.samples_sha256.get(task)
                if not sha:
                    bad(f"{v.name}: evaluate.samples_sha256.{task}", f"no sha256 recorded for its per-item records {f}"
                        ", though the run records them: the file cannot be checked", FIX_FILES)
                where = f"{v.name} ({task})"
                real = str(Path(f).resolve()) if f else f
                for key, seen, what in ((real, seen_path, "the same file"), (sha, seen_sha, "the same sha256")):
                    if not key:
                        continue
                    mine = _evaluate_config(folder, v.name)
                    other, theirs = seen.setdefault(key, (where, mine))
                    same_evaluation = mine is not None and theirs == mine
                    if other.split(" (")[0] != v.name and not same_evaluation:
                        bad(f"{v.name}: evaluate.samples_files.{task}", f"{what} as {other}'s per-item records ({f}): "
                            "each variant is scored on its own records", FIX_FILES)
            if res is None:
                bad(f"{v.name}: variants/{v.name}/evaluate.result.json", "the evaluate stage's result is missing, though "
                    "the run records per-item hashes: the summary's samples files cannot be checked against it",
                    FIX_FILES)
                continue
        if res is None:
            continue
        if "__unreadable__" in res:
            bad(f"{v.name}: {path}", f"the evaluate stage's result cannot be read ({res['__unreadable__']})", FIX_FILES)
            continue
        for fld in ("samples_files", "samples_sha256"):
            staged = res.get(fld) or {}
            have = getattr(v.evaluate, fld, None) or {} if v.evaluate is not None else {}
            for task in sorted(set(staged) | set(have)):
                if fld == "samples_files" and task in staged and task in have and _same_records(res, v.evaluate, task):
                    continue  # the evaluation cache's copy of the stage's file: the same recorded sha256
                if staged.get(task) != have.get(task):
                    said = "lacks it" if task not in have else f"says {have.get(task)}"
                    bad(f"{v.name}: evaluate.{fld}.{task}", f"the stage result {path} names {staged.get(task)} but the "
                        f"summary {said}: the per-item records the gate recomputes from must be the stage's",
                        FIX_FILES)
    return new


def unrecomputable(v, base, tasks: list[str]) -> set[str]:
    """The tasks among ``tasks`` that ``v`` or the baseline has no per-item records for."""
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


# the serving figures the gates judge that ``suite.analysis.tput_spread`` derives from a load point's repetitions
_POINT_KEYS = ("output_tok_s", "ttft_p99_ms", "tpot_p99_ms", "goodput_req_s")
_RATIOS = ("tput.output_tok_s.ratio", "tput.output_tok_s.ratio_equal_rate", "tput.goodput_req_s.ratio")
SPREAD_KEYS = {"tput.stable", *(f"tput.{k}.{e}" for k in _POINT_KEYS for e in ("ci_low", "ci_high")),
               *(f"{r}.{e}" for r in _RATIOS for e in ("ci_low", "ci_high"))}


def spread_expected(v, base, headline: str) -> dict[str, float]:
    """tput.stable and the throughput/latency intervals of ``v``, recomputed from its headline point's recorded
    repetitions (``suite.runtime.spread``, as ``suite.analysis.tput_spread`` derives them; never the point's own
    recorded interval fields); one repetition: no interval, no stability."""
    from suite.analysis.summary import headline_point
    from suite.runtime import spread

    out: dict[str, float] = {}
    p = headline_point(v.benchmark, headline) if v.benchmark is not None else None
    if p is None:
        return out
    up = spread.point_update(p)
    if up["stable"] is not None:
        out["tput.stable"] = float(up["stable"])
    for k in _POINT_KEYS:
        if up[f"{k}_ci_low"] is not None:
            out[f"tput.{k}.ci_low"], out[f"tput.{k}.ci_high"] = up[f"{k}_ci_low"], up[f"{k}_ci_high"]
    pb = headline_point(base.benchmark, headline) if v is not base and base.benchmark is not None else None
    if pb is not None and p.goodput_req_s is not None and pb.goodput_req_s:  # as tput_spread.add_goodput_ratio
        low, high, _ = spread.ratio_interval(*(spread.rep_values(q, "goodput_req_s") for q in (p, pb)))
        if low is not None:
            out["tput.goodput_req_s.ratio.ci_low"], out["tput.goodput_req_s.ratio.ci_high"] = low, high
    if pb is None or not pb.output_tok_s:
        return out
    low, high, _ = spread.ratio_interval(spread.rep_values(p), spread.rep_values(pb))
    if low is not None:
        out["tput.output_tok_s.ratio.ci_low"], out["tput.output_tok_s.ratio.ci_high"] = low, high
    same = next((q for q in base.benchmark.points if q.ok and q.label == p.label and q.workload == p.workload), None)
    if same is not None and same.output_tok_s:
        low, high, _ = spread.ratio_interval(spread.rep_values(p), spread.rep_values(same))
        if low is not None:
            out["tput.output_tok_s.ratio_equal_rate.ci_low"] = low
            out["tput.output_tok_s.ratio_equal_rate.ci_high"] = high
    return out


def serving(s, base, headline: str, strict: bool, bad) -> None:
    """Every variant's tput.stable and throughput/latency intervals must be what its recorded repetitions give
    (``spread_expected``): a figure added, changed or removed in the summary is bad input naming it. ``strict``
    (a run made since per-item hashes were recorded): always; otherwise only for a variant whose headline point
    recorded repetition rows (an older run, or a hand-made summary, keeps its recorded figures)."""
    from suite.analysis.summary import headline_point

    for v in s.variants:
        p = headline_point(v.benchmark, headline) if v.benchmark is not None else None
        pb = headline_point(base.benchmark, headline) if base.benchmark is not None else None
        if not strict and not (p is not None and p.repetitions and (v is base or (pb is not None and pb.repetitions))):
            continue
        want = spread_expected(v, base, headline)
        have = {k: val for k, val in v.metrics.items() if k in SPREAD_KEYS}
        for k in sorted(set(want) | set(have)):
            if not _close(have.get(k), want.get(k)):
                got = "no figure (one repetition, or none recorded)" if k not in want else f"{want[k]:.6g}"
                bad(f"{v.name}: {k}", f"recorded {have.get(k, 'nothing')}, but its benchmark record's repetitions "
                    f"give {got}", FIX_SUMMARY)


def engine_checks(s, recipe, bad) -> None:
    """With ``eval.engine_check`` in the recipe: the baseline must have its engine-check evaluations, and every
    variant's acc.<task>.engine_spread (flip rate, items, configurations) must be what they give
    (``suite.analysis.engine_spread``); a figure added, changed or removed in the summary is bad input."""
    from suite.analysis import engine_spread

    if recipe is None or not recipe.eval.engine_check_configs():
        return
    keys = ("engine_spread", "flip_rate", "engine_items", "engine_configs")
    for v in s.variants:
        if v.errors:
            continue
        if not v.engine_checks:
            if v.is_baseline:
                bad(f"{v.name}: engine_checks", "the recipe asks for engine checks (eval.engine_check) but the summary "
                    "has none for the baseline", FIX_SUMMARY)
            have = sorted(k for k in v.metrics if k.startswith("acc.") and k.rsplit(".", 1)[-1] in keys)
            if have:
                bad(f"{v.name}: {have[0]}", "an engine-spread figure without the engine-check evaluations it comes "
                    "from", FIX_SUMMARY)
            continue
        if v.evaluate is None:
            continue
        want = engine_spread.spread_metrics(engine_spread.engine_spreads({"as run": v.evaluate, **v.engine_checks}),
                                            metric_name)
        have = {k: val for k, val in v.metrics.items() if k.startswith("acc.") and k.rsplit(".", 1)[-1] in keys}
        for k in sorted(set(want) | set(have)):
            a, b = have.get(k), want.get(k)
            if not (_close(a, b) or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)):
                bad(f"{v.name}: {k}", f"recorded {a if k in have else 'nothing'}, recomputed "
                    f"{b if k in want else 'nothing'} from the engine-check evaluations", FIX_SUMMARY)
