"""The result store (suite.orchestrate.store): results under their content keys. The evaluation cache is the store
at <output_dir>/eval-cache (an entry written in its layout hits), and a resume keeps a run folder's result only
when it was made under the key its job has in the plan now."""

from __future__ import annotations

import json

from suite.orchestrate import eval_cache, store
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.records.quantize import QuantizeResult
from suite.stages.registry import EVALUATE, QUANTIZE


def evaluation(folder):
    folder.mkdir(parents=True)
    (folder / "results.json").write_text("{}")
    (folder / "samples_suite_mmlu.jsonl").write_text(json.dumps({"doc_id": 0, "acc": 1.0}) + "\n")
    return EvaluateResult(scores=[TaskScore(task="suite_mmlu", metric="acc,none", value=1.0, n=1)],
                          results_file=str(folder / "results.json"),
                          samples_files={"suite_mmlu": str(folder / "samples_suite_mmlu.jsonl")}, wall_s=2.0,
                          engine_load_s=1.0)


def test_put_then_lookup_by_stage_and_key(tmp_path):
    s = store.Store(tmp_path / "cache")
    assert s.lookup(EVALUATE, "k") is None
    put = s.put(EVALUATE, "k", evaluation(tmp_path / "run"))
    assert put.samples_files["suite_mmlu"] == str(tmp_path / "cache" / "k" / "samples_suite_mmlu.jsonl")
    hit = s.lookup(EVALUATE, "k")
    assert hit.cache_hit and hit.results_file == str(tmp_path / "cache" / "k" / "results.json")
    assert (tmp_path / "cache" / "k" / "evaluate.result.json").is_file()  # the evaluation cache's layout
    assert s.lookup(QUANTIZE, "k") is None  # a key holds each stage's result apart


def test_an_entry_of_the_evaluation_cache_is_a_store_entry_and_back(tmp_path):
    eval_cache.store(tmp_path / "cache", "k1", evaluation(tmp_path / "a"))
    assert store.Store(tmp_path / "cache").lookup(EVALUATE, "k1").scores[0].value == 1.0
    store.Store(tmp_path / "cache").put(EVALUATE, "k2", evaluation(tmp_path / "b"))
    assert eval_cache.lookup(tmp_path / "cache", "k2").cache_hit


def test_a_kept_result_holds_its_jobs_key_only_when_it_was_made_under_it():
    made = QuantizeResult(checkpoint="/c", key="abc", cache_hit=False, wall_s=1.0)
    assert store.holds(made, "abc") and not store.holds(made, "abd")
    assert store.holds(made, None)  # a job whose config carries no key: the version and model checks decide
    keyless = EvaluateResult(scores=[], results_file="r", wall_s=0.0, engine_load_s=0.0)
    assert not store.holds(keyless, "any") and store.holds(keyless, None)  # records no key: holds no known key


def test_job_key_is_the_plans_key_of_that_job(demo_recipe_copy, tmp_path):
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe

    plan = make_plan(load_recipe(demo_recipe_copy()), tmp_path / "run")
    fp8 = next(vp for vp in plan.variants if vp.quantize is not None)
    assert store.job_key(fp8, QUANTIZE) == fp8.quantize.key
    assert store.job_key(fp8, EVALUATE) is None
    bf16 = next(vp for vp in plan.variants if vp.quantize is None)
    assert store.job_key(bf16, QUANTIZE) is None


def test_an_entry_copied_under_another_key_is_a_miss(tmp_path):
    """An evaluation cache entry whose folder was copied to another key's name (by hand: 'the same evaluation, only
    a newer vLLM'): its result records the key it was made under, which is not the one looked up: a miss, and the
    evaluation that runs again replaces the entry."""
    import shutil

    s = store.Store(tmp_path / "cache")
    s.put(EVALUATE, "k1", evaluation(tmp_path / "run").model_copy(update={"cache_key": "k1"}))
    shutil.copytree(tmp_path / "cache" / "k1", tmp_path / "cache" / "k2")
    assert s.lookup(EVALUATE, "k1").cache_key == "k1"
    assert s.lookup(EVALUATE, "k2") is None and eval_cache.lookup(tmp_path / "cache", "k2") is None
    s.put(EVALUATE, "k2", evaluation(tmp_path / "run2").model_copy(update={"cache_key": "k2"}))
    assert s.lookup(EVALUATE, "k2").cache_key == "k2"
