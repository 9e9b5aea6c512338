"""The runner: executes a plan (each stage job in its own process), then summary -> frontier -> MLflow.

Data flows one way: recipe -> plan -> stage results (JSON files in the run folder) -> summary.json ->
frontier.png, MLflow, gate. A failed stage does not stop the run: the variant records the error (and
its log's tail), its later stages are skipped, and the other variants go on.

Run folder layout (``<output_dir>/<timestamp>-<recipe>[-N]/``):
  recipe.yaml, plan.json, summary.json, frontier.png, run.lock (while a run of it is alive: suite.procs)
  variants/<name>/{quantize,evaluate,benchmark}.{config.json,result.json,log}
  variants/<name>/evaluate/  lm_eval_results.json, samples_<task>.jsonl
  variants/<name>/benchmark/ bench-<point>.json, server.log
Quantized checkpoints live in ``<output_dir>/checkpoints/<variant>-<key>/`` and are reused across runs.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple

from suite import __version__
from suite.environments import quantize_python, run_versions, serve_python, vllm_platform
from suite.plan import Plan, VariantPlan, make_plan
from suite.recipe import URL_PASSWORD, LoadedRecipe
from suite.results import (BenchmarkResult, EvaluateResult, QuantizeResult, Record, RunSummary, SensitivityResult,
                           VariantSummary)
from suite.summary import add_deltas, add_paired, variant_metrics

RESULT_TYPES = {"quantize": QuantizeResult, "evaluate": EvaluateResult, "benchmark": BenchmarkResult,
                "sensitivity": SensitivityResult}
Reporter = Callable[[str, str, str], None]  # (stage, variant, event) with event in start|ok|failed|skipped


# Credentials a stage never needs (tracking and object-store logins are the parent's business): they are
# not handed to stage processes, so that nothing a stage runs (model-written code included) can read them.
# Hugging Face's tokens stay: hub model downloads need them.
_CREDENTIAL = re.compile(r"(PASSWORD|PASSWD|_PASS|_SECRET|_TOKEN|_API_KEY|_ACCESS_KEY|_ACCESS_KEY_ID|_SESSION_TOKEN"
                         r"|_USERNAME|_PRIVATE_KEY|_CREDENTIALS|_CONNECTION_STRING)$", re.IGNORECASE)
_STAGE_CREDENTIALS_KEPT = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})


def stage_env(recipe_env: dict[str, str]) -> dict[str, str]:
    """The environment of a stage process: ours without credentials, the recipe's runtime.env, and this
    checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k in _STAGE_CREDENTIALS_KEPT or not (_CREDENTIAL.search(k) or URL_PASSWORD.search(v))}
    env.update(recipe_env)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class StageOutcome(NamedTuple):
    result: Record | None
    error: str | None
    wall_s: float
    note: str | None = None  # something the user should hear about a stage that did succeed


def run_stage(stage: str, config: Record, vdir: Path, env: dict[str, str], lock=None) -> StageOutcome:
    """Run one stage process under ``suite.procs.supervised``: it dies with us (even with a ``kill -9``
    of ``suite run``), and every process it left behind (an engine core, a server) is killed when it ends.

    A stage that wrote its result and then died (on the H200, vLLM's engine teardown at interpreter exit
    aborted every evaluate process with 'terminate called without an active exception', exit -6, after
    lm-eval had finished and the result was written) succeeded: the result is kept, with a note. The
    result file is removed before the stage starts and written atomically, so one that is there and
    parses is this stage's complete result. ``lock`` (the run's ``procs.RunLock``) records the stage
    process while it runs, and its token lets the stage write its result only while the run owns the
    folder."""
    from suite import procs

    python = quantize_python() if stage in ("quantize", "sensitivity") else serve_python()
    cfg_path, res_path, log_path = (vdir / f"{stage}.config.json", vdir / f"{stage}.result.json", vdir / f"{stage}.log")
    config.write(cfg_path)
    res_path.unlink(missing_ok=True)
    if lock is not None:
        env = {**env, **lock.env()}
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = procs.supervised([python, "-m", "suite.stages", stage, str(cfg_path), str(res_path)], stdout=log,
                                env=env)
        try:
            if lock is not None:
                lock.set_stage(stage, vdir.name, proc.pid)
            rc = proc.wait()
        finally:  # Ctrl-C or an error here: the supervisor takes the stage's whole tree down
            procs.stop(proc, grace_s=10)
            if lock is not None:
                lock.set_stage(None)
    wall = time.perf_counter() - start
    result, unreadable = read_result(vdir, stage)
    if rc == 0 and result is not None:
        return StageOutcome(result, None, wall)
    last = f"{failure_line(log_path)} [log: {log_path}]"  # the log is read only when something went wrong
    if result is None:
        return StageOutcome(None, f"{stage} failed (exit {rc}): {last}"
                            + (f"; {unreadable}" if unreadable else ""), wall)
    return StageOutcome(result, None, wall, f"the {stage} process exited with code {rc} after writing its result "
                                            f"(kept): {last}")


