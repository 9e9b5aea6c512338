"""Track stage: a finished run's summary -> MLflow (one parent run, one nested run per variant).

A run that tracks opens these runs when it starts (``suite.outputs.mlflow_live``: RUNNING, each stage's metrics as
it ends); this module then finds them by their run folder tag, logs the summary into them and closes them. Where
they go: ``suite.outputs.tracking_target`` (the recipe, then MLflow's environment, then the local default).

Uses ``MlflowClient`` with explicit run ids (never the fluent "active run"). Params are written once,
at creation; metrics go through ``log_batch`` within MLflow's limits; every run is closed with
``set_terminated`` (FAILED if logging broke half-way). The default store is a SQLite file in the
run's output folder, with artifacts beside it, so nothing has to be started.

Offline first: ``log_or_defer`` checks that an HTTP tracking server answers before logging; when it
does not (or logging fails), the run keeps everything in its folder, ``tracking.json`` (beside summary.json) says
``tracking_pending``, and ``suite sync RUN_DIR`` logs it later.

Every HTTP call is bounded (``suite.outputs.mlflow_http.HTTP_LIMITS``: MLflow's request timeout, retries and backoff, unless the
environment sets them), so a server that dies mid-sync fails the sync in seconds, not minutes.

A run folder has one parent run whatever happens: the parent tagged with its ``suite.run_dir`` is looked
up first (in any state). A finished one is reused as it is; one left RUNNING or FAILED by a crash or a
lost server is resumed: its variant runs are found by their ``suite.variant`` tag, those already closed
are kept, the others (or missing ones) are logged again (same params, so MLflow accepts them), and the
parent is closed FINISHED.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from suite.analysis.load import write_tracking
from suite.analysis.summary import metric_name
from suite.outputs import tracking_target
from suite.outputs.gpu_series import gpu_series, monitor_files
from suite.outputs.mlflow_files import OUTPUT_PNGS, variant_artifacts
from suite.outputs.mlflow_http import bound_http_calls, refusal_status, unreachable
from suite.recipe import Recipe
from suite.records.summary import RunSummary, TrackingInfo, VariantSummary
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.records.kvcheck import KVCheckResult
from suite.records.quantize import QuantizeResult

MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
MAX_PARAM_VALUE = 6000
@dataclass
class TrackConfig:
    summary: RunSummary
    summary_path: Path
    uri: str
    experiment: str
    artifact_root: Path | None = None  # for a local store: where artifacts go
    resumed: bool = False  # a `suite run --resume`: variants whose runs FAILED before are logged again
    end_times: dict[str, int] = field(default_factory=dict)  # variant -> its last stage's end (ms): its run's end_time


@dataclass
class TrackResult:
    info: TrackingInfo
    wall_s: float
    already_logged: bool = False


def log_or_defer(config: "TrackConfig") -> tuple[TrackResult | None, str | None]:
    """Log now, or say why not (the results stay in the run folder for `suite sync`)."""
    why = unreachable(config.uri)
    if why:
        return None, why
    try:
        return run(config), None
    except Exception as e:  # noqa: BLE001 - any logging failure defers; the run's results are safe on disk
        text = str(e)
        status = refusal_status(e)
        if status == 401:
            return None, (f"the tracking server {config.uri} refused the credentials (HTTP 401): set "
                          "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials); "
                          "never put them in a recipe")
        if status == 403:
            return None, f"the tracking server {config.uri} denied this user write access (HTTP 403)"
        return None, f"logging to {config.uri} failed: {type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


def find_parents(client, config: "TrackConfig", exp_id: str) -> list:
    """Parent runs tagged with this run folder (any state), a finished one first, then the oldest."""
    runs = client.search_runs([exp_id], filter_string=f"tags.`suite.run_dir` = '{config.summary.run_dir}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return sorted(parents, key=lambda r: (r.info.status != "FINISHED", r.info.start_time or 0))


def children_of(client, exp_id: str, parent_id: str) -> dict[str, object]:
    """The variant runs of a parent by their ``suite.variant`` tag (a closed one preferred)."""
    kids = client.search_runs([exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    out: dict[str, object] = {}
    for r in sorted(kids, key=lambda r: (r.info.status not in ("FINISHED", "FAILED"), r.info.start_time or 0)):
        if r.data.tags.get("suite.superseded") != "true":  # replaced by a resumed run's new variant run
            out.setdefault(r.data.tags.get("suite.variant", r.info.run_id), r)
    return out


def find_logged(client, config: "TrackConfig", exp_id: str) -> TrackingInfo | None:
    """The finished parent run (and its children) already logged for this run folder, if any."""
    parents = [r for r in find_parents(client, config, exp_id) if r.info.status == "FINISHED"]
    if not parents:
        return None
    pid = parents[0].info.run_id
    return TrackingInfo(uri=config.uri, experiment=config.experiment, experiment_id=exp_id, parent_run_id=pid,
                        variant_run_ids={k: r.info.run_id for k, r in children_of(client, exp_id, pid).items()})


def default_uri(out_root: Path) -> str:
    return tracking_target.default_uri(out_root)


def _params(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_params(v, key + "."))
        else:
            text = json.dumps(v) if isinstance(v, (list, bool)) or v is None else str(v)
            out[key] = text[:MAX_PARAM_VALUE]
    return out


def client_for(uri: str):
    """An ``MlflowClient`` of ``uri``, its HTTP calls bounded."""
    from mlflow.tracking import MlflowClient

    bound_http_calls()
    return MlflowClient(tracking_uri=uri)


def open_store(config: "TrackConfig"):
    """(MlflowClient, experiment id) of ``config``'s store, the experiment created when missing."""
    client = client_for(config.uri)
    exp = client.get_experiment_by_name(config.experiment)
    if exp is not None:
        return client, exp.experiment_id
    location = config.artifact_root.resolve().as_uri() if config.artifact_root else None
    return client, client.create_experiment(config.experiment, artifact_location=location)


