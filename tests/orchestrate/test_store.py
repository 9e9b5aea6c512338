"""The result store (suite.orchestrate.store): results under their content keys. The evaluation cache is the store
at <store>/eval-cache, and a run folder's result is a hit only when it was made under the key its job has in the
plan now."""

from __future__ import annotations

import json

from suite.orchestrate import store
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


def test_a_kept_result_holds_its_jobs_key_only_when_it_was_made_under_it():
    made = QuantizeResult(checkpoint="/c", key="abc", cache_hit=False, wall_s=1.0)
    assert store.holds(made, "abc") and not store.holds(made, "abd")
    assert not store.holds(made, None)  # a job whose key is not known: nothing is a hit for it
    keyless = EvaluateResult(scores=[], results_file="r", wall_s=0.0, engine_load_s=0.0)
    assert not store.holds(keyless, "any") and not store.holds(keyless, None)  # records no key: never a hit


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
    assert s.lookup(EVALUATE, "k2") is None
    s.put(EVALUATE, "k2", evaluation(tmp_path / "run2").model_copy(update={"cache_key": "k2"}))
    assert s.lookup(EVALUATE, "k2").cache_key == "k2"


def built_checkpoint(folder, key: str = "ck", weights: str = "w") -> QuantizeResult:
    """A checkpoint folder as the quantize stage leaves it: weights, its result with their content hash, the mark."""
    from suite.runtime import ckptfiles

    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text(weights)
    made = QuantizeResult(checkpoint=str(folder), key=key, cache_hit=False, wall_s=1.0,
                          content_sha256=ckptfiles.content_sha256(folder))
    made.write(folder / ckptfiles.RESULT_FILE)
    (folder / ckptfiles.COMPLETE_MARK).write_text(key)
    return made


def test_a_checkpoint_is_found_only_complete_under_its_key_and_with_the_files_its_result_hashed(tmp_path):
    """The checkpoint store (the quantize stage's own check too): a folder without its mark, made under another key,
    whose files changed since its result hashed them, or whose result records no hash, is not found."""
    from suite.runtime import ckptfiles

    folder = tmp_path / "checkpoints" / "fp8-ck"
    made = built_checkpoint(folder)
    found = store.CheckpointStore(folder).lookup(QUANTIZE, "ck")
    assert found.cache_hit and found.content_sha256 == made.content_sha256 and found.job is None
    assert store.CheckpointStore(folder).lookup(QUANTIZE, "other") is None
    (folder / "model.safetensors").write_text("x")  # same size, other bytes
    assert store.CheckpointStore(folder).lookup(QUANTIZE, "ck") is None
    assert ckptfiles.set_aside(folder) is not None and not folder.exists()  # out of the build's way
    made = built_checkpoint(folder)
    made.model_copy(update={"content_sha256": None}).write(folder / ckptfiles.RESULT_FILE)
    assert store.CheckpointStore(folder).lookup(QUANTIZE, "ck") is None  # nothing to check its files against
    (folder / ckptfiles.COMPLETE_MARK).unlink()
    assert store.CheckpointStore(folder).lookup(QUANTIZE, "ck") is None and ckptfiles.set_aside(folder) is None


def test_a_run_folders_checkpoint_result_is_a_hit_only_while_its_checkpoint_is_the_one_it_records(tmp_path):
    """The run folder's quantize result names its key and content hash: a hit while the planned folder holds that
    checkpoint; gone (a fresh machine), or another build there (another content), a miss, set aside, and the
    checkpoint found there (another build) is filed as the job's instead, so what runs after it is keyed by it."""
    from suite.records.quantize import QuantizeConfig

    ckpt = tmp_path / "checkpoints" / "fp8-ck"
    config = QuantizeConfig(model="m", checkpoint_dir=str(ckpt), key="ck")
    vdir = tmp_path / "run" / "variants" / "fp8"
    made = built_checkpoint(ckpt)
    folder = store.RunFolder(vdir)
    folder.put(QUANTIZE, "ck", made)
    shared = store.CheckpointStore(ckpt)
    assert store.find(QUANTIZE, "ck", config, folder, shared).where == "run"
    import shutil

    shutil.rmtree(ckpt)  # a fresh machine: no checkpoint
    gone = store.find(QUANTIZE, "ck", config, folder, shared)
    assert gone.result is None and gone.tag == "stale-checkpoint" and gone.earlier.content_sha256 == made.content_sha256
    assert (vdir / "quantize.result.stale-checkpoint.json").is_file()
    folder.put(QUANTIZE, "ck", made)
    other = built_checkpoint(ckpt, weights="another GPU's rounding")  # rebuilt elsewhere since, into the same folder
    found = store.find(QUANTIZE, "ck", config, folder, shared)
    assert found.where == "store" and found.result.content_sha256 == other.content_sha256 != made.content_sha256
    assert found.earlier.content_sha256 == made.content_sha256
    filed = QuantizeResult.read(vdir / "quantize.result.json")  # the job's result now: bound to this variant's job
    assert filed.content_sha256 == other.content_sha256 and filed.job.variant == "fp8" and filed.job.key == "ck"
    assert (vdir / "quantize.config.json").is_file()


def test_a_stored_evaluation_made_with_other_versions_than_the_environments_is_not_a_hit(tmp_path):
    """Its key is the one looked up (a copied or rewritten entry), but it says it ran on another vLLM: not a hit, as a
    run folder's result is not (store.other_versions)."""
    from suite.runtime.envs import serve_versions

    s = store.Store(tmp_path / "cache")
    now = serve_versions()
    s.put(EVALUATE, "k", evaluation(tmp_path / "a").model_copy(update={"versions": now}))
    assert s.lookup(EVALUATE, "k") is not None
    s.put(EVALUATE, "k", evaluation(tmp_path / "b").model_copy(update={"versions": {**now, "vllm": "0.0.1-other"}}))
    assert s.lookup(EVALUATE, "k") is None