def failure_line(log_path: Path) -> str:
    """The last 'SomeError: message' line of a stage log (the exception that ended it), else its last line."""
    from suite.procs import failure_line as line

    return line(log_path)


def new_run_dir(loaded: LoadedRecipe, out_root: Path) -> Path:
    """``<timestamp>-<recipe>``, or with ``-2``, ``-3``... when runs of the recipe start in the same second
    (``mkdir`` is atomic: two processes never get one folder)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        run_dir = out_root / (f"{stamp}-{loaded.recipe.name}" + (f"-{n}" if n > 1 else ""))
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run folder name for {stamp}-{loaded.recipe.name} in {out_root}")


def load_run_recipe(run_dir: Path, serving: bool = False) -> LoadedRecipe:
    """The recipe a run folder was made from: its copy (recipe.yaml), placed where the original was
    (plan.json or summary.json say), so that its relative paths resolve as they did."""
    import json

    from suite.errors import Problem, SuiteError
    from suite.recipe import load_recipe

    copy = run_dir / "recipe.yaml"
    if not copy.is_file():
        raise SuiteError(Problem(str(run_dir), "", "not a run folder (no recipe.yaml)", "give a folder `suite run` made"))
    original = None
    for name in ("plan.json", "summary.json"):  # a plan.json written before --resume existed has none
        f = run_dir / name
        if f.is_file() and (original := json.loads(f.read_text()).get("recipe_path")):
            break
    if not original:
        raise SuiteError(Problem(str(run_dir / "plan.json"), "recipe_path", "where the recipe was is not recorded",
                                 "start a new run with `suite run RECIPE`"))
    return load_recipe(original, serving=serving, text=copy.read_text())


def read_result(vdir: Path, stage: str) -> tuple[Record | None, str | None]:
    """A stage's result in its variant folder, if it is there and complete (it is written atomically, so
    one that parses is whole), else (None, why it does not parse) or (None, None) when there is none."""
    path = vdir / f"{stage}.result.json"
    if not path.is_file():
        return None, None
    try:
        return RESULT_TYPES[stage].read(path), None
    except ValueError as e:
        return None, f"its result file does not parse: {str(e).splitlines()[0]}"


def execute(loaded: LoadedRecipe, out_root: Path | None = None, report: Reporter | None = None,
            track: bool = True, force: bool = False, resume: Path | None = None) -> RunSummary:
    """Run a recipe's plan in a new run folder, or with ``resume`` continue the run in that folder: stage
    results already there are kept (event 'resumed'), the other jobs run. The folder is locked
    (``run.lock``) for as long as this runs: a resume refuses while a run of it, or a stage of one, is alive."""
    report = report or (lambda stage, variant, event: None)
    r = loaded.recipe
    if resume:
        run_dir = resume.resolve()
        out_root = out_root or run_dir.parent  # where its checkpoints/ and eval-cache/ are
    else:
        out_root = out_root or loaded.resolve(r.output_dir)
        run_dir = new_run_dir(loaded, out_root)
    lock = acquire_run_lock(run_dir)
    try:
        if not resume:
            shutil.copy(loaded.path, run_dir / "recipe.yaml")
        return _execute(loaded, run_dir, out_root, lock, report, track, force, resume)
    finally:
        lock.release()


def acquire_run_lock(run_dir: Path):
    """The run folder's lock (suite.procs.RunLock), or a clear error while another run of it is alive."""
    from suite.errors import Problem, SuiteError
    from suite.procs import RunLock, RunLockedError

    try:
        return RunLock(run_dir).acquire()
    except RunLockedError as e:
        raise SuiteError(Problem(str(run_dir), "run.lock", str(e),
                                 "wait for that run to end, or stop it first (kill its pid); a lock whose "
                                 "processes are gone, or from another boot or host, is taken over by itself")) from None


