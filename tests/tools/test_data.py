"""Local data: the task registry, the CSV loader that keeps cells as released, calibration sets."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import ROOT, SHARED_DATA
from suite.stages.quantize import calibration
from suite.stages.evaluate import tasks
from suite.stages.evaluate.local_data import load_csv_splits


def test_registry_has_the_four_benchmarks():
    reg = tasks.available()
    assert {"suite_mmlu", "suite_gsm8k", "suite_humaneval", "suite_ceval"} <= set(reg)
    assert len(reg["suite_mmlu"].subtasks) == 57 and len(reg["suite_ceval"].subtasks) == 52
    assert tasks.needs_code_execution("suite_humaneval") and not tasks.needs_code_execution("suite_mmlu")
    assert tasks.primary_metric("suite_gsm8k") == "exact_match,strict-match"
    assert tasks.primary_metric("mmlu") == "acc,none"


def test_csv_loader_keeps_cells_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text('"What is 2.50 + 0?",2.50,None,NA,"0,1",A\n')
    ds = load_csv_splits({"test": "t.csv"}, column_names=["question", "A", "B", "C", "D", "answer"])
    row = ds["test"][0]
    assert (row["A"], row["B"], row["C"], row["D"]) == ("2.50", "None", "NA", "0,1")


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")
def test_full_data_row_counts(monkeypatch):
    """The full local data folder has the official row counts (README of ../shared/data)."""
    monkeypatch.chdir(SHARED_DATA)
    n_test = n_val = 0
    for info in (tasks.available()[s] for s in tasks.available()["suite_mmlu"].subtasks):
        files = tasks._merged(info.path)["dataset_kwargs"]["data_files"]
        n_test += len(load_csv_splits(files, column_names=["q", "A", "B", "C", "D", "a"])["test"])
    for info in (tasks.available()[s] for s in tasks.available()["suite_ceval"].subtasks):
        n_val += len(load_csv_splits(tasks._merged(info.path)["dataset_kwargs"]["data_files"])["val"])
    assert (n_test, n_val) == (14042, 1346)
    assert sum(1 for _ in open("gsm8k/test.jsonl")) == 1319


def test_slice_is_a_prefix_of_the_real_data():
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data not present")
    for rel in ("mmlu/test/anatomy_test.csv", "ceval/val/accountant_val.csv"):
        with open(ROOT / "tasks/data" / rel, newline="", encoding="utf-8") as a, \
                open(SHARED_DATA / rel, newline="", encoding="utf-8") as b:
            small, full = list(csv.reader(a)), list(csv.reader(b))
        assert small and small == full[: len(small)]


def test_calibration_sets_parse_and_render():
    from transformers import AutoTokenizer

    assert {"chat-demo", "ultrachat", "gsm8k"} <= set(calibration.available())
    for name in calibration.available():
        calibration.load_set(name)
    tok = AutoTokenizer.from_pretrained(ROOT / "models/smollm2-135m-instruct")
    texts = calibration.load_texts("chat-demo", 8, tok)
    assert len(texts) == 8 and all("<|im_start|>" in t for t in texts)
    assert texts == calibration.load_texts("chat-demo", 8, tok)  # seeded
    assert len(calibration.load_texts("gsm8k", 4, tok)[0]) > 20
    if SHARED_DATA.is_dir():  # the full GSM8K train split: more rows than the slice's 200
        assert len(calibration.load_texts("gsm8k-train", 512, tok)) == 512


def test_calibration_missing_column(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad\npath: bad.jsonl\nformat: qa\n")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match="no column"):
        calibration.load_texts("bad", 1, None, directory=tmp_path)


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data not present")
def test_suite_data_check(tmp_path):
    import shutil

    from conftest import run_cli

    ok = run_cli("data", "check", str(SHARED_DATA))
    assert ok.returncode == 0 and "283 files match SHA256SUMS" in ok.stdout and "mmlu/test         14042" in ok.stdout
    copy = tmp_path / "data"
    shutil.copytree(SHARED_DATA, copy)
    with open(copy / "gsm8k" / "test.jsonl", "a") as fh:  # one row too many, and the bytes changed
        fh.write('{"question": "extra", "answer": "#### 1"}\n')
    bad = run_cli("data", "check", str(copy))
    assert bad.returncode == 2
    assert "gsm8k test has 1320 rows, the official release 1319" in bad.stderr
    assert "test.jsonl: checksum differs from SHA256SUMS" in bad.stderr
    slice_ = run_cli("data", "check", str(ROOT / "tasks" / "data"))  # the demo slice is not the full data
    assert slice_.returncode == 2 and "mmlu val split missing" in slice_.stderr


def test_calibration_sets_formats_and_mixes(tmp_path):
    from transformers import AutoTokenizer

    from conftest import DEMO_MODEL, needs_demo_model  # noqa: F401

    if not (DEMO_MODEL / "tokenizer.json").is_file():
        pytest.skip("demo model missing")
    tok = AutoTokenizer.from_pretrained(DEMO_MODEL)
    code = calibration.load_texts("humaneval-code", 5, tok)
    assert len(code) == 5 and all("def " in t and "return" in t for t in code)       # prompt + solution
    exam = calibration.load_texts("ceval-exam", 5, tok)
    assert all("\nA. " in t and "答案：" in t for t in exam)                         # CSV glob over 52 files
    custom = str(ROOT / "calibration" / "examples" / "my-texts.yaml")
    mix = calibration.load_mix([{"set": "gsm8k", "weight": 3}, {"set": custom, "weight": 1}], 8, tok)
    mine = set(calibration.load_texts(custom, 4, tok))
    assert len(mix) == 8 and sum(t in mine for t in mix) == 2 and sum(t.startswith("Question: ") for t in mix) == 6
    assert calibration.content_hash([{"set": "gsm8k", "weight": 3}, {"set": custom, "weight": 1}]) != \
        calibration.content_hash([{"set": "gsm8k", "weight": 1}, {"set": custom, "weight": 1}])


def test_recipe_calibration_references_are_checked(demo_recipe_copy, tmp_path):
    from conftest import run_cli

    (tmp_path / "mine.yaml").write_text("name: mine\npath: missing.jsonl\nformat: text\n")
    res = run_cli("validate", str(demo_recipe_copy(variants__0__quantization__calibration=[
        {"set": "chat-demo", "weight": 2}, {"set": "mine.yaml", "weight": 1}, {"set": "nope"}])))
    assert res.returncode == 2
    assert "missing.jsonl" in res.stderr and "unknown calibration set 'nope'" in res.stderr
    import shutil

    for f in ("my-texts.yaml", "my-texts.jsonl"):  # a user's own set beside the recipe
        shutil.copy(ROOT / "calibration" / "examples" / f, tmp_path / f)
    ok = run_cli("validate", str(demo_recipe_copy(variants__0__quantization__calibration="my-texts.yaml")))
    assert ok.returncode == 0, ok.stderr


def test_llama3_70b_shape_is_the_published_config():
    """Issue 17's 70B shape: 80 layers, hidden 8192, 64 heads, 8 KV heads, intermediate 28672 (the rest as 8B)."""
    from tools.models import LLAMA3_70B_CONFIG, LLAMA3_8B_CONFIG

    c = LLAMA3_70B_CONFIG
    assert (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
            c["intermediate_size"]) == (80, 8192, 64, 8, 28672)
    assert c["vocab_size"] == LLAMA3_8B_CONFIG["vocab_size"] == 128256 and c["head_dim"] == 128
