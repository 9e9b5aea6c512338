"""The signed manifest of a run's result files (issue 40): ``manifest.json``, written at the end of publish when
``SUITE_MANIFEST_KEY`` is set in the environment (never in a recipe: ``suite.recipe.guards`` refuses ``SUITE_*`` names
in ``runtime.env``), checked by ``suite gate RUN --verify`` before any judging.

What it lists (the files the run itself owns): summary.json, recipe.yaml, plan.json, jobs.json, each variant's stage
config/result JSON files (``variants/<v>/*.json``), the samples files the evaluate results name (wherever they live,
e.g. the eval-cache), and the benchmark's per-point files (``variants/<v>/benchmark/*.json``) — each with its sha256
and size — the run's ``recipe_sha256``, and an HMAC-SHA256 over a canonical serialisation (JSON, sorted keys, no
spaces, ASCII) of everything but the HMAC itself, keyed by the secret.

Not listed: ``tracking.json`` (tracking state written by `suite sync` / `suite gate`), ``manifest.json`` itself, the
pictures and report.html (derived, not judged). summary.json is hashed without its tracking state (``tracking``,
``tracking_pending``, ``stage_wall_s.track``: what an MLflow sync or gate writes back), as canonical JSON, so that a
later ``suite sync`` does not invalidate the manifest; every field the gate judges is covered.

Why HMAC and not sigstore or in-toto: the machines that run and gate are often offline (sigstore needs its transparency
log and an OIDC identity; in-toto's layouts need keys and tooling the suite does not have), and a CI secret is what
teams already have. The cost: anyone holding the key can forge a manifest, so the key lives only in CI's secret store,
never on the machine of someone who can write run folders.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

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
SUMMARY_DIGEST = "summary.json without tracking state, canonical JSON"
FIX_KEY = f"set {KEY_ENV} to the CI secret the run was signed with (the CI job's secret store)"
FIX_TAMPER = "gate a run folder as the CI job wrote it (rerun the run, or copy it again from CI's artifacts)"


def canonical(data) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _summary_bytes(path: Path) -> bytes:
    data = safeio.read_json(path, "record")
    if isinstance(data, dict):
        data.pop("tracking", None)
        data.pop("tracking_pending", None)
        if isinstance(data.get("stage_wall_s"), dict):
            data["stage_wall_s"].pop("track", None)
    return canonical(data)


def _samples(result_file: Path) -> list[str]:
    try:
        data = safeio.read_json(result_file, "record")
    except (OSError, ValueError):
        return []
    out = []
    for ev in (data, data.get(EVALUATE) if isinstance(data, dict) else None):
        if isinstance(ev, dict) and isinstance(ev.get("samples_files"), dict):
            out += [f for f in ev["samples_files"].values() if isinstance(f, str)]
    return out


def listed(run_dir: Path) -> dict[str, Path]:
    """name in the manifest -> file: the run folder's own result files (relative names) and the samples files the
    evaluate results name (absolute names when outside the run folder)."""
    run_dir = Path(run_dir)
    files: dict[str, Path] = {}
    for name in ("summary.json", "recipe.yaml", "plan.json", "jobs.json"):
        if (run_dir / name).is_file():
            files[name] = run_dir / name
    vdirs = sorted(p for p in (run_dir / "variants").glob("*") if p.is_dir()) if (run_dir / "variants").is_dir() else []
    for vdir in vdirs:
        for p in sorted([*vdir.glob("*.json"), *(vdir / BENCHMARK).glob("*.json")]):
            if p.is_file() and p.name not in EXCLUDED:
                files[p.relative_to(run_dir).as_posix()] = p
    for p in list(files.values()):
        if p.name.endswith("result.json"):
            for f in _samples(p):
                fp = Path(f) if Path(f).is_absolute() else run_dir / f
                try:
                    name = fp.resolve().relative_to(run_dir.resolve()).as_posix()
                except ValueError:
                    name = str(fp.resolve())
                files.setdefault(name, fp)
    return files


def _entry(name: str, path: Path) -> dict:
    data = _summary_bytes(path) if name == "summary.json" else safeio.read_bytes(path, "run_file")
    entry = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    if name == "summary.json":
        entry["digest"] = SUMMARY_DIGEST
    return entry


def sign(body: dict, key: str) -> str:
    return hmac.new(key.encode(), canonical(body), hashlib.sha256).hexdigest()


def build(run_dir: Path, recipe_sha256: str, key: str) -> dict:
    body = {"version": 1, "algorithm": ALGORITHM, "recipe_sha256": recipe_sha256,
            "files": {name: _entry(name, p) for name, p in sorted(listed(run_dir).items())}}
    return {**body, "hmac": sign(body, key)}


def write(run_dir: Path, recipe_sha256: str, key: str) -> Path:
    path = Path(run_dir) / NAME
    path.write_text(json.dumps(build(run_dir, recipe_sha256, key), indent=2, sort_keys=True) + "\n")
    return path


def write_sink(summary, run_dir: Path, ctx) -> None:
    """The output sink (``suite.outputs.sinks``, registered last): signs the run folder when the key is set."""
    key = os.environ.get(KEY_ENV)
    if key:  # summary.json is written again after each sink: this one leaves the summary as it is
        write(run_dir, summary.recipe_sha256, key)


def verify(run_dir: Path, recipe_sha256: str | None = None) -> int:
    """Raise SuiteError (bad input) naming the file unless ``run_dir``'s manifest is signed with the key in the
    environment and every listed file is as signed (none changed, added or removed); the number of files checked."""
    run_dir = Path(run_dir)
    path = run_dir / NAME
    key = os.environ.get(KEY_ENV)
    if not key:
        raise SuiteError(Problem(str(path), "", f"--verify needs the signing key: {KEY_ENV} is not set", FIX_KEY))
    if not path.is_file():
        raise SuiteError(Problem(str(path), "", "no signed manifest in the run folder (--verify)",
                                 f"run with {KEY_ENV} set in CI so that publish signs the run folder"))
    try:
        manifest = safeio.read_json(path, "manifest")
        body = {k: v for k, v in manifest.items() if k != "hmac"}
        ok = isinstance(manifest.get("hmac"), str) and hmac.compare_digest(sign(body, key), manifest["hmac"])
    except (OSError, ValueError, AttributeError) as e:
        raise SuiteError(Problem(str(path), "", f"the manifest cannot be read: {e}", FIX_TAMPER)) from None
    if not ok:
        raise SuiteError(Problem(str(path), "hmac", "the HMAC does not match: the manifest was edited or signed with "
                                 "another key", f"{FIX_TAMPER}; or {FIX_KEY}"))
    if recipe_sha256 is not None and manifest.get("recipe_sha256") != recipe_sha256:
        raise SuiteError(Problem(str(path), "recipe_sha256", f"signed {manifest.get('recipe_sha256')}, but the "
                                 f"summary records {recipe_sha256}", FIX_TAMPER))
    signed, now = manifest.get("files") or {}, listed(run_dir)
    problems = []
    for name in sorted(set(signed) | set(now)):
        where = str(run_dir / name) if not Path(name).is_absolute() else name
        if name not in signed:
            problems.append(Problem(where, "", "added after the run was signed (not in manifest.json)", FIX_TAMPER))
        elif name not in now or not now[name].is_file():
            problems.append(Problem(where, "", "listed in manifest.json but missing", FIX_TAMPER))
        elif _entry(name, now[name]) != signed[name]:
            problems.append(Problem(where, "", "changed since the run was signed (sha256 or size differs from "
                                    "manifest.json)", FIX_TAMPER))
    if problems:
        raise SuiteError(problems)
    return len(signed)
