"""The gate's MLflow records: verdict tags on the run's MLflow runs, and the registered model versions of a passed gate.

Every variant of a passed gate is registered, those served from a brought checkpoint too (``Target``); one that cannot
be is named with the reason (``GateRecord.not_registered``). Registering is idempotent: one checkpoint (its
``checkpoint_key``: the quantize stage's content key, or a brought checkpoint's content hash), one version. A
second ``suite gate`` of the same run, or a later run that rebuilt the same checkpoint, finds the version by its
``checkpoint_key`` tag and moves the alias to it instead of adding a version. The version points at the weights:
the checkpoint folder is logged as the variant run's ``checkpoint`` artifacts (the whole folder, weights included)
when it is at most ``SUITE_REGISTER_MAX_MB`` (default 2048 MB); a larger one keeps only config.json and
provenance.json there and the version's ``weights_uri`` tag names the folder (``file://`` on the machine that built
it: copy it somewhere shared, or raise the cap). mlflow itself is reached through ``suite.outputs.mlflow``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from suite.analysis.summary import metric_name
from suite.outputs import mlflow
from suite.plan.keys import weights_fingerprint
from suite.recipe.checkpoint import is_local_model
from suite.records.summary import RunSummary
from suite.records.quantize import QuantizeResult

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
    not_registered: list[str] = field(default_factory=list)  # one line per variant not registered: why


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


def _register(client, summary: RunSummary, v, run_id: str, target: "Target", tags: dict[str, str]):
    """(name, version, it existed already) of the version of ``<recipe>-<variant>`` for ``target.key``."""
    name = registered_model_name(summary.recipe_name, v.name)
    try:
        client.create_registered_model(name, description=f"FP8 checkpoints of {summary.recipe_name} / {v.name}")
    except Exception as e:  # noqa: BLE001 - MlflowException; only "exists already" is expected
        if "RESOURCE_ALREADY_EXISTS" not in str(getattr(e, "error_code", None) or e):
            raise
    old = _existing(client, name, target.key)
    if old is not None:
        return name, str(old.version), True
    if target.folder is not None:
        source, weight_tags = weights_source(client, run_id, target.folder)
    else:  # a hub id at a commit: the run's artifacts name it, the weights stay on the hub
        client.log_dict(run_id, {"hub_id": target.tags["model_source"], "revision": target.tags["revision"]},
                        "checkpoint/source.json")
        source = f"runs:/{run_id}/checkpoint"
        weight_tags = {"weights": "uri", "weights_uri": f"https://huggingface.co/{target.tags['model_source']}"
                                                        f"/tree/{target.tags['revision']}"}
    mv = client.create_model_version(name, source, run_id=run_id, tags={**tags, **weight_tags})
    return name, str(mv.version), False


_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass
class Target:
    """What a variant's registered version is, by identity (``key``, the ``checkpoint_key`` tag that makes registering
    idempotent): a checkpoint the quantize stage built (its content key), a local folder served as it is (a brought
    checkpoint, ``variants[].model``: the sha256 of its files, ``weights_fingerprint``, as the suite's result keys
    name it, recorded in the summary when the run began and checked against the folder when it is here), or a hub id
    at a commit (the commit is its content hash). A hub id at a branch or tag names no fixed weights, a folder that
    changed since the run is not what was measured, and a folder neither here nor hashed by the run has no known
    content: those are not registered, and ``of`` says why."""

    key: str
    folder: str | None  # logged as the variant run's checkpoint artifacts (weights_source); None: a hub id
    tags: dict[str, str]

    @classmethod
    def of(cls, summary: RunSummary, v) -> tuple["Target | None", str]:
        if (q := v.result(QuantizeResult)) is not None:
            return cls(q.key, q.checkpoint, {"checkpoint_path": q.checkpoint, "checkpoint_key": q.key,
                                             "model_source": "quantize stage",
                                             **({"content_sha256": q.content_sha256} if q.content_sha256 else {})}), ""
        served = {"kv_cache_dtype": v.kv_cache_dtype, "engine_args": json.dumps(v.engine_args, sort_keys=True)[:5000]}
        recorded = v.model_sha256  # hashed when the run began, on the machine that served it
        if Path(v.model_path).is_dir():
            content = weights_fingerprint(v.model_path)
            if recorded and content != recorded:
                return None, (f"its checkpoint folder {v.model_path} changed since the run measured it (sha256 "
                              f"{recorded[:12]}... then, {content[:12]}... now; fix: rerun the recipe on it)")
        elif recorded:  # a run folder gated on another machine (CI): the weights stay where the run served them
            content = recorded
        elif is_local_model(v.model_path):
            return None, (f"its checkpoint folder {v.model_path} is not on this machine and the run recorded no "
                          "sha256 of it, so its content is unknown (fix: run `suite gate` where the folder is)")
        if Path(v.model_path).is_dir() or recorded:
            return cls(f"folder:{content}", v.model_path, {"checkpoint_path": v.model_path, "model_source": v.model_path,
                                                           "checkpoint_key": f"folder:{content}",
                                                           "content_sha256": content, **served}), ""
        revision = _revision(summary.recipe, v.name)
        if not revision or not _COMMIT.fullmatch(revision):
            return None, (f"the hub id {v.model_path} at revision {revision or '(none: the default branch)'} names "
                          "no fixed weights (fix: set its revision to a 40-hex commit)")
        key = f"hub:{v.model_path}@{revision}"
        return cls(key, None, {"model_source": v.model_path, "revision": revision, "checkpoint_key": key,
                               "content_sha256": f"git:{revision}", **served}), ""


def _revision(recipe: dict, variant: str) -> str | None:
    """The hub revision a variant is served at: its own ``model.revision``, else the recipe model's."""
    for spec in recipe.get("variants") or []:
        if isinstance(spec, dict) and spec.get("name") == variant and isinstance(spec.get("model"), dict):
            return spec["model"].get("revision")
    model = recipe.get("model")
    return model.get("revision") if isinstance(model, dict) else None


