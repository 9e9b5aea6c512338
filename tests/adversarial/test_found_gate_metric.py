"""Found by the adversarial review: the headline metric a task is judged on is read from the stage result's own claim
(``scores[].metric``), so a run folder writer picks the metric that passes without touching a samples file or a hash."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import build_gated_run, run_gate
from suite.analysis.gates.recompute import sha256_file

T1 = "suite_gsm8k"


def two_metric_run(tmp_path) -> dict:
    """An honest run whose per-item records carry two metrics, as lm-eval writes them (gsm8k's strict-match and
    flexible-extract filters, a multiple-choice task's acc and acc_norm): the headline ``acc`` on which fp8 loses a
    third of the items, and ``acc_norm`` on which it matches the baseline."""
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}}, wrong={T1: range(1, 300, 3)})
    run = tmp_path / "run"
    for v in s["variants"]:
        f = Path(v["stages"]["evaluate"]["samples_files"][T1])
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        for r in rows:
            r["acc_norm"] = float(r["doc_id"] % 3 != 0)
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        sha = v["stages"]["evaluate"]["samples_sha256"][T1] = sha256_file(f)
        res = run / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        data["samples_sha256"][T1] = sha
        res.write_text(json.dumps(data))
    return s


def swap_headline(tmp_path, s: dict, metric: str = "acc_norm,none") -> dict:
    """The edit: each variant's evaluate result and summary say the task's headline is ``metric`` (values recomputed to
    agree); no samples file and no recorded sha256 is touched."""
    for v in s["variants"]:
        res = tmp_path / "run" / "variants" / v["name"] / "evaluate.result.json"
        data = json.loads(res.read_text())
        for sc in data["scores"]:
            sc["metric"], sc["value"] = metric, 200 / 300
        res.write_text(json.dumps(data))
        v["stages"]["evaluate"]["scores"] = data["scores"]
        v["metrics"][f"acc.{T1}"] = 200 / 300
        for k in [k for k in v["metrics"] if k.startswith(f"acc.{T1}.")]:
            del v["metrics"][k]
        v["paired"] = []  # the gate recomputes a dropped paired record, on the claimed metric
    return s


def test_headline_metric_swapped_in_results_is_refused(tmp_path, capsys):
    s = two_metric_run(tmp_path)
    assert run_gate(tmp_path, capsys, copy.deepcopy(s))[0] == 1  # honest: fp8 fails max_drop on acc
    code, out, err = run_gate(tmp_path, capsys, swap_headline(tmp_path, s))
    # expected: the gate refuses (exit 2) a headline metric that is not the task's, or still judges acc (exit 1)
    assert code in (1, 2), out + err


def test_headline_metric_swapped_is_refused_with_team_recipe(tmp_path, capsys):
    s = two_metric_run(tmp_path)
    team = tmp_path / "team-recipe.yaml"
    team.write_bytes((tmp_path / "run" / "recipe.yaml").read_bytes())
    assert run_gate(tmp_path, capsys, copy.deepcopy(s), "--recipe", str(team))[0] == 1
    code, out, err = run_gate(tmp_path, capsys, swap_headline(tmp_path, s), "--recipe", str(team))
    assert code in (1, 2), out + err