def _execute(loaded: LoadedRecipe, run_dir: Path, out_root: Path, lock, report: Reporter, track: bool, force: bool,
             resume: Path | None) -> RunSummary:
    r = loaded.recipe
    plan = make_plan(loaded, run_dir, out_root / "checkpoints")
    env = stage_env(plan.env)
    kept = {(stage, name): res for stage, name in plan.jobs()
            if resume and (res := read_result(run_dir / "variants" / name, stage)[0]) is not None}
    if resume and len(kept) < len(plan.jobs()):  # something will run: can this machine serve it?
        from suite.errors import SuiteError
        from suite.recipe import serving_problems

        if problems := serving_problems(loaded):
            raise SuiteError(problems)
    if not resume:
        (run_dir / "plan.json").write_text(plan_json(plan, loaded.path))

    earlier = RunSummary.read(run_dir / "summary.json") if resume and (run_dir / "summary.json").is_file() else None
    summary = RunSummary(
        suite_version=__version__, recipe_name=r.name, recipe_path=str(loaded.path), recipe_sha256=loaded.sha256,
        recipe=r.model_dump(mode="json"), run_dir=str(run_dir),
        # a resumed run keeps where and with what its stages ran (the kept results came from there)
        started=earlier.started if earlier else _now(), platform=earlier.platform if earlier else vllm_platform(),
        versions=earlier.versions if earlier else run_versions(quantize=any(vp.quantize for vp in plan.variants)),
        tasks=[t.name for t in r.eval.tasks],
        variants=[VariantSummary(name=vp.variant.name, is_baseline=vp.is_baseline,
                                 scheme=vp.variant.quantization.scheme if vp.variant.quantization else None,
                                 kv_cache=vp.variant.quantization.kv_cache if vp.variant.quantization else None,
                                 kv_cache_dtype=vp.variant.kv_cache_dtype, engine_args=dict(vp.variant.engine_args),
                                 model_path=vp.model_path) for vp in plan.variants],
        artifacts={"recipe": str(run_dir / "recipe.yaml")},
    )
    if lock.taken_over:
        t = lock.taken_over
        summary.warnings.append(f"took over the run lock of `suite run` pid {t.get('pid')} on {t.get('host')} "
                                "(no longer running here); results its stages may still write are refused")
    by_name = {v.name: v for v in summary.variants}
    plans = {vp.variant.name: vp for vp in plan.variants}
    totals: dict[str, float] = {}
    checked = False
    for stage, name in plan.jobs():
        if stage != "quantize" and not checked:  # every checkpoint exists now: same prompts for all?
            summary.warnings += preflight_tokenizers(summary.variants) + preflight_kv(summary.variants)
            checked = True
        vs, vp = by_name[name], plans[name]
        if vs.errors:
            report(stage, name, "skipped")
            continue
        if (stage, name) in kept:
            setattr(vs, stage, kept[stage, name])
            totals[stage] = totals.get(stage, 0.0) + getattr(kept[stage, name], "wall_s", 0.0)
            report(stage, name, "resumed")
            continue
        report(stage, name, "start")
        if stage == "evaluate":
            result, error, wall, note = evaluate_cached(vp, vs, out_root / "eval-cache", run_dir / "variants" / name,
                                                        env, force, lock)
        else:
            result, error, wall, note = run_stage(stage, stage_config(vp, stage), run_dir / "variants" / name, env,
                                                  lock)
        totals[stage] = totals.get(stage, 0.0) + wall
        if note:
            summary.warnings.append(f"{name}: {note}")
        if error:
            vs.errors.append(error)
            report(stage, name, "failed")
            continue
        setattr(vs, stage, result)
        report(stage, name, "cached" if getattr(result, "cache_hit", False) else "ok")

    summary.versions = run_versions(summary.variants, quantize=any(vp.quantize for vp in plan.variants))
    summary.warnings += [f"{v.name}: model-written code ran in the weaker 'process' sandbox (eval.code_sandbox: "
                         "process): no network, file-system or process isolation" for v in summary.variants
                         if v.evaluate is not None and v.evaluate.code_sandbox == "process"]
    for v in summary.variants:
        v.metrics = variant_metrics(v, r.throughput.headline if r.throughput else "max")
    if any(v.is_baseline and v.metrics for v in summary.variants):
        add_deltas(summary.variants)
        add_paired(summary.variants, seed=r.eval.seed)
    summary.stage_wall_s = totals

    from suite import frontier

    front = frontier.run(frontier.FrontierConfig(summary, run_dir / "frontier.png"))
    if front.png:
        summary.artifacts["frontier_png"] = str(front.png)
    summary.finished = _now()
    from suite import report as reporting

    summary.artifacts["report_html"] = str(reporting.run(reporting.ReportConfig(summary, run_dir / "report.html")).html)
    summary_path = summary.write(run_dir / "summary.json")
    if track:
        report("track", "mlflow", "start")
        t0 = time.perf_counter()
        error = track_summary(summary, summary_path, out_root, resumed=resume is not None)
        summary.stage_wall_s["track"] = time.perf_counter() - t0
        summary.write(summary_path)
        report("track", "mlflow", "failed" if error else "ok")
    return summary


