"""The gate's MLflow records: verdict tags on the run's MLflow runs, and the registered model versions of a passed gate.

Registering is idempotent: one checkpoint (its ``checkpoint_key``, the quantize stage's content key), one version. A
second ``suite gate`` of the same run, or a later run that rebuilt the same checkpoint, finds the version by its
``checkpoint_key`` tag and moves the alias to it instead of adding a version. The version points at the weights:
the checkpoint folder is logged as the variant run's ``checkpoint`` artifacts (the whole folder, weights included)
when it is at most ``SUITE_REGISTER_MAX_MB`` (default 2048 MB); a larger one keeps only config.json and
provenance.json there and the version's ``weights_uri`` tag names the folder (``file://`` on the machine that built
it: copy it somewhere shared, or raise the cap). mlflow itself is reached through ``suite.outputs.mlflow``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from suite.analysis.summary import metric_name
from suite.records.summary import RunSummary

REGISTER_MAX_MB_ENV = "SUITE_REGISTER_MAX_MB"
_NOT_IN_MODEL_NAMES = re.compile(r"[^A-Za-z0-9_\-./ ]")


def registered_model_name(recipe: str, variant: str) -> str:
    """The MLflow registered model of a recipe's variant: ``<recipe>-<variant>``, any character outside
    letters, digits and ``_ - . / `` (and space) written as ``_`` (the names it has had since the first release)."""
    return _NOT_IN_MODEL_NAMES.sub("_", f"{recipe}-{variant}".replace(",", ".").replace("@", "_at_"))


@dataclass
class GateRecord:
    tagged_runs: list[str]
    registered: list[tuple[str, str]]  # (registered model name, version) given the alias
    reused: list[tuple[str, str]] | None = None  # of those, versions that existed already (same checkpoint key)


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def weights_source(client, run_id: str, checkpoint: str) -> tuple[str, dict[str, str]]:
    """The version's source and tags: the run's ``checkpoint`` artifacts with the weights logged, when the folder
    is under the cap; else those artifacts (config and provenance only) and a ``weights_uri`` tag."""
    folder = Path(checkpoint)
    cap = float(os.environ.get(REGISTER_MAX_MB_ENV) or 2048)
    if folder.is_dir() and folder_mb(folder) <= cap:
        client.log_artifacts(run_id, str(folder), artifact_path="checkpoint")
        return f"runs:/{run_id}/checkpoint", {"weights": "artifact"}
    return f"runs:/{run_id}/checkpoint", {"weights": "uri", "weights_uri": folder.resolve().as_uri()}


def _existing(client, name: str, key: str):
    """The version of ``name`` registered for checkpoint ``key`` (the oldest), or None."""
    found = [mv for mv in client.search_model_versions(f"name='{name}'") if (mv.tags or {}).get("checkpoint_key") == key]
    return min(found, key=lambda mv: int(mv.version)) if found else None


def _register(client, summary: RunSummary, v, run_id: str, tags: dict[str, str]) -> tuple[str, str, bool]:
    name = registered_model_name(summary.recipe_name, v.name)
    try:
        client.create_registered_model(name, description=f"FP8 checkpoints of {summary.recipe_name} / {v.name}")
    except Exception as e:  # noqa: BLE001 - MlflowException; only "exists already" is expected
        if "RESOURCE_ALREADY_EXISTS" not in str(getattr(e, "error_code", None) or e):
            raise
    old = _existing(client, name, v.quantize.key)
    if old is not None:
        return name, str(old.version), True
    source, weight_tags = weights_source(client, run_id, v.quantize.checkpoint)
    mv = client.create_model_version(name, source, run_id=run_id, tags={**tags, **weight_tags})
    return name, str(mv.version), False


class NotThisRun(Exception):
    """tracking.json names an MLflow run that does not carry this run's identity: nothing is recorded."""


