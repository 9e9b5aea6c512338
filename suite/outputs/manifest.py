"""The signed manifest of a run's result files: ``manifest.json``, written by the process that made the results (the
runner, at publish, when ``SUITE_MANIFEST_KEY`` is set in its environment; never in a recipe: ``suite.recipe.guards``
refuses ``SUITE_*`` names in ``runtime.env``), checked by ``suite gate RUN --verify`` before any judging.
``suite summarize`` and ``suite report`` never sign: a summary rebuilt from a signed folder is checked against the
manifest (``check_records``), which stays as the run signed it.

What it lists (the files the run itself owns), each by its name relative to the run folder (a copied folder
verifies): summary.json, recipe.yaml, plan.json, jobs.json, run.json, each variant's stage config/result JSON files
(``variants/<v>/*.json``), the files the evaluate results name (lm-eval's results and samples files, in the run
folder: suite.records.paths) and the benchmark's per-point files (``variants/<v>/benchmark/*.json``) — each with its
sha256 and size — the run's ``recipe_sha256``, and an HMAC-SHA256 over a canonical serialisation (JSON, sorted keys, no
spaces, ASCII) of everything but the HMAC itself, keyed by the secret. A result naming a file outside the run folder
cannot be signed or verified: refused.

``verify`` reads each listed file once into memory, checks those bytes, and writes them into a private copy of the
folder that the gate then judges: a file changed after it was verified is not what is judged.

Not listed: ``tracking.json`` (tracking state written by `suite sync` / `suite gate`), ``manifest.json`` itself, the
pictures and report.html (derived, not judged). summary.json is hashed without its tracking state (``tracking``,
``tracking_pending``, ``stage_wall_s.track``: what an MLflow sync or gate writes back), as canonical JSON, so that a
later ``suite sync`` does not invalidate the manifest; every field the gate judges is covered.

Why HMAC and not sigstore or in-toto: the machines that run and gate are often offline (sigstore needs its transparency
log and an OIDC identity; in-toto's layouts need keys and tooling the suite does not have), and a CI secret is what
teams already have. The cost: anyone holding the key can forge a manifest, so the key lives only in CI's secret store,
never on the machine of someone who can write run folders (docs/07-reliability-and-threat-model.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from suite.records import migrate
from suite.records.paths import recorded_run_dir
from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult

EVALUATE = EvaluateResult.__name__.removesuffix("Result").lower()  # the stage folders' names, without a stage import
BENCHMARK = BenchmarkResult.__name__.removesuffix("Result").lower()

NAME = "manifest.json"
KEY_ENV = "SUITE_MANIFEST_KEY"
ALGORITHM = "HMAC-SHA256"
EXCLUDED = {NAME, "tracking.json"}
VERSION_FIELD, VERSION = "schema_version", 2  # 2: every name relative to the run folder (1: "version", some absolute)
SUMMARY_DIGEST = "summary.json without tracking state, canonical JSON"
FIX_KEY = f"set {KEY_ENV} to the CI secret the run was signed with (the CI job's secret store)"
FIX_TAMPER = "gate a run folder as the CI job wrote it (rerun the run, or copy it again from CI's artifacts)"


def canonical(data) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _read(path: Path, kind: str = "run_file") -> bytes:
    """A listed file's bytes, read once by the safe reader (a regular file within the kind's cap; OSError otherwise,
    naming why)."""
    try:
        return safeio.read_bytes(path, kind)
    except SuiteError as e:  # a FIFO, a device, too large: not a file the run wrote
        raise OSError(f"{path}: {e.problems[0].message}") from None


def _summary_bytes(data: bytes) -> bytes:
    parsed = safeio.loads_json(data, "summary.json", "record")
    if isinstance(parsed, dict):
        parsed.pop("tracking", None)
        parsed.pop("tracking_pending", None)
        if isinstance(parsed.get("stage_wall_s"), dict):
            parsed["stage_wall_s"].pop("track", None)
    return canonical(parsed)


def _named(result: Path, recorded: str | None) -> list[str]:
    """The samples files an evaluate result (or a served benchmark's evaluation) names, relative to the run folder
    (an older result's absolute names under ``recorded``, where the run folder was, made relative: records.migrate)."""
    try:
        data = safeio.loads_json(_read(result, "record"), result, "record")
        data = migrate.upgrade(data, recorded) if isinstance(data, dict) else data
    except (OSError, ValueError, RecursionError, SuiteError):
        return []
    out = []
    for ev in (data, data.get(EVALUATE) if isinstance(data, dict) else None):
        if isinstance(ev, dict) and isinstance(ev.get("samples_files"), dict):
            out += [f for f in ev["samples_files"].values() if isinstance(f, str)]
    return out


def _name_in(run_dir: Path, name: str) -> str | None:
    """``name`` (a result's) relative to the run folder, or None when it is outside it (cannot be signed)."""
    p = Path(name) if Path(name).is_absolute() else run_dir / name
    try:
        return p.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return None


def _results(run_dir: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for name in ("summary.json", "recipe.yaml", "plan.json", "jobs.json", "run.json"):
        if (run_dir / name).is_file():
            files[name] = run_dir / name
    vdirs = sorted(p for p in (run_dir / "variants").glob("*") if p.is_dir()) if (run_dir / "variants").is_dir() else []
    for vdir in vdirs:
        for p in sorted([*vdir.glob("*.json"), *(vdir / BENCHMARK).glob("*.json")]):
            if p.is_file() and p.name not in EXCLUDED:
                files[p.relative_to(run_dir).as_posix()] = p
    return files


def listed(run_dir: Path) -> dict[str, Path]:
    """name in the manifest (relative to the run folder) -> file: the run folder's own result files and the samples
    files the evaluate results name (``outside`` names those out of the run folder, which are not listed)."""
    run_dir = Path(run_dir)
    files, recorded = _results(run_dir), recorded_run_dir(run_dir)
    for p in list(files.values()):
        if p.name.endswith("result.json"):
            for f in _named(p, recorded):
                if (name := _name_in(run_dir, f)) is not None:
                    files.setdefault(name, run_dir / name)
    return files


def outside(run_dir: Path) -> list[tuple[str, str]]:
    """(result file, name) for each samples file a result names outside the run folder: neither signed nor judged
    from a verified copy."""
    recorded = recorded_run_dir(run_dir)
    return [(rel, f) for rel, p in _results(Path(run_dir)).items() if p.name.endswith("result.json")
            for f in _named(p, recorded) if _name_in(Path(run_dir), f) is None]


def _entry(name: str, data: bytes) -> dict:
    data = _summary_bytes(data) if name == "summary.json" else data
    entry = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    if name == "summary.json":
        entry["digest"] = SUMMARY_DIGEST
    return entry


def sign(body: dict, key: str) -> str:
    return hmac.new(key.encode(), canonical(body), hashlib.sha256).hexdigest()


def build(run_dir: Path, recipe_sha256: str, key: str) -> dict:
    body = {VERSION_FIELD: VERSION, "algorithm": ALGORITHM, "recipe_sha256": recipe_sha256,
            "files": {name: _entry(name, _read(p)) for name, p in sorted(listed(run_dir).items())}}
    return {**body, "hmac": sign(body, key)}


def write(run_dir: Path, recipe_sha256: str, key: str) -> Path:
    path = Path(run_dir) / NAME
    path.write_text(json.dumps(build(run_dir, recipe_sha256, key), indent=2, sort_keys=True) + "\n")
    return path


def write_sink(summary, run_dir: Path, ctx) -> None:
    """The output sink (``suite.outputs.sinks``, registered last): signs the run folder when the key is set and the
    publishing process made the results (``ctx.signs``: the runner; never `suite summarize`)."""
    key = os.environ.get(KEY_ENV)
    if key and ctx.signs:  # summary.json is written again after each sink: this one leaves the summary as it is
        write(run_dir, summary.recipe_sha256, key)


def _manifest(run_dir: Path, key: str | None) -> dict:
    """The run folder's manifest, its HMAC checked when ``key`` is given (SuiteError naming it otherwise)."""
    path = run_dir / NAME
    if not path.is_file():
        raise SuiteError(Problem(str(path), "", "no signed manifest in the run folder (--verify)",
                                 f"run with {KEY_ENV} set in CI so that publish signs the run folder"))
    try:
        manifest = safeio.loads_json(_read(path, "manifest"), path, "manifest")
        body = {k: v for k, v in manifest.items() if k != "hmac"}
        ok = key is None or (isinstance(manifest.get("hmac"), str)
                             and hmac.compare_digest(sign(body, key), manifest["hmac"]))
        files = manifest.get("files")
        if not isinstance(files, dict):
            raise ValueError("no files listed")
    except (OSError, ValueError, AttributeError, RecursionError, SuiteError) as e:
        why = e.problems[0].message if isinstance(e, SuiteError) else e
        raise SuiteError(Problem(str(path), "", f"the manifest cannot be read: {why}", FIX_TAMPER)) from None
    if not ok:
        raise SuiteError(Problem(str(path), "hmac", "the HMAC does not match: the manifest was edited or signed with "
                                 "another key", f"{FIX_TAMPER}; or {FIX_KEY}"))
    return manifest


def _compare(run_dir: Path, signed: dict, skip=()) -> tuple[list[Problem], dict[str, bytes]]:
    """Each listed file read once and compared with its signed entry: (problems, name -> the bytes checked)."""
    now, problems, held = listed(run_dir), [], {}
    for result, name in outside(run_dir):
        problems.append(Problem(str(run_dir / result), "samples_files", f"names {name}, outside the run folder: the "
                                "manifest cannot cover it", FIX_TAMPER))
    for name in sorted((set(signed) | set(now)) - set(skip)):
        where = str(run_dir / name) if not Path(name).is_absolute() else name
        path = now.get(name) or (run_dir / name if not Path(name).is_absolute() else Path(name))
        try:
            data = _read(path) if path.is_file() else None
        except OSError:
            data = None
        if name not in signed:
            problems.append(Problem(where, "", "added after the run was signed (not in manifest.json)", FIX_TAMPER))
        elif data is None:
            problems.append(Problem(where, "", "listed in manifest.json but missing", FIX_TAMPER))
        elif _entry_or_none(name, data) != signed[name]:
            problems.append(Problem(where, "", "changed since the run was signed (sha256 or size differs from "
                                    "manifest.json)", FIX_TAMPER))
        else:
            held[name] = data
    return problems, held


def _entry_or_none(name: str, data: bytes) -> dict | None:
    try:
        return _entry(name, data)
    except (ValueError, RecursionError, SuiteError):  # a summary.json that is not JSON: not what was signed
        return None


def verify(run_dir: Path, recipe_sha256: str | None = None, into: Path | None = None) -> int:
    """Raise SuiteError (bad input) naming the file unless ``run_dir``'s manifest is signed with the key in the
    environment and every listed file is as signed (none changed, added or removed); the number of files checked.
    ``into``: a folder that receives exactly the bytes verified (each file read once), and tracking.json (not judged),
    for the gate to judge instead of the run folder, which may change after this returns."""
    run_dir = Path(run_dir)
    key = os.environ.get(KEY_ENV)
    if not key:
        raise SuiteError(Problem(str(run_dir / NAME), "", f"--verify needs the signing key: {KEY_ENV} is not set",
                                 FIX_KEY))
    manifest = _manifest(run_dir, key)
    if recipe_sha256 is not None and manifest.get("recipe_sha256") != recipe_sha256:
        raise SuiteError(Problem(str(run_dir / NAME), "recipe_sha256", f"signed {manifest.get('recipe_sha256')}, but "
                                 f"the summary records {recipe_sha256}", FIX_TAMPER))
    problems, held = _compare(run_dir, manifest["files"])
    if problems:
        raise SuiteError(problems)
    if into is not None:
        extra = {n: _read(run_dir / n) for n in EXCLUDED - {NAME} if (run_dir / n).is_file()}
        for name, data in {**extra, **held}.items():
            (Path(into) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(into) / name).write_bytes(data)
    return len(manifest["files"])


def check_records(run_dir: Path) -> int:
    """A signed run folder's stage records as signed (`suite summarize` rebuilds the summary from them, and never
    signs): each listed file but summary.json compared with manifest.json (its HMAC checked too when the key is
    set); SuiteError naming each that differs. The number of files checked; 0 when the folder is not signed."""
    run_dir = Path(run_dir)
    if not (run_dir / NAME).is_file():
        return 0
    manifest = _manifest(run_dir, os.environ.get(KEY_ENV))
    problems, held = _compare(run_dir, manifest["files"], skip=("summary.json",))
    if problems:
        raise SuiteError(problems)
    return len(held)