def track_config(summary: RunSummary, summary_path: Path, out_root: Path, uri: str | None = None,
                 resumed: bool = False):
    from suite import track as tracking
    from suite.recipe import Recipe

    r = Recipe.model_validate(summary.recipe)
    uri = uri or r.tracking.uri or tracking.default_uri(out_root)
    return tracking.TrackConfig(summary, summary_path, uri, r.tracking.experiment or r.name,
                                artifact_root=out_root / "mlartifacts" if uri.startswith("sqlite") else None,
                                resumed=resumed)


def track_summary(summary: RunSummary, summary_path: Path, out_root: Path, uri: str | None = None,
                  resumed: bool = False) -> str | None:
    """Log the run to MLflow, or keep it pending in summary.json (``suite sync`` logs it later);
    ``resumed``: a ``suite run --resume``, whose variants that failed before are logged again."""
    from suite import track as tracking

    result, error = tracking.log_or_defer(track_config(summary, summary_path, out_root, uri, resumed))
    if error:
        summary.tracking_pending = error
    elif result is not None:
        summary.tracking, summary.tracking_pending = result.info, None
    summary.write(summary_path)
    return error


def evaluate_cached(vp: VariantPlan, vs: VariantSummary, cache_dir: Path, vdir: Path, env: dict[str, str],
                    force: bool, lock=None) -> StageOutcome:
    """The evaluate stage through suite.eval_cache: reuse a finished evaluation of the same thing."""
    from suite import eval_cache
    from suite.plan import weights_fingerprint

    identity = vs.quantize.key if vs.quantize else weights_fingerprint(vp.model_path)
    key = eval_cache.cache_key(vp.evaluate, identity)
    if not force and (hit := eval_cache.lookup(cache_dir, key)) is not None:
        return StageOutcome(hit, None, 0.0)
    outcome = run_stage("evaluate", vp.evaluate, vdir, env, lock)
    if outcome.result is not None:
        outcome = outcome._replace(result=eval_cache.store(cache_dir, key, outcome.result.model_copy(update={"cache_key": key})))
    return outcome


def preflight_tokenizers(variants: list[VariantSummary]) -> list[str]:
    from suite import preflight

    base = next(v for v in variants if v.is_baseline)
    for v in variants:
        if not v.errors and Path(v.model_path).is_dir():
            v.tokenizer = preflight.tokenizer_facts(v.model_path)
    return [w for v in variants if not v.is_baseline and v.tokenizer
            for w in preflight.compare(base.name, base.tokenizer, v.name, v.tokenizer)]


def preflight_kv(variants: list[VariantSummary]) -> list[str]:
    """Warnings for variants with an FP8 KV cache on a model whose k/v_proj biases stand out (read from
    the safetensors headers, no model load): per-tensor FP8 KV scales are risky there (issue 18)."""
    from suite import kvcheck

    return [w for v in variants if not v.errors and str(v.kv_cache_dtype).startswith("fp8")
            and Path(v.model_path).is_dir()
            for w in kvcheck.preflight_warnings(v.name, v.model_path, calibrated=bool(v.kv_cache))]


def stage_config(vp: VariantPlan, stage: str) -> Record:
    return {"quantize": vp.quantize, "evaluate": vp.evaluate, "benchmark": vp.benchmark}[stage]


def plan_json(plan: Plan, recipe_path: Path | None = None) -> str:
    import json

    return json.dumps({
        "run_dir": str(plan.run_dir), "recipe_path": str(recipe_path) if recipe_path else None,
        "env": plan.env, "jobs": plan.jobs(),
        "variants": {vp.variant.name: {"model_path": vp.model_path,
                                       "quantize": vp.quantize.model_dump() if vp.quantize else None,
                                       "evaluate": vp.evaluate.model_dump() if vp.evaluate else None,
                                       "benchmark": vp.benchmark.model_dump() if vp.benchmark else None}
                     for vp in plan.variants},
    }, indent=2)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
