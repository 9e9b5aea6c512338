"""A run's summary.json read for a command: a SuiteError naming the file when it is not one."""

from __future__ import annotations

import json
from pathlib import Path

from suite.runtime.errors import Problem, SuiteError


def load_summary(path: str):
    from suite.records.summary import RunSummary

    from pydantic import ValidationError

    p = Path(path)
    p = p / "summary.json" if p.is_dir() else p
    if not p.is_file():
        raise SuiteError(Problem(str(p), "", "no summary.json here", "give a run folder made by `suite run`"))
    fix = "give the summary.json that `suite run` wrote (rerun or `--resume` the run to write it again)"
    try:
        text = p.read_bytes().decode("utf-8")
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
        data = json.loads(text, object_pairs_hook=unique)
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
    try:
        return RunSummary.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SuiteError(Problem(str(p), where, f"not a suite summary: {first['msg']}", fix)) from None