def create_parent(client, exp_id: str, s: RunSummary, start_time: int | None = None) -> str:
    return client.create_run(exp_id, run_name=Path(s.run_dir).name, start_time=start_time,
                             tags={"suite.recipe": s.recipe_name, "suite.run_dir": s.run_dir, "suite.started": s.started,
                                   "suite.version": s.suite_version, "suite.platform": s.platform}).info.run_id


def create_child(client, exp_id: str, parent_id: str, s: RunSummary, v: VariantSummary, start_time: int | None = None) -> str:
    return client.create_run(exp_id, run_name=v.name, start_time=start_time, tags={
        "mlflow.parentRunId": parent_id, "suite.recipe": s.recipe_name, "suite.variant": v.name,
        "suite.baseline": str(v.is_baseline).lower()}).info.run_id


def task_params(recipe: dict) -> dict[str, object]:
    """Each task's shots and row limit as the recipe sets them (the task's own default: "default")."""
    ev = recipe.get("eval") or {}

    def shown(v):  # a row count is stored as a float (8.0): written 8; a fraction stays 0.5
        return "default" if v is None else int(v) if isinstance(v, float) and v.is_integer() and v >= 1 else v
    return {f"eval.{t['name']}.{k}": shown(t.get(k, ev.get(k))) for t in ev.get("tasks") or []
            for k in ("num_fewshot", "limit")}


