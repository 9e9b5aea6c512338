"""Found by the adversarial review: the per-item records a task is judged on are whatever file its stage result names
under that task, and nothing checks that the file's rows are that task's (``paired.item_scores`` keys rows by their own
``task`` field and never compares it with the task judged) or that one file is not named for two tasks. Pointing both
variants' suite_gsm8k at their own suite_mmlu samples (real files, their real sha256) judges GSM8K on MMLU's items:
a failing GSM8K passes, no samples file or hash forged."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import build_gated_run, run_gate

T1, T2 = "suite_gsm8k", "suite_mmlu"


def point_task_at_other(tmp_path, s: dict) -> dict:
    for v in s["variants"]:
        res = tmp_path / "run" / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        data["samples_files"][T1], data["samples_sha256"][T1] = data["samples_files"][T2], data["samples_sha256"][T2]
        other = next(sc["value"] for sc in data["scores"] if sc["task"] == T2)
        for sc in data["scores"]:
            if sc["task"] == T1:
                sc["value"] = other
        res.write_text(json.dumps(data))
        v["stages"]["evaluate"].update({k: data[k] for k in ("samples_files", "samples_sha256", "scores")})
        v["metrics"][f"acc.{T1}"] = v["metrics"][f"acc.{T2}"]
        for k in [k for k in v["metrics"] if k.startswith(f"acc.{T1}.")]:
            del v["metrics"][k]
        v["paired"] = [p for p in v.get("paired") or [] if p.get("task") != T1]  # recomputed by the gate
    return s


def test_a_task_judged_on_another_tasks_records_is_refused(tmp_path, capsys):
    s = build_gated_run(tmp_path, {"default_max_drop": 0.02}, wrong={T1: range(1, 300, 3)}, tasks=(T1, T2))
    assert run_gate(tmp_path, capsys, copy.deepcopy(s))[0] == 1  # honest: fp8 fails GSM8K
    code, out, err = run_gate(tmp_path, capsys, point_task_at_other(tmp_path, s))
    # expected: bad input naming suite_gsm8k's samples file (its rows are suite_mmlu's), or still the GSM8K failure
    assert code in (1, 2), out + err
