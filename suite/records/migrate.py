"""Schema versions of the record files and the migrations that upgrade an older file as it is read.

Every record file (a stage's config and result, summary.json) carries ``schema_version``; plan.json, jobs.json and
manifest.json carry it too. A reader hands the file's data to ``upgrade``, which applies one migration per version
(``MIGRATIONS[n]`` turns version n into n + 1) and returns the data of the current version without the field; a file
of a later version than this suite knows is refused (ValueError), never guessed at. Each migration is a pure function
of the data and of ``recorded``: the run folder the file was written in (plan.json's and summary.json's ``run_dir``),
which a version-0 file's absolute names are made relative to.

Version 0 (no ``schema_version``): files named by absolute path. Version 1: names relative to the run folder
(``suite.records.paths``); a summary's evaluation names the run folder's copy of its samples files (the evaluation
cache keeps a second copy). Version 2: a summary's variant holds its stage results in ``stages``, by stage name,
where version 1 had one field per built-in stage (so a plug-in stage's result has a place).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Callable

VERSION_FIELD = "schema_version"
SCHEMA_VERSION = 2
FILE_FIELDS = ("results_file", "samples_files", "artifacts")  # the fields of a record that name files (paths.FileName)


def _relative(name: Any, recorded: str | None) -> Any:
    """A version-0 absolute ``name`` under the ``recorded`` run folder, relative to it; anything else as it is."""
    if not isinstance(name, str) or not recorded:
        return name
    path, base = PurePosixPath(name), PurePosixPath(recorded)
    try:
        return path.relative_to(base).as_posix() if path.is_absolute() else name
    except ValueError:
        return name


def _names_relative(data: Any, recorded: str | None) -> Any:
    """Every file name in ``data`` (``FILE_FIELDS``, at any depth; ``samples_files`` and a summary's ``artifacts``
    map names to files) relative to ``recorded`` where it is under it."""
    if isinstance(data, list):
        return [_names_relative(x, recorded) for x in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if key in FILE_FIELDS:  # a name, or a map of names
            out[key] = ({k: _relative(v, recorded) for k, v in value.items()} if isinstance(value, dict)
                        else _relative(value, recorded))
        else:
            out[key] = _names_relative(value, recorded)
    return out


def v0_to_v1(data: dict, recorded: str | None) -> dict:
    """Absolute names under the run folder made relative to it (``recorded``, else a summary's own ``run_dir``).
    Names outside it stay absolute (a version-0 summary named the evaluation cache's copies of its samples files:
    they are read there while they exist; ``suite summarize`` rebuilds the summary from the stage results, which
    name the run folder's own)."""
    recorded = recorded or (data.get("run_dir") if isinstance(data.get("run_dir"), str) else None)
    return _names_relative(data, recorded)


# a version-1 summary's variant fields that held a stage's result: the built-in stages' names as that format fixed them
V1_STAGE_FIELDS = ("quantize", "kvcheck", "evaluate", "benchmark")


def v1_to_v2(data: dict, recorded: str | None) -> dict:
    """A summary's (a record with ``recipe_name`` and a list of ``variants``) per-stage variant fields moved into the
    variant's ``stages`` by stage name (an empty field is left out); any other record as it is."""
    if "recipe_name" not in data or not isinstance(data.get("variants"), list):
        return data
    variants = []
    for v in data["variants"]:
        if isinstance(v, dict):
            moved = {k: v[k] for k in V1_STAGE_FIELDS if v.get(k) is not None}
            held = v.get("stages") if isinstance(v.get("stages"), dict) else {}  # none in a version-1 file
            v = {**{k: x for k, x in v.items() if k not in V1_STAGE_FIELDS}, "stages": {**moved, **held}}
        variants.append(v)
    return {**data, "variants": variants}


MIGRATIONS: dict[int, Callable[[dict, str | None], dict]] = {0: v0_to_v1, 1: v1_to_v2}


def version_of(data: dict) -> int:
    """The schema version a file's data declares (0: none, a file written before versions)."""
    version = data.get(VERSION_FIELD, 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"{VERSION_FIELD} {version!r} is not a version number")
    return version


def upgrade(data: dict, recorded: str | None = None) -> dict:
    """``data`` of any known version as the current version has it (without ``schema_version``); ValueError for a
    version newer than this suite's."""
    version = version_of(data)
    if version > SCHEMA_VERSION:
        raise ValueError(f"{VERSION_FIELD} {version} is newer than this suite reads ({SCHEMA_VERSION}): "
                         "upgrade suite to read it")
    data = {k: v for k, v in data.items() if k != VERSION_FIELD}
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data, recorded)
        version += 1
    return data