def log_datasets(client, run_id: str, datasets: list[tuple[str, str, str]]) -> None:
    """(name, source folder, digest) of each task's data as MLflow datasets of ``run_id`` (context "eval")."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    import warnings

    with warnings.catch_warnings():  # a local folder "can be interpreted" as two equal LocalArtifactDatasetSources
        warnings.simplefilter("ignore", UserWarning)
        inputs = [DatasetInput(MetaDataset(resolve_dataset_source(src), name=name, digest=digest)._to_mlflow_entity(),
                               tags=[InputTag("mlflow.data.context", "eval")]) for name, src, digest in datasets]
    if inputs:
        client.log_inputs(run_id, datasets=inputs)


def log_now(client, run_id: str, metrics: dict[str, float], tags: dict[str, str], ts_ms: int) -> None:
    from mlflow.entities import Metric, RunTag

    items = [Metric(k, float(v), ts_ms, 0) for k, v in metrics.items()]
    for i in range(0, len(items), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=items[i:i + MAX_METRICS_PER_BATCH])
    if tags:
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def variant_params(v: VariantSummary, versions: dict[str, str], recipe: dict | None = None) -> dict[str, str]:
    p = {"variant": v.name, "baseline": v.is_baseline, "scheme": v.scheme or "none",
         "kv_cache": v.kv_cache or "none", "kv_cache_dtype": v.kv_cache_dtype, "model_path": v.model_path}
    p.update({f"engine.{k}": val for k, val in v.engine_args.items()})
    if q := v.result(QuantizeResult):
        p["quantize.ignore"] = q.ignored_modules
        p["quantize.key"] = q.key
    if (ev := v.result(EvaluateResult)) is not None and ev.code_sandbox:  # how HumanEval's programs were contained
        p["eval.code_sandbox"] = ev.code_sandbox
    if v.kv_scales:
        p["kv.scales"] = v.kv_scales
        p["kv.skip_layers"] = v.kv_skip_layers or "none"
        if v.kv_skip_layers_auto:
            p["kv.skip_layers_auto"] = True
        if v.kv_scales_auto:
            p["kv.scales_auto"] = True
    p.update({f"version.{k}": val for k, val in versions.items()})
    spec = next((x for x in [(recipe or {}).get("baseline") or {}, *((recipe or {}).get("variants") or [])]
                 if x.get("name") == v.name), {})
    p.update({f"quantization.{k}": val for k, val in (spec.get("quantization") or {}).items()})  # calibration settings
    p.update({f"tokenizer.{k}": val for k, val in v.tokenizer.items() if k in
              ("bos_token", "encodes_bos", "add_bos_token", "chat_template_sha256")})
    return _params(p)


def _log(client, run_id: str, params: dict[str, str], metrics: dict[str, float], tags: dict[str, str]) -> None:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    items = list(params.items())
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=[Param(k, v) for k, v in items[i:i + MAX_PARAMS_PER_BATCH]])
    mitems = list(metrics.items())
    for i in range(0, len(mitems), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in mitems[i:i + MAX_METRICS_PER_BATCH]])
    if tags:
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _artifacts(client, run_id: str, files: list[tuple[str, str]]) -> None:
    for path, folder in files:
        if path and Path(path).is_file():
            client.log_artifact(run_id, path, artifact_path=folder or None)


def _tables(client, run_id: str, v: VariantSummary) -> None:
    """kvcheck/rows.json (every layer x option x tensor, an MLflow table), kvcheck/result.json (the rest) and
    perplexity/paired.json (the paired perplexity comparisons; their ppl.<task>.* figures are metrics too)."""
    if v.perplexity:
        client.log_dict(run_id, {"comparisons": v.perplexity}, "perplexity/paired.json")
    if (kvc := v.result(KVCheckResult)) is not None and kvc.rows:
        cols = ("layer", "option", "tensor", "absmax", "scale", "clipped_frac", "underflow_frac", "rel_err", "flags")
        table = {c: [r.get(c) if c != "flags" else "; ".join(r.get(c) or []) for r in kvc.rows] for c in cols}
        client.log_table(run_id, data=table, artifact_file="kvcheck/rows.json")
        client.log_dict(run_id, kvc.model_dump(exclude={"rows"}), "kvcheck/result.json")


def _system_metrics(client, run_id: str, v: VariantSummary) -> None:
    """NVML during the load points as MLflow system metrics (suite.outputs.gpu_series)."""
    from mlflow.entities import Metric

    if not (b := v.result(BenchmarkResult)):
        return
    series = [Metric(k, val, ts, step) for k, val, ts, step in gpu_series(monitor_files(Path(b.server_log).parent))]
    for i in range(0, len(series), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=series[i:i + MAX_METRICS_PER_BATCH])


def variant_tags(v: VariantSummary) -> dict[str, str]:
    """Errors, and what bounded each load point (suite.stages.benchmark.bottleneck), as run tags."""
    tags = {"suite.runtime.errors": "; ".join(v.errors)[:5000]} if v.errors else {}
    if b := v.result(BenchmarkResult):
        for p in b.points:
            if p.bottleneck:
                tags[metric_name("bottleneck", p.label)] = p.bottleneck
    return tags


def run(config: TrackConfig) -> TrackResult:
    start = time.perf_counter()
    s = config.summary
    client, exp_id = open_store(config)
    logged = find_logged(client, config, exp_id)
    relog = config.resumed
    if logged is not None:
        # logged already, but from this summary? A parent records which summary it holds (its `finished`
        # time); a resumed run has a newer one, also when it reaches MLflow later through `suite sync`
        held = client.get_run(logged.parent_run_id).data.tags.get("suite.summary_finished")
        if not config.resumed and (held is None or held == s.finished):
            return TrackResult(info=logged, wall_s=time.perf_counter() - start, already_logged=True)
        relog = True
    pid, reopened, done, resumable = _parent_run(client, config, exp_id, relog)
    child_ids: dict[str, str] = {k: r.info.run_id for k, r in done.items()}
    status = "FAILED"
    try:
        _log_parent(client, pid, s, reopened)
        for v in s.variants:
            if v.name in done:
                if relog:  # kept results, but deltas and ratios may be new (a baseline that ran only now)
                    _log(client, done[v.name].info.run_id, {}, v.metrics, variant_tags(v))
                continue
            child_ids[v.name] = _log_variant(client, config, exp_id, pid, v, resumable.get(v.name))
        info = TrackingInfo(uri=config.uri, experiment=config.experiment, experiment_id=exp_id,
                            parent_run_id=pid, variant_run_ids=child_ids)
        _close_parent_files(client, pid, s, info)
        status = "FINISHED"
    finally:
        try:
            client.set_terminated(pid, status)
        except Exception:  # noqa: BLE001 - the server is gone: the next sync resumes this parent
            if status == "FINISHED":
                raise
    _keep(s.model_copy(update={"tracking": info, "tracking_pending": None}), config.summary_path)  # not into s
    return TrackResult(info=info, wall_s=time.perf_counter() - start)


def _parent_run(client, config: TrackConfig, exp_id: str, relog: bool) -> tuple[str, bool, dict, dict]:
    """The parent run to log into: one a sync that did not finish left RUNNING or FAILED (reopened), else a new
    one. Also its variant runs: those ``done`` (kept as they are) and those ``resumable`` (logged into again)."""
    earlier = find_parents(client, config, exp_id)
    if not earlier:
        return create_parent(client, exp_id, config.summary), False, {}, {}
    pid = earlier[0].info.run_id
    client.update_run(pid, status="RUNNING")
    kids = children_of(client, exp_id, pid)
    # a sync that broke off: closed variant runs are kept. A resumed run (`suite run --resume`) reran what had failed: a
    # variant whose run FAILED is logged again as a new run under the same parent (the old one tagged superseded)
    closed = ("FINISHED",) if relog else ("FINISHED", "FAILED")
    done = {k: r for k, r in kids.items() if r.info.status in closed}
    for k, r in kids.items():
        if relog and r.info.status == "FAILED":
            client.set_tag(r.info.run_id, "suite.superseded", "true")
    resumable = {k: r for k, r in kids.items() if k not in done and r.info.status != "FAILED"}
    return pid, True, done, resumable


def _log_parent(client, pid: str, s: RunSummary, reopened: bool) -> None:
    """The parent's params (the recipe, tasks, versions, prices) and each stage's wall time."""
    params = _params({"recipe_sha256": s.recipe_sha256, "model": s.recipe["model"]["id"],
                      "tasks": s.tasks, **task_params(s.recipe), **{f"version.{k}": v for k, v in s.versions.items()},
                      **(s.cost.params() if s.cost else {})})
    had = client.get_run(pid).data.params if reopened else {}
    # MLflow params cannot change: a resumed run whose environment moved keeps the first values, says what moved in tags
    moved = {f"suite.resume.{k}": f"{had[k]} -> {v}"[:5000] for k, v in params.items() if k in had and had[k] != v}
    _log(client, pid, {k: v for k, v in params.items() if k not in had},
         {**{f"time.{k}_s": v for k, v in s.stage_wall_s.items()},
          **{f"time.{k}_elapsed_s": v for k, v in s.stage_elapsed_s.items()}}, moved)


def _log_variant(client, config: TrackConfig, exp_id: str, pid: str, v: VariantSummary, resumable) -> str:
    """One variant's run (``resumable``, a live one, else a new one): params, metrics, tags, its folder's files,
    tables and GPU series; closed FINISHED, or FAILED for a variant with errors. Returns its run id."""
    s = config.summary
    child_id = resumable.info.run_id if resumable is not None else create_child(client, exp_id, pid, s, v)
    had = client.get_run(child_id).data.params if resumable is not None else {}  # a live run: same values
    _log(client, child_id, {k: val for k, val in variant_params(v, s.versions, s.recipe).items() if k not in had},
         v.metrics, variant_tags(v))
    if s.cost is not None:  # the price behind its cost.* metrics, beside them
        _log(client, child_id, s.cost.params(), {}, {})
    # the folder being logged, wherever it is now (a run folder copied from the GPU machine is synced here)
    _artifacts(client, child_id, variant_artifacts(v, config.summary_path.parent / "variants" / v.name))
    _tables(client, child_id, v)
    _system_metrics(client, child_id, v)
    client.set_terminated(child_id, "FAILED" if v.errors else "FINISHED", end_time=config.end_times.get(v.name))
    return child_id


def _close_parent_files(client, pid: str, s: RunSummary, info: TrackingInfo) -> None:
    """The parent's files (summary.json as logged, plots, report, recipe) and the summary it now holds."""
    logged = s.model_copy(update={"tracking": info, "tracking_pending": None})
    with tempfile.TemporaryDirectory(prefix="suite-track-") as tmp:  # the run folder's copy says "logged"
        copy = logged.write(Path(tmp) / "summary.json")  # only once the parent is closed (below)
        _artifacts(client, pid, [(str(copy), ""), *((s.artifacts.get(k, ""), "") for k in OUTPUT_PNGS),
                                 (s.artifacts.get("report_html", ""), ""), (s.artifacts.get("recipe", ""), "")])
    client.set_tag(pid, "suite.summary_finished", s.finished or "")