class NotThisRun(Exception):
    """tracking.json names an MLflow run that does not carry this run's identity: nothing is recorded."""


def check_identity(client, summary: RunSummary) -> None:
    """Every MLflow run the verdict would touch must be this run's, as the suite tagged it when it logged the run
    (``suite.outputs.mlflow``): the parent's ``suite.run_dir`` tag is the summary's run_dir (or names a folder of the
    same name started at the same second: the run folder copied elsewhere) and its ``recipe_sha256``
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
    logged = tags.get("suite.run_dir") or ""
    # the same folder, or a copy of it elsewhere (a CI artifact gated by another job): the folder's own name (its start
    # time and recipe) and, where the run logged it, its start time to the second
    moved = (Path(logged).name == Path(summary.run_dir).name
             and tags.get("suite.started", summary.started) == summary.started)
    if logged != summary.run_dir and not moved:
        raise NotThisRun(f"the parent run {info.parent_run_id!r} is tagged suite.run_dir={logged!r}, "
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
                policy_sha256: str | None = None, looser: list[str] | None = None,
                uri: str | None = None) -> GateRecord:
    """Write a gate verdict to the run's MLflow runs: tags ``gate.result`` (pass, fail or inconclusive: the data
    cannot decide) / ``gate.failed`` / ``gate.inconclusive`` (the reasons) on the parent and each variant run; when
    every gate passed (never on an inconclusive verdict), each variant's checkpoint (built by the quantize stage, or
    brought: ``variants[].model``, see ``Target``) becomes a version of the registered model ``<recipe>-<variant>``
    (once per checkpoint identity) with the alias ``alias``. Every variant that is not registered has its one line in
    ``GateRecord.not_registered``. Nothing is written unless every MLflow run named carries this run's identity
    (``check_identity``; ``NotThisRun`` otherwise). ``uri``: the server to record on (`suite gate` passes the one its
    caller names, ``tracking_target.gate_uri``); tracking.json's own URI only when not given."""
    info = summary.tracking
    client = mlflow.client_for(uri or info.uri)
    check_identity(client, summary)  # before any tag: tracking.json is not signed
    verdict = result.outcome if result.outcome in ("pass", "fail", "inconclusive") else "fail"
    record = GateRecord([], [], [], [])
    policy_tags = {"gate.policy": policy, **({"gate.policy_sha256": policy_sha256} if policy_sha256 else {}),
                   **({"gate.policy_looser_than_recipe": "; ".join(looser)[:5000]} if looser else {})}
    client.set_tag(info.parent_run_id, "gate.result", verdict)
    for k, val in policy_tags.items():  # which gates gave this verdict (a --policy replaces the recipe's)
        client.set_tag(info.parent_run_id, k, val)
    record.tagged_runs.append(info.parent_run_id)
    for v in summary.variants:
        run_id = info.variant_run_ids.get(v.name)
        checks = [c for c in result.checks if c.variant == v.name]
        if run_id and checks:
            _tag_verdict(client, run_id, checks)
            record.tagged_runs.append(run_id)
        if v.is_baseline:
            continue
        if not result.passed:
            record.not_registered.append(f"{v.name}: not registered: the gate's verdict is {verdict} (only a pass "
                                         "registers)")
            continue
        why = None if run_id else "the run has no MLflow run for it (tracking.json's variant_run_ids)"
        target = None
        if why is None:
            target, why = Target.of(summary, v)
        if target is None:
            record.not_registered.append(f"{v.name}: not registered: {why}")
            continue
        tags = {metric_name("gate", c.gate): f"{c.measured:.6g} (threshold {c.threshold:.6g})" for c in checks}
        tags.update({**target.tags, "suite.run_dir": summary.run_dir, **policy_tags})
        name, version, was_there = _register(client, summary, v, run_id, target, tags)
        client.set_registered_model_alias(name, alias, version)
        record.registered.append((name, version))
        if was_there:
            record.reused.append((name, version))
    return record


def _tag_verdict(client, run_id: str, checks) -> None:
    """A variant run's ``gate.result`` and the reasons of its failed and inconclusive checks."""
    failed = [f"{c.gate}: {c.measured:.4g} vs {c.threshold:.4g}" for c in checks if c.outcome == "fail"]
    undecided = [f"{c.gate}: {c.reason}" + (f"; to decide: {c.decide}" if c.decide else "")
                 for c in checks if c.outcome == "inconclusive"]
    client.set_tag(run_id, "gate.result", "fail" if failed else "inconclusive" if undecided else "pass")
    if failed:
        client.set_tag(run_id, "gate.failed", "; ".join(failed)[:5000])
    if undecided:
        client.set_tag(run_id, "gate.inconclusive", "; ".join(undecided)[:5000])
