"""A run's summary.json read for a command: a SuiteError naming the file when it is not one.

Where the run is in MLflow lives beside it, in tracking.json (``write_tracking``: ``tracking``, ``tracking_pending``
and ``stage_wall_s["track"]``, written by the MLflow sink and `suite sync`, so that summary.json is written once per
publish); ``load_summary`` lays it over summary.json's fields of the same names. A run folder from before
tracking.json has them in summary.json, read as they are."""

from __future__ import annotations

import json
from pathlib import Path

from suite.records import migrate
from suite.records.paths import ROOT, recorded_run_dir
from suite.records.summary import RunSummary
from suite.runtime import atomic, safeio
from suite.runtime.errors import Problem, SuiteError

TRACKING_FILE = "tracking.json"


def write_tracking(summary, run_dir: Path) -> Path:
    """tracking.json in ``run_dir``: the summary's MLflow state (where it is logged, or why not yet) and how long
    logging took, written whole and renamed into place."""
    data = {migrate.VERSION_FIELD: migrate.SCHEMA_VERSION,
            "tracking": summary.tracking.model_dump(mode="json") if summary.tracking else None,
            "tracking_pending": summary.tracking_pending}
    if "track" in summary.stage_wall_s:
        data["stage_wall_s"] = {"track": summary.stage_wall_s["track"]}
    return atomic.write(Path(run_dir) / TRACKING_FILE, json.dumps(data, indent=2))


def _with_tracking(data: dict, path: Path) -> dict:
    """summary.json's fields with tracking.json (beside it) laid over them."""
    if not path.is_file():
        return data
    try:
        tracked = safeio.read_json(path, "record")
    except (OSError, ValueError) as e:
        raise SuiteError(Problem(str(path), "", f"not readable JSON: {e}",
                                 "delete it and run `suite sync` on the run folder to write it again")) from None
    if not isinstance(tracked, dict):
        raise SuiteError(Problem(str(path), "", "a JSON object expected", "delete it and run `suite sync` again"))
    merged = {**data, **{k: tracked.get(k) for k in ("tracking", "tracking_pending")}}
    if isinstance(tracked.get("stage_wall_s"), dict) and "track" in tracked["stage_wall_s"]:
        merged["stage_wall_s"] = {**(data.get("stage_wall_s") or {}), "track": tracked["stage_wall_s"]["track"]}
    return merged


def with_tracking(summary, run_dir: Path):
    """``summary`` (a RunSummary, unchanged) with the tracking state of ``run_dir``'s tracking.json laid over it."""
    return type(summary).model_validate(_with_tracking(summary.model_dump(mode="json"), Path(run_dir) / TRACKING_FILE))


def load_summary(path: str):
    from pydantic import ValidationError

    p = Path(path)
    p = p / "summary.json" if p.is_dir() else p
    if not p.is_file():
        raise SuiteError(Problem(str(p), "", "no summary.json here", "give a run folder made by `suite run`"))
    fix = "give the summary.json that `suite run` wrote (rerun or `--resume` the run to write it again)"
    try:
        text = safeio.read_bytes(p, "record").decode("utf-8")
    except OSError as e:
        raise SuiteError(Problem(str(p), "", f"cannot read it: {e.strerror or e}", "check its permissions")) from None
    except UnicodeDecodeError as e:
        raise SuiteError(Problem(str(p), "", f"not UTF-8 text (byte {e.start})", fix)) from None

    def unique(pairs):
        keys = [k for k, _ in pairs]
        if dupes := sorted({k for k in keys if keys.count(k) > 1}):
            raise ValueError(f"duplicate key {dupes[0]!r} (JSON readers keep one of them silently)")
        return dict(pairs)

    try:
        data = safeio.loads_json(text, p, "record", object_pairs_hook=unique)
    except json.JSONDecodeError as e:
        raise SuiteError(Problem(str(p), f"line {e.lineno} column {e.colno}", f"not JSON: {e.msg}", fix)) from None
    except (ValueError, RecursionError) as e:
        raise SuiteError(Problem(str(p), "", f"not a suite summary: {e}", fix)) from None
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(p), "", f"not a suite summary: a JSON object expected, not {type(data).__name__}",
                                 fix))
    for i, v in enumerate(data.get("variants") if isinstance(data.get("variants"), list) else []):
        metrics = v.get("metrics") if isinstance(v, dict) else None
        for key, value in (metrics.items() if isinstance(metrics, dict) else []):
            if isinstance(value, bool) or not isinstance(value, (int, float)):  # pydantic would read "1.5", true
                raise SuiteError(Problem(str(p), f"variants[{i}].metrics.{key}", f"{value!r} is not a number", fix))
    data = _with_tracking(data, p.parent / TRACKING_FILE)
    run_dir = p.parent
    try:
        data = migrate.upgrade(data, recorded_run_dir(run_dir))  # an older summary.json, as this version writes it
        summary = RunSummary.model_validate_json(json.dumps(data), context={ROOT: run_dir})  # names resolved here
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SuiteError(Problem(str(p), where, f"not a suite summary: {first['msg']}", fix)) from None
    except ValueError as e:  # a schema version newer than this suite's
        raise SuiteError(Problem(str(p), migrate.VERSION_FIELD, str(e), "read it with the suite that wrote it")) from None
    return summary.model_copy(update={"run_dir": str(run_dir.absolute())})  # where the folder is now, not was