def track_config(summary: RunSummary, summary_path: Path, out_root: Path, uri: str | None = None,
                 resumed: bool = False, end_times: dict[str, int] | None = None) -> TrackConfig:
    """Where and as what a run is logged (``suite.outputs.tracking_target``: ``uri``, the recipe's tracking section,
    MLflow's environment, then the run root's own store)."""
    t = tracking_target.target(Recipe.model_validate(summary.recipe), out_root, uri)
    uri = t.uri
    return TrackConfig(summary, summary_path, uri, t.experiment,
                       artifact_root=out_root / "mlartifacts" if uri.startswith("sqlite") else None, resumed=resumed,
                       end_times=end_times or {})


def track_summary(summary: RunSummary, summary_path: Path, out_root: Path, uri: str | None = None,
                  resumed: bool = False, end_times: dict[str, int] | None = None) -> str | None:
    """Log the run to MLflow, or keep it pending in tracking.json beside summary.json (``suite sync`` logs it later);
    ``resumed``: a ``suite run --resume``, whose variants that failed before are logged again. ``summary`` is not
    changed: the state is in tracking.json (``analysis.load.with_tracking`` lays it over a summary)."""
    result, error = log_or_defer(track_config(summary, summary_path, out_root, uri, resumed, end_times))
    state = {"tracking_pending": error} if error else {"tracking": result.info, "tracking_pending": None} if result else {}
    _keep(summary.model_copy(update=state), summary_path)
    return error


def _keep(summary: RunSummary, summary_path: Path) -> None:
    """The tracking state into tracking.json beside ``summary_path``; the summary too where it is not written yet
    (a summary logged from Python: `suite run` and `suite sync` have written it, and it is not written again)."""
    if not summary_path.is_file():
        summary.write(summary_path)
    write_tracking(summary, summary_path.parent)