def check_identity(client, summary: RunSummary) -> None:
    """Every MLflow run the verdict would touch must be this run's, as the suite tagged it when it logged the run
    (``suite.outputs.mlflow``): the parent's ``suite.run_dir`` tag is the summary's run_dir and its ``recipe_sha256``
    param (when logged) the summary's; each variant run is a child of that parent (``mlflow.parentRunId``) with the
    variant's name (``suite.variant``). tracking.json is not signed (``suite.outputs.manifest``): without this check an
    edit to it would write a verdict, and register candidates, on another run. Raises ``NotThisRun``."""
    info = summary.tracking

    def read(run_id: str, what: str):
        try:
            return client.get_run(run_id).data
        except Exception as e:  # noqa: BLE001 - not found, unreachable, or a client that cannot read runs
            raise NotThisRun(f"{what} run {run_id!r} cannot be read to check it is this run's "
                             f"({type(e).__name__}: {e})") from None

    parent = read(info.parent_run_id, "the parent")
    tags, params = dict(parent.tags or {}), dict(getattr(parent, "params", None) or {})
    if tags.get("suite.run_dir") != summary.run_dir:
        raise NotThisRun(f"the parent run {info.parent_run_id!r} is tagged suite.run_dir={tags.get('suite.run_dir')!r}, "
                         f"not this run's {summary.run_dir!r} (tracking.json names another run)")
    if params.get("recipe_sha256") not in (None, summary.recipe_sha256):
        raise NotThisRun(f"the parent run {info.parent_run_id!r} logged recipe_sha256 {params.get('recipe_sha256')!r}, "
                         f"not this run's {summary.recipe_sha256!r}")
    names = {v.name for v in summary.variants}
    for name, run_id in info.variant_run_ids.items():
        if name not in names or not run_id:
            raise NotThisRun(f"tracking.json names a run for {name!r}, which is not a variant of this run")
        t = dict(read(run_id, f"{name}'s").tags or {})
        if t.get("mlflow.parentRunId") != info.parent_run_id or t.get("suite.variant") != name:
            raise NotThisRun(f"{name}'s run {run_id!r} is not this run's (its parent {t.get('mlflow.parentRunId')!r}, "
                             f"variant {t.get('suite.variant')!r})")


def record_gate(summary: RunSummary, result, alias: str = "candidate", policy: str = "recipe",
                policy_sha256: str | None = None, looser: list[str] | None = None) -> GateRecord:
    """Write a gate verdict to the run's MLflow runs: tags ``gate.result`` (pass, fail or inconclusive: the data
    cannot decide) / ``gate.failed`` / ``gate.inconclusive`` (the reasons) on the parent and each variant run; when
    every gate passed (never on an inconclusive verdict), each quantized variant's checkpoint becomes a version of the
    registered model ``<recipe>-<variant>`` (once per checkpoint key) with the alias ``alias``. Nothing is written unless
every MLflow run named carries this run's identity (``check_identity``; ``NotThisRun`` otherwise)."""
    from suite.outputs.mlflow import client_for

    info = summary.tracking
    client = client_for(info.uri)
    check_identity(client, summary)  # before any tag: tracking.json is not signed
    verdict = result.outcome if result.outcome in ("pass", "fail", "inconclusive") else "fail"
    tagged, registered, reused = [], [], []
    policy_tags = {"gate.policy": policy, **({"gate.policy_sha256": policy_sha256} if policy_sha256 else {}),
                   **({"gate.policy_looser_than_recipe": "; ".join(looser)[:5000]} if looser else {})}
    client.set_tag(info.parent_run_id, "gate.result", verdict)
    for k, val in policy_tags.items():  # which gates gave this verdict (a --policy replaces the recipe's)
        client.set_tag(info.parent_run_id, k, val)
    tagged.append(info.parent_run_id)
    for v in summary.variants:
        run_id = info.variant_run_ids.get(v.name)
        checks = [c for c in result.checks if c.variant == v.name]
        if not run_id or not checks:
            continue
        failed = [f"{c.gate}: {c.measured:.4g} vs {c.threshold:.4g}" for c in checks if c.outcome == "fail"]
        undecided = [f"{c.gate}: {c.reason}" + (f"; to decide: {c.decide}" if c.decide else "")
                     for c in checks if c.outcome == "inconclusive"]
        client.set_tag(run_id, "gate.result", "fail" if failed else "inconclusive" if undecided else "pass")
        if failed:
            client.set_tag(run_id, "gate.failed", "; ".join(failed)[:5000])
        if undecided:
            client.set_tag(run_id, "gate.inconclusive", "; ".join(undecided)[:5000])
        tagged.append(run_id)
        if not result.passed or v.is_baseline or not v.quantize:
            continue
        tags = {metric_name("gate", c.gate): f"{c.measured:.6g} (threshold {c.threshold:.6g})" for c in checks}
        tags.update({"checkpoint_path": v.quantize.checkpoint, "checkpoint_key": v.quantize.key,
                     "suite.run_dir": summary.run_dir, **policy_tags})
        name, version, was_there = _register(client, summary, v, run_id, tags)
        client.set_registered_model_alias(name, alias, version)
        registered.append((name, version))
        if was_there:
            reused.append((name, version))
    return GateRecord(tagged, registered, reused)
