"""eval.sequential's looks through the real lm-eval (simple_evaluate with samples=): each look's rows carry the
documents' true doc_ids (lm-eval renumbers a subset's documents and maps them back through the sorted index list)
and the prompt of that document. The model is lm-eval's own DummyLM (no engine: what is checked is which documents
lm-eval scores and how it names them, not the answers)."""

from __future__ import annotations

import functools
import json

import pytest

from conftest import DEMO_MODEL, ROOT, needs_demo_model
from suite.records.evaluate import EngineConfig, EvaluateConfig, SequentialConfig, TaskRun
from suite.runtime import sequential as seq
from suite.stages.evaluate import looks


@pytest.fixture
def lm_eval_setup(monkeypatch):
    pytest.importorskip("lm_eval")
    from lm_eval.models.dummy import DummyLM
    from lm_eval.tasks import TaskManager

    from suite.stages.evaluate.tasks import TASKS_DIR

    monkeypatch.chdir(ROOT / "tasks" / "data")  # the local task YAMLs read their data relative to it
    lm = DummyLM()
    lm.tokenizer_name = str(DEMO_MODEL)  # a local tokenizer (DummyLM's default is a hub model)
    return lm, TaskManager(include_path=[str(TASKS_DIR)], include_defaults=False)


@needs_demo_model()
def test_each_look_scores_its_documents_under_their_true_doc_ids(lm_eval_setup, tmp_path):
    import lm_eval

    lm, tm = lm_eval_setup
    config = EvaluateConfig(engine=EngineConfig(model="m"), tasks=[TaskRun(name="suite_gsm8k", limit=12)],
                            data_dir=".", include_path=".", output_dir=str(tmp_path),
                            sequential=SequentialConfig(looks=3, seed=5))
    calls = []

    def evaluate(**kw):
        calls.append(kw["samples"])
        return lm_eval.simple_evaluate(model=lm, log_samples=True, task_manager=tm, fewshot_random_seed=1, **kw)

    merged, scores, records = looks.score_in_looks(config, lm, tm, evaluate)
    planned = seq.look_items([("suite_gsm8k", i) for i in range(12)], 5, 3)
    assert [sorted(c["suite_gsm8k"]) for c in calls] == [sorted(i for _, i in part) for part in planned]
    assert any(c["suite_gsm8k"] != list(range(len(c["suite_gsm8k"]))) for c in calls)  # not a prefix of the data
    rows = merged["samples"]["suite_gsm8k"]
    docs = [json.loads(line) for line in open(ROOT / "tasks" / "data" / "gsm8k" / "test.jsonl")][:12]
    filters = {r["filter"] for r in rows}  # GSM8K: strict-match and flexible-extract, a row each
    assert sorted(r["doc_id"] for r in rows) == sorted(list(range(12)) * len(filters))
    for r in rows:  # each row is the document its doc_id names, and its prompt asks that document's question
        assert r["doc"]["question"] == docs[r["doc_id"]]["question"]
        assert docs[r["doc_id"]]["question"] in json.dumps(r["arguments"], ensure_ascii=False)
    assert records["suite_gsm8k"].items_used == 12 and scores[0].n == 12
