"""The engine spread (suite.analysis.engine_spread): one variant scored under two engine configurations, item by item,
from recorded evaluations: the FP8-KV build of Qwen2.5-Coder-0.5B on full GSM8K at 1,024 and at 64 sequences on an
H200 (studies/2026-12-01-fp8-kv-cache/results/h200-fp8kv-batch-20261202, whose paired.txt counted 1,234 of 1,319 items identical, 39/46 flips)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from conftest import make_summary
from suite.analysis.engine_spread import add_engine_spread, engine_spreads
from suite.analysis.summary import metric_name
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.stages.registry import EVALUATE

STUDY = (Path(__file__).resolve().parents[2] / "studies" / "2026-12-01-fp8-kv-cache" / "results"
         / "h200-fp8kv-batch-20261202")


def recorded(name: str, tmp_path: Path) -> EvaluateResult:
    """The study's evaluate result with its samples file unpacked where the result can read it."""
    res = EvaluateResult.model_validate_json((STUDY / f"{name}.evaluate.result.json").read_text())
    samples = tmp_path / f"{name}.samples_suite_gsm8k.jsonl"
    samples.write_bytes(gzip.decompress((STUDY / f"{name}.items.jsonl.gz").read_bytes()))
    return res.model_copy(update={"samples_files": {"suite_gsm8k": str(samples)}})


def test_recorded_fp8kv_at_1024_and_64_sequences_flip_85_of_1319_items(tmp_path):
    default, seqs64 = recorded("fp8kv-default", tmp_path), recorded("fp8kv-seqs64", tmp_path)
    (e,) = engine_spreads({"max_num_seqs=1024": default, "max_num_seqs=64": seqs64})
    assert e.items == 1319 and e.flipped == 39 + 46  # the study's own count (paired.txt)
    assert e.flip_rate == pytest.approx(85 / 1319)
    assert e.spread == pytest.approx(default.scores[0].value - seqs64.scores[0].value)
    assert round(e.scores[0], 4) == 0.1114 and round(e.scores[1], 4) == 0.1061


def test_the_summary_gets_spread_and_flip_rate_metrics_for_each_variant_with_checks(tmp_path):
    s = make_summary({"bf16": {}, "fp8kv": {}}, tasks=("suite_gsm8k",))
    bf16, fp8 = s.variants
    fp8.stages[EVALUATE], fp8.engine_checks = recorded("fp8kv-default", tmp_path), {"max_num_seqs=64": recorded("fp8kv-seqs64",
                                                                                                        tmp_path)}
    assert add_engine_spread(s.variants, metric_name) == []
    m = fp8.metrics
    assert m["acc.suite_gsm8k.flip_rate"] == pytest.approx(85 / 1319)
    assert m["acc.suite_gsm8k.engine_spread"] == pytest.approx(0.1114 - 0.1061, abs=1e-4)
    assert m["acc.suite_gsm8k.engine_configs"] == 2.0 and m["acc.suite_gsm8k.engine_items"] == 1319.0
    assert fp8.engine_spread[0]["configs"] == ["as run", "max_num_seqs=64"]
    assert "acc.suite_gsm8k.flip_rate" not in bf16.metrics  # no check recorded for it: no figure, not 0


def _eval(tmp_path, name, scores):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"task": "t", "doc_id": i, "filter": "none", "acc": x}) + "\n"
                            for i, x in enumerate(scores)))
    return EvaluateResult(scores=[TaskScore(task="t", metric="acc,none", value=sum(scores) / len(scores))],
                          samples_files={"t": str(path)}, results_file="r", wall_s=1, engine_load_s=1)


def test_three_configurations_an_item_flips_if_any_two_disagree_and_only_common_items_count(tmp_path):
    a = _eval(tmp_path, "a", [1, 0, 1, 0])
    b = _eval(tmp_path, "b", [1, 0, 1, 1])
    c = _eval(tmp_path, "c", [0, 0, 1])  # item 3 not scored: left out of the flip rate
    (e,) = engine_spreads({"a": a, "b": b, "c": c})
    assert (e.items, e.flipped) == (3, 1) and e.spread == pytest.approx(0.75 - 1 / 3)
    (same,) = engine_spreads({"a": a, "a again": _eval(tmp_path, "a2", [1, 0, 1, 0])})
    assert same.flipped == 0 and same.spread == 0.0
    assert engine_spreads({"a": a}) == []  # one configuration: nothing to compare
    (tmp_path / "empty.jsonl").write_text("")  # a configuration whose samples file holds no item
    empty = a.model_copy(update={"samples_files": {"t": str(tmp_path / "empty.jsonl")}})
    (none,) = engine_spreads({"a": a, "empty": empty})
    assert none.items == 0 and math.isnan(none.flip_rate)
